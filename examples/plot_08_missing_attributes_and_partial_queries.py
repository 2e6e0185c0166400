"""
================================================================
Missing attributes, per-attribute probabilities, partial queries
================================================================

Real ECG archives are incomplete: many patients have no recorded sex or age,
and a user searching them often cares about one attribute ("female, any age
and class") rather than a whole combination. This example shows the three
tools for that, on the PTB-XL sample shipped with the package (500 12-lead
records, class x sex x age quartile, split by patient):

* training with missing attributes: ``CROCSClusterer(missing="posterior")``
  (the default) attracts an ECG to every prototype consistent with the
  attributes it has, instead of dropping it;
* ``predict_proba(X, attribute="age")``: the probability of each value of one
  attribute, summed over the others;
* partial queries: ``PrototypeRetriever.query({"sex": "F"})`` searches
  by the prototypes of every matching combination.

See :ref:`missing_attributes` and :ref:`partial_queries` for the contract
and the benchmark figures.
"""

# %%
# Data with missing labels
# ------------------------
# Of the training patients, 40 % lose their sex and, independently, 40 % lose
# their age group (for all their ECGs); the class is always known. The
# held-out patients keep every label, for scoring only.

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.frozen import FrozenEstimator

from sklearn_crocs import CROCSClusterer, PrototypeRetriever
from sklearn_crocs.datasets import load_ptbxl_sample_frames
from sklearn_crocs.metrics import attribute_accuracy_score

data = load_ptbxl_sample_frames(random_state=0)
X_train, y_train, groups = data.X_train, data.y_train, data.groups_train
X_test, y_test = data.X_test, data.y_test

rng = np.random.RandomState(0)
patients = np.unique(groups)
y_missing = y_train.copy()
for attribute in ("sex", "age"):
    lost = rng.choice(patients, size=int(0.4 * len(patients)), replace=False)
    y_missing.loc[np.isin(groups, lost), attribute] = None
known = y_missing.notna().all(axis=1).to_numpy()
print(
    f"{len(y_missing)} training ECGs, {known.sum()} with every attribute known"
)
print(y_missing.isna().mean().round(2).to_string())

# %%
# Marginalise or drop
# -------------------
# The same estimator, once on every training ECG (the missing values summed
# out of the loss) and once on the fully labelled ECGs only. Prediction is
# the same operation for both: the nearest prototype, whose attributes are
# all known. Half the default 40 epochs keeps this example short.

marginalised = CROCSClusterer(max_epochs=20, random_state=0)
marginalised.fit(X_train, y_missing, groups=groups)
dropped = CROCSClusterer(max_epochs=20, random_state=0)
dropped.fit(X_train[known], y_missing[known], groups=groups[known])
accuracy = pd.DataFrame(
    {
        "marginalise": attribute_accuracy_score(
            y_test, marginalised.predict(X_test)
        ),
        "drop": attribute_accuracy_score(y_test, dropped.predict(X_test)),
    }
)
print(accuracy.round(3).to_string())

fig, ax = plt.subplots(figsize=(6, 3.5), layout="constrained")
accuracy.plot.bar(ax=ax, rot=0)
ax.set_ylabel("accuracy on held-out patients")
ax.set_title("40 % of sex and age missing in training")

# %%
# Probabilities of one attribute
# ------------------------------
# ``predict_proba(X)`` gives one column per prototype; with ``attribute=``
# it sums them over the other attributes, one column per value of that
# attribute, in its declared order (the age groups from youngest to oldest).

age_groups = marginalised.categories_[
    marginalised.attribute_names_.index("age")
]
proba = marginalised.predict_proba(X_test[:8], attribute="age")
fig, ax = plt.subplots(figsize=(7, 3.5), layout="constrained")
left = np.zeros(len(proba))
# A sequential colour scale for the ordered age groups (no green or red,
# which mean match and no match in this documentation's figures).
colours = plt.get_cmap("Blues")(np.linspace(0.3, 0.9, len(age_groups)))
for k, group in enumerate(age_groups):
    ax.barh(
        np.arange(len(proba)),
        proba[:, k],
        left=left,
        color=colours[k],
        label=str(group),
    )
    left += proba[:, k]
ax.set_yticks(
    np.arange(len(proba)),
    [f"ECG {i} (true {a})" for i, a in enumerate(y_test["age"][:8])],
)
ax.invert_yaxis()
ax.set_xlabel("P(age group)")
ax.legend(
    title="age group",
    loc="center left",
    bbox_to_anchor=(1, 0.5),
    fontsize="small",
)

# %%
# Partial queries
# ---------------
# Each value of each single attribute is a query; the held-out ECGs are the
# database. ``partial="min"`` ranks an ECG by its distance to the nearest
# matching prototype, ``partial="mean"`` by its distance to their mean
# direction. A retrieved ECG is relevant when it has the queried value; the
# grey ticks show the fraction of such ECGs in the database (what a random
# search retrieves).

queries = [
    {name: value}
    for name, values in zip(
        marginalised.attribute_names_, marginalised.categories_
    )
    for value in values
]
labels = [f"{k}={v}" for q in queries for k, v in q.items()]
precision = {}
for how in ("min", "mean"):
    retriever = PrototypeRetriever(
        FrozenEstimator(marginalised), partial=how, n_neighbors=10
    )
    indices = retriever.fit(X_test).query(queries, return_distance=False)
    precision[how] = [
        np.mean(y_test[name].to_numpy()[rows] == value)
        for query, rows in zip(queries, indices)
        for name, value in query.items()
    ]
chance = [np.mean(y_test[k] == v) for q in queries for k, v in q.items()]

fig, ax = plt.subplots(figsize=(7, 3.5), layout="constrained")
positions = np.arange(len(queries))
for offset, how in ((-0.2, "min"), (0.2, "mean")):
    ax.bar(
        positions + offset, precision[how], width=0.4, label=f'partial="{how}"'
    )
ax.scatter(
    positions,
    chance,
    marker="_",
    s=400,
    color="grey",
    label="random",
    zorder=3,
)
ax.set_xticks(positions, labels, rotation=30, ha="right")
ax.set_ylabel("relevant among the 10 nearest")
ax.legend(fontsize="small")
plt.show()

# sphinx_gallery_thumbnail_number = 3
