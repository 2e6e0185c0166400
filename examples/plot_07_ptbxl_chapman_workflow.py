"""
====================================================================
The paper's pipeline on PTB-XL and Chapman-Shaoxing, step by step
====================================================================

CROCS (Kiyasseh, Zhu & Clifton, NeurIPS 2021) is evaluated on two 12-lead ECG
databases that users download themselves:

* **Chapman-Shaoxing** (Zheng et al., 2020): 10-s records at 500 Hz,
  downsampled to 250 Hz, every lead a separate single-lead instance of 2500
  samples min-max scaled to [0, 1]; attributes rhythm group (AFIB, GSVT, SB,
  SR) x sex x age quartile; the small CNN encoder, E = 128, batch 256,
  learning rate 1e-4.
* **PTB-XL** (Wagner et al., 2020): 10-s records at 500 Hz cut into two 5-s
  frames of 2500 samples, all 12 leads, each frame z-scored; attributes
  diagnostic superclass (CD, HYP, MI, NORM, STTC; single-label records only)
  x sex x age quartile; a ResNet18-style encoder, E = 256, batch 128,
  learning rate 1e-5.

Both are split 60:20:20 at the *patient* level, stratified by class, and age
quartiles are learned on the training patients only.

To run the full pipelines on your copies, point these environment variables
at them before running this script::

    SKLEARN_CROCS_CHAPMAN=/path/to/chapman   # Diagnostics.xlsx + ECGData/,
                                            # or the WFDB (.hea/.mat) release
    SKLEARN_CROCS_PTBXL=/path/to/ptb-xl      # holds ptbxl_database.csv
    SKLEARN_CROCS_EPOCHS=100                 # optional, default 100

(:func:`~sklearn_crocs.datasets.fetch_chapman` and
:func:`~sklearn_crocs.datasets.fetch_ptbxl` download them when online.)
Without them, the same two pipelines run on the 102 LUDB records shipped with
the package, for a few epochs, in well under two minutes on a laptop: the
numbers are then only a smoke test, not a reproduction of the paper.
"""

# %%
# Imports
# -------
import os
import sys
import time

import matplotlib.pyplot as plt
import numpy as np

from sklearn_crocs import CROCSClusterer
from sklearn_crocs.datasets import (
    get_data_home,
    load_chapman,
    load_ludb,
    load_ptbxl,
    patient_split,
)
from sklearn_crocs.metrics import evaluate_prototypes
from sklearn_crocs.preprocessing import (
    AgeGroupEncoder,
    leads_as_instances,
    make_frames,
    normalize_frames,
    resample_signals,
)

RANDOM_STATE = 0

# %%
# Shared steps
# ------------
# Records with an unknown age cannot be given an age group; they are left out
# (and counted) before splitting. The patient split is stratified by the
# class, the first attribute column. Age quartiles are fitted on the training
# patients and applied to everyone. The report gives, per attribute, the
# accuracy and the adjusted mutual information (AMI) of the attributes of the
# nearest prototype, as in the paper's Table 1.


def drop_unknown_age(bunch):
    """Keep the records whose age is known; say how many were dropped."""
    known = bunch.attributes["age"].notna().to_numpy()
    if not known.all():
        print(f"  leaving out {np.sum(~known)} record(s) with unknown age")
    return (
        bunch.data[known],
        bunch.attributes[known].reset_index(drop=True),
        np.asarray(bunch.groups)[known],
    )


def with_age_groups(attributes, train_records):
    """Attributes with age replaced by quartiles fitted on training records."""
    ages = attributes[["age"]]
    encoder = AgeGroupEncoder(n_groups=4).fit(ages.iloc[train_records])
    out = attributes.copy()
    out["age"] = encoder.transform(ages).ravel()
    return out, encoder.labels_


def report(model, X, y, name):
    """The paper's clustering and retrieval tables for CP and TP CROCS."""
    print(f"\n{name} ({len(X)} instances, {y.iloc[:, 0].nunique()} classes)")
    return evaluate_prototypes(model, X, y, file=sys.stdout).clustering


# %%
# Chapman-Shaoxing
# ----------------
# 500 Hz -> 250 Hz, so each 10-s record is one 2500-sample frame; the frames
# are split by patient, turned into 12 single-lead instances, and min-max
# scaled.


def chapman_pipeline(bunch, **model_params):
    data, attributes, groups = drop_unknown_age(bunch)
    if bunch.fs != 250:
        data = resample_signals(data, bunch.fs, 250)
    frames, attributes, groups = make_frames(
        data, frame_length=2500, attributes=attributes, groups=groups
    )
    train, val, test = patient_split(
        groups, stratify=attributes.iloc[:, 0], random_state=RANDOM_STATE
    )
    attributes, age_labels = with_age_groups(attributes, train)
    print(f"  age groups (training quartiles): {age_labels}")

    def instances(rows):
        y = attributes.iloc[rows].reset_index(drop=True)
        X, y, g, _ = leads_as_instances(frames[rows], y, groups[rows])
        return normalize_frames(X, method="minmax"), y, g

    X_train, y_train, g_train = instances(train)
    model = CROCSClusterer(
        encoder="cnn", random_state=RANDOM_STATE, **model_params
    ).fit(X_train, y_train, groups=g_train)
    print(f"  trained {model.n_iter_} epochs")
    return {
        split: report(model, *instances(rows)[:2], f"Chapman, {split}")
        for split, rows in (("validation", val), ("test", test))
    }


