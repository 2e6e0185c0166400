"""
===========================================
Ordinal attributes and age in years
===========================================

Age groups are ordered: a patient of 45-58 is closer to 59-70 than to 71 or
more. An *ordinal* attribute tells CROCS so: in the soft weights of the loss
(the paper's ``q(A_i, A_j)``) the distance between two groups' ranks,
``|rank_i - rank_j|``, replaces the 0/1 mismatch, so that an ECG is pulled
more towards the prototypes of neighbouring age groups than of distant ones.
An attribute is ordinal when ``y`` declares it as a pandas ordered
categorical (``ordinal="auto"``) or when the ``ordinal`` parameter names it.

Age need not be grouped beforehand: ``continuous={"age": 4}`` bins the
ages in years into quartiles of the training ECGs inside the estimator; the
groups are ordinal, their edges are in ``bin_edges_``, and ages given later
(to ``score`` or the scorers) are binned with the same edges.

See :ref:`ordinal_attributes`.
"""

# %%
# Ages in years
# -------------
# The 500 PTB-XL records shipped with the package, cut into 5-s frames and
# split 60:40 by patient, with each patient's age in years.
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.metrics import ConfusionMatrixDisplay

from sklearn_crocs import CROCSClusterer
from sklearn_crocs.datasets import load_ptbxl_sample, patient_split
from sklearn_crocs.preprocessing import make_frames

sample = load_ptbxl_sample()
train, _, test = patient_split(
    sample.groups, val_size=0.0, test_size=0.4, random_state=0
)
frames = {}
for name, records in (("train", train), ("test", test)):
    frames[name] = make_frames(
        sample.data[records],
        500,
        attributes=sample.attributes.iloc[records].reset_index(drop=True),
        groups=sample.groups[records],
    )
X_train, y_train, groups_train = frames["train"]
X_test, y_test, _ = frames["test"]
y_train.head()

# %%
# Binned inside the estimator
# ---------------------------
# ``continuous={"age": 4}``: quartiles of the training ages. The age groups
# are ordinal by default (``ordinal="auto"``); ``ordinal=None`` treats them
# as unordered labels, as the paper does.
ordinal = CROCSClusterer(continuous={"age": 4}, random_state=0)
ordinal.fit(X_train, y_train, groups=groups_train)
print("age bin edges:", ordinal.bin_edges_["age"])
print("age groups:", list(ordinal.categories_[2]))

nominal = CROCSClusterer(continuous={"age": 4}, ordinal=None, random_state=0)
nominal.fit(X_train, y_train, groups=groups_train)

# %%
# The held-out ages, binned with the training edges, against the age group of
# each ECG's nearest prototype. The mean distance in groups counts an error
# of two groups twice.
groups = list(ordinal.categories_[2])
true = ordinal.attribute_codec_.read(y_test)["age"].astype(str)
rank = {group: k for k, group in enumerate(groups)}
rows = {}
for name, model in (("ordinal", ordinal), ("nominal", nominal)):
    predicted = model.predict(X_test)["age"].astype(str)
    distance = np.abs(true.map(rank) - predicted.map(rank))
    rows[name] = {
        "age accuracy": np.mean(distance == 0),
        "mean distance (groups)": distance.mean(),
        "score (mean accuracy)": model.score(X_test, y_test),
    }
print(pd.DataFrame(rows).T.round(3).to_string())

fig, axes = plt.subplots(1, 2, figsize=(7, 3.4), layout="constrained")
for ax, (name, model) in zip(axes, (("ordinal", ordinal), ("nominal", nominal))):
    ConfusionMatrixDisplay.from_predictions(
        true,
        model.predict(X_test)["age"].astype(str),
        labels=groups,
        ax=ax,
        cmap="Blues",
        colorbar=False,
    )
    ax.set_title('ordinal="auto"' if name == "ordinal" else "ordinal=None")
    ax.tick_params(axis="x", labelrotation=30)
plt.show()
