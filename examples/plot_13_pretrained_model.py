"""
======================================================
Start from the shipped model: other hospitals' ECGs
======================================================

The package ships a CROCS model trained on the 4,403 PTB-XL records of its
development data (Wagner et al., 2020, CC BY 4.0). It reads 12-lead
recordings as they come, at any rate, so that ECGs of another hospital go in
unchanged. Here it reads the 102 LUDB records bundled with the package
(Lobachevsky University, Nizhny Novgorod: another country, another device,
500 Hz, raw millivolts), which it never saw, first as it is (zero-shot:
sex and age group), then fine-tuned on LUDB's own attribute, the rhythm.
"""

# %%
# The shipped model, as it is
# ---------------------------
# :meth:`~sklearn_crocs.CROCSClusterer.from_pretrained` reads the model file
# (no code runs; see :ref:`persistence`). ``sampling_rate=500`` tells it the
# rate of the recordings; it conditions them (band-pass 0.67-40 Hz, 100 Hz,
# z-score per lead) and embeds each 10-s record as the mean of its 5-s frames.
import matplotlib.pyplot as plt
import numpy as np
from sklearn.metrics import ConfusionMatrixDisplay

from sklearn_crocs import CROCSClusterer, pretrained_info
from sklearn_crocs.datasets import load_ludb, patient_split
from sklearn_crocs.metrics import attribute_accuracy_score, attribute_ami_score
from sklearn_crocs.preprocessing import SignalConditioner, make_frames

model = CROCSClusterer.from_pretrained("ptbxl")
info = pretrained_info("ptbxl")
print(info["records"], info["license"])
print(dict(zip(model.attribute_names_, model.categories_)))

ludb = load_ludb()
predicted = model.predict(ludb.data, sampling_rate=ludb.fs)

# %%
# The model bins ages with the quartile edges of its PTB-XL training ages,
# which it stores; the truth is binned with the same edges. The majority
# rate (always answering the commonest value) is the bar to beat.
edges = model.bin_edges_["age"]
age_labels = np.asarray(model.categories_[2], dtype=object)
bins = np.searchsorted(edges[1:-1], ludb.attributes["age"], side="right")
true_age = age_labels[bins]
truth = {"sex": ludb.attributes["sex"].to_numpy(), "age": true_age}
fig, axes = plt.subplots(1, 2, figsize=(7, 3.4), layout="constrained")
for ax, name in zip(axes, ("sex", "age")):
    accuracy = np.mean(predicted[name].to_numpy() == truth[name])
    counts = np.unique(truth[name], return_counts=True)[1]
    majority = counts.max() / counts.sum()
    ConfusionMatrixDisplay.from_predictions(
        truth[name], predicted[name].to_numpy(), labels=model.categories_[
            model.attribute_names_.index(name)], ax=ax, colorbar=False,
    )  # fmt: skip
    ax.set_title(f"{name}: {accuracy:.0%} (majority {majority:.0%})")
fig.suptitle("The shipped PTB-XL model on LUDB, zero-shot")
plt.show()

# %%
# Fine-tuned on LUDB's rhythm
# ---------------------------
# A model of LUDB's own attributes (rhythm, sex, age quartiles of its own
# training patients) starts from the shipped encoder with
# ``pretrained="ptbxl"``; its prototypes start afresh. The patients are split
# 60:40; the records are conditioned as the shipped model's were and cut into
# 5-s frames.
conditioner = SignalConditioner(sampling_rate=ludb.fs, target_rate=100)
records = conditioner.fit_transform(ludb.data)
y = ludb.attributes[["rhythm", "sex", "age"]]
train, _, test = patient_split(
    ludb.groups, stratify=y["rhythm"], val_size=0.0, test_size=0.4,
    random_state=0,
)
X_train, y_train, g_train = make_frames(
    records[train], 500, attributes=y.iloc[train], groups=ludb.groups[train]
)
params = {"class_attribute": "rhythm", "continuous": {"age": 4},
          "sampling_rate": 100, "longer_signals": "average",
          "random_state": 0}  # fmt: skip
scratch = CROCSClusterer(**params).fit(X_train, y_train, groups=g_train)
tuned = CROCSClusterer(**params, pretrained="ptbxl").fit(
    X_train, y_train, groups=g_train
)

# %%
# Scored on the whole records of the held-out patients, age binned with
# each model's own edges (those of the training patients):
for name, fitted in {"from scratch": scratch, "fine-tuned": tuned}.items():
    y_test = y.iloc[test].reset_index(drop=True)
    edges = fitted.bin_edges_["age"]
    labels = np.asarray(fitted.categories_[2], dtype=object)
    bins = np.searchsorted(edges[1:-1], y_test["age"], side="right")
    y_test["age"] = labels[bins]
    predicted = fitted.predict(records[test])
    accuracy = attribute_accuracy_score(y_test, predicted)
    ami = attribute_ami_score(y_test, predicted)
    scores = ", ".join(f"{k} {v:.2f}" for k, v in accuracy.items())
    print(f"{name:13s} accuracy {scores}; rhythm AMI {ami['rhythm']:.2f}")

# %%
# One split of 102 records is noisy: the transfer benchmark
# (:ref:`pretrained`) repeats this over 5 patient-grouped folds and 3 seeds.