# %%
# PTB-XL
# ------
# Two non-overlapping 5-s frames per record, all 12 leads, z-scored per frame
# and lead; the ResNet encoder takes the 12 leads as input channels.


def ptbxl_pipeline(bunch, **model_params):
    data, attributes, groups = drop_unknown_age(bunch)
    frames, attributes, groups = make_frames(
        data, frame_length=2500, attributes=attributes, groups=groups
    )
    frames = normalize_frames(frames, method="zscore")
    train, val, test = patient_split(
        groups, stratify=attributes.iloc[:, 0], random_state=RANDOM_STATE
    )
    attributes, age_labels = with_age_groups(attributes, train)
    print(f"  age groups (training quartiles): {age_labels}")
    model = CROCSClusterer(
        encoder="resnet", random_state=RANDOM_STATE, **model_params
    ).fit(frames[train], attributes.iloc[train], groups=groups[train])
    print(f"  trained {model.n_iter_} epochs")
    return {
        split: report(
            model,
            frames[rows],
            attributes.iloc[rows].reset_index(drop=True),
            f"PTB-XL, {split}",
        )
        for split, rows in (("validation", val), ("test", test))
    }


# %%
# Your downloaded copies
# ----------------------
# With the paper's hyperparameters. ``cache_dir`` keeps the decoded signals
# in a ``.npy`` file that later runs memory-map instead of decoding the WFDB
# or CSV files again.

epochs = int(os.environ.get("SKLEARN_CROCS_EPOCHS", "100"))


if os.environ.get("SKLEARN_CROCS_CHAPMAN"):
    print("Chapman-Shaoxing")
    chapman = load_chapman(
        os.environ["SKLEARN_CROCS_CHAPMAN"],
        target_fs=250,
        cache_dir=os.path.join(get_data_home(), "cache"),
        verbose=1,
    )
    chapman_pipeline(
        chapman,
        embedding_dim=128,
        batch_size=256,
        lr=1e-4,
        max_epochs=epochs,
        validation_fraction=0.2,
        verbose=1,
    )

if os.environ.get("SKLEARN_CROCS_PTBXL"):
    print("PTB-XL")
    ptbxl = load_ptbxl(
        os.environ["SKLEARN_CROCS_PTBXL"],
        sampling_rate=500,
        cache_dir=os.path.join(get_data_home(), "cache"),
        verbose=1,
    )
    ptbxl_pipeline(
        ptbxl,
        embedding_dim=256,
        batch_size=128,
        lr=1e-5,
        max_epochs=epochs,
        validation_fraction=0.2,
        verbose=1,
    )

# %%
# Offline: the bundled LUDB records in both formats
# -------------------------------------------------
# The 102 LUDB records are stored as the databases deliver theirs: 10 s of
# 12 leads at 500 Hz, in mV. Lead II of the first record as loaded, and as
# each pipeline hands it to the encoder: resampled to 250 Hz and scaled to
# [0, 1] (Chapman), or cut into two 5-s frames, each z-scored (PTB-XL).

ludb = load_ludb()
n_records, n_leads, n_samples = ludb.data.shape
print(f"LUDB: {n_records} records x {n_leads} leads x {n_samples} samples")
record, lead = ludb.data[:1], ludb.lead_names.index("II")
chapman_view = normalize_frames(
    resample_signals(record, ludb.fs, 250), method="minmax"
)
ptbxl_view = normalize_frames(make_frames(record, 2500)[0], method="zscore")

fig, axes = plt.subplots(3, 1, figsize=(7, 5.6), layout="constrained")
seconds = np.arange(n_samples) / ludb.fs
axes[0].plot(seconds, record[0, lead], color="black", linewidth=0.6)
axes[0].set(title="as loaded: 500 Hz", ylabel="mV")
seconds = np.arange(chapman_view.shape[-1]) / 250
axes[1].plot(seconds, chapman_view[0, lead], color="black", linewidth=0.6)
axes[1].set(title="Chapman pipeline: 250 Hz, min-max", ylabel="[0, 1]")
for i, frame in enumerate(ptbxl_view):
    seconds = 5 * i + np.arange(frame.shape[-1]) / ludb.fs
    axes[2].plot(seconds, frame[lead], linewidth=0.6, label=f"frame {i + 1}")
axes[2].set(title="PTB-XL pipeline: two 5-s frames, z-scored", ylabel="SD")
axes[2].set_xlabel("time (s)")
axes[2].legend(loc="upper right", fontsize="small")

# %%
# Offline: both pipelines on the bundled records
# ----------------------------------------------
# LUDB's rhythm statements are grouped like Chapman's (AFIB, GSVT, SB, SR),
# so the Chapman pipeline runs on it as is. The PTB-XL pipeline is run on
# the same records with rhythm as the class, to show the 12-lead ResNet
# path. Few epochs with a larger learning rate and a small network: a check
# that every step works, not a result (the other examples show results, on
# the PTB-XL sample).

start = time.perf_counter()
quick = {"batch_size": 128, "lr": 1e-3, "validation_fraction": None}
chapman_tables = chapman_pipeline(
    ludb, embedding_dim=32, max_epochs=60, **quick
)
ptbxl_tables = ptbxl_pipeline(
    ludb,
    embedding_dim=32,
    max_epochs=10,
    encoder_params={"channels": (8, 16, 32, 64)},
    **quick,
)
print(f"\nOffline run: {time.perf_counter() - start:.0f} s")
