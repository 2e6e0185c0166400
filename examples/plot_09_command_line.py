"""
===========================================
CROCS on a folder of records, from a shell
===========================================

People who hold ECG archives usually have a folder of WFDB or EDF records,
not a Python session. The ``sklearn-crocs`` command trains a model on such a
folder (``fit``; also on an EDF file, a ``.npy``/``.npz`` array or the
bundled data), writes the predicted attributes of the records of another
folder (``predict``) and finds the records that best match attribute values
(``search``); see :ref:`command_line`.

Here the folders are built from the LUDB records bundled with the package,
written as WFDB records with PhysioNet/CinC-style header comments (``#Age``,
``#Sex``, ``#Rhythm``): two thirds of them, with their attributes, to train
on, and the other third, without any, as the archive to annotate and search.
The commands run exactly as in a shell, through :mod:`subprocess`.
"""

# %%
# Two folders of WFDB records
# ---------------------------
import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import wfdb

from sklearn_crocs.datasets import load_ludb

ludb = load_ludb()
workdir = tempfile.TemporaryDirectory()
labelled, archive = (
    Path(workdir.name, "labelled"),
    Path(workdir.name, "archive"),
)
labelled.mkdir()
archive.mkdir()
names = np.array([f"ECG{i:03d}" for i in range(len(ludb.data))])
in_archive = np.arange(len(names)) % 3 == 0  # one patient per record
for name, signal, (rhythm, sex, age), to_archive in zip(
    names,
    ludb.data,
    ludb.attributes[["rhythm", "sex", "age"]].to_numpy(),
    in_archive,
):
    comments = (
        []
        if to_archive
        else [f"Age: {age:.0f}", f"Sex: {sex}", f"Rhythm: {rhythm}"]
    )
    wfdb.wrsamp(
        name,
        fs=ludb.fs,
        units=["mV"] * 12,
        sig_name=ludb.lead_names,
        p_signal=signal.T.astype(float),
        fmt=["16"] * 12,
        comments=comments,
        write_dir=str(archive if to_archive else labelled),
    )
print(
    f"{(~in_archive).sum()} labelled records,",
    f"{in_archive.sum()} records in the archive",
)


def sklearn_crocs(command):
    """Run ``sklearn-crocs COMMAND`` in the work folder.

    As ``python -m sklearn_crocs``, the same command.
    """
    print(f"$ sklearn-crocs {command}")
    result = subprocess.run(
        [sys.executable, "-m", "sklearn_crocs", *shlex.split(command)],
        capture_output=True,
        text=True,
        cwd=workdir.name,
    )
    print(result.stdout + result.stderr)
    result.check_returncode()


# %%
# Train
# -----
# Rhythm (the class), sex and age quartiles from the header comments. By
# default each 500 Hz record is band-passed (0.67-40 Hz), resampled to the
# estimator's working rate (100 Hz), z-scored per lead and cut into two 5-s
# frames; ``predict`` and ``search`` prepare new records, of any rate, the
# same way. ``--quiet`` leaves out the progress bars and the per-epoch lines.
sklearn_crocs(
    "fit labelled --attributes rhythm,sex,age --model model --max-epochs 20 --quiet"
)

# %%
# Annotate the archive
# --------------------
# One row per record: the attributes of the most probable prototype over the
# record's frames, and with ``--proba`` the probability of each value.
sklearn_crocs(
    "predict archive --model model --out predictions.csv --proba --quiet"
)
predicted = pd.read_csv(
    Path(workdir.name, "predictions.csv"), dtype={"record": str}
)
predicted.head()

# %%
# Search the archive
# ------------------
# The ten records nearest to the prototype of sinus bradycardia in men of
# the oldest age group (the age groups' labels are in the model folder's
# ``settings.json``).
settings = json.loads(Path(workdir.name, "model", "settings.json").read_text())
oldest = settings["age_groups"]["age"]["labels"][-1]
query = f"rhythm=SB,sex=M,age={oldest}"
sklearn_crocs(
    f"search archive --model model --query '{query}' --k 10 "
    "--out hits.csv --quiet"
)
hits = pd.read_csv(Path(workdir.name, "hits.csv"), dtype={"record": str})

# %%
# How the archive was annotated and searched
# ------------------------------------------
# The archive's true attributes were kept out of its headers; here they
# score the command's output. Left: predicted against true rhythm. Right:
# the distance of each hit, green where the record's rhythm is the query's.
# LUDB is small and mostly sinus rhythm, so expect the picture of a working
# tool rather than the paper's accuracy.
truth = pd.Series(ludb.attributes["rhythm"].to_numpy(), index=names)
true_rhythm = truth[predicted["record"]].to_numpy()
rhythms = sorted(truth.unique())
counts = pd.crosstab(
    pd.Categorical(true_rhythm, rhythms),
    pd.Categorical(predicted["rhythm"], rhythms),
    dropna=False,
)

fig, (left, right) = plt.subplots(2, 1, figsize=(7, 7), layout="constrained")
left.imshow(counts.to_numpy(), cmap="Blues")
for (i, j), n in np.ndenumerate(counts.to_numpy()):
    left.text(j, i, n, ha="center", va="center")
left.set(
    xticks=range(len(rhythms)),
    xticklabels=rhythms,
    yticks=range(len(rhythms)),
    yticklabels=rhythms,
    xlabel="predicted rhythm",
    ylabel="true rhythm",
    title=f"predict: {len(predicted)} archive records",
)
match = truth[hits["record"]].to_numpy() == "SB"
right.bar(
    hits["rank"],
    hits["distance"],
    color=np.where(match, "tab:green", "tab:red"),
)
right.set(
    xlabel="rank",
    ylabel="distance to the query's prototype",
    xticks=hits["rank"],
    title=f"search: {query}\n(green: sinus bradycardia)",
)
plt.show()

workdir.cleanup()
