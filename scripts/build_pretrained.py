"""Rebuild the CROCS model that ships with the package from the PTB-XL records on this machine.

Writes ``sklearn_crocs/pretrained/ptbxl.safetensors``, the model that
``CROCSClusterer.from_pretrained("ptbxl")``, ``pretrained="ptbxl"`` and the
command line's ``--model bundled:ptbxl`` load. The data are every PTB-XL
record in ``../shared/data`` (Wagner et al., 2020, CC BY 4.0):

- ``ptbxl-sample``: 500 records that a third party band-passed (0.5-40 Hz)
  and z-scored per lead at 500 Hz before they were resampled to 100 Hz;
- ``ptbxl-more``: 3,903 raw records (int16 microvolts at 100 Hz, with
  baseline wander and noise as recorded).

Both are brought to one footing by the conditioning the documentation
prescribes to users (:class:`~sklearn_crocs.preprocessing.SignalConditioner`
with its defaults: zero-phase band-pass 0.67-40 Hz and z-score per lead, on
whole 10-s records; on the pre-filtered sample this changes little beyond the
filter's lower edge, and z-scoring makes the units of the two sources
irrelevant), then cut into two 5-s frames per record. The attributes are
PTB-XL's NORM/ABN class, sex and age in years (PTB-XL's 300, "over 89", read
as 90), binned by the model into quartiles of the training ages
(``continuous={"age": 4}``, edges stored in the model).

The recipe (``RECIPE``) was chosen on validation folds of the PTB-XL
benchmark (``benchmarks/bench_pretrained.py --recipes``), never on the ECGs
of other hospitals that measure transfer. After fitting, the model is given
the conditioning its records went through and ``longer_signals="average"``,
so that raw recordings of any rate and length (at least one frame) go in as
they are. The file's document carries the attribution, the recipe, the
record counts and the package version (``pretrained_info("ptbxl")``), and the
lead names, by which the command line matches a record's leads.

The fit is deterministic on a given machine and thread count: the same data
and ``RECIPE`` give the same file (compare ``--check``).

Usage::

    python scripts/build_pretrained.py [--data ../shared/data] [--output PATH]
    python scripts/build_pretrained.py --check   # rebuild in a temporary file, compare
"""

import argparse
import hashlib
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO_ROOT.parent / "shared" / "data"
DEFAULT_OUTPUT = REPO_ROOT / "sklearn_crocs" / "pretrained" / "ptbxl.safetensors"

#: What the shipped model is: the estimator's parameters, how the records are read,
#: and the seed. A test compares it with the shipped file's record of it.
RECIPE = {
    "params": {
        "class_attribute": "class",
        "continuous": {"age": 4},
        "sampling_rate": 100.0,
        # Wider than the defaults: 4 nets, each with the epochs that max_epochs="auto"
        # gives each of the default 2 on these 8,806 frames (13 / 2). Chosen on
        # validation patients of PTB-XL (bench_pretrained.py --validation).
        "ensemble_size": 4,
        "max_epochs": 6,
        "random_state": 0,
    },
    "conditioning": {"bandpass": [0.67, 40.0], "notch": None, "normalize": "zscore"},
    "frame_seconds": 5.0,
    "attributes": ["class", "sex", "age"],
    "age_cap": 90,
    "torch_threads": 2,
}
LEAD_NAMES = ["I", "II", "III", "aVR", "aVL", "aVF", "V1", "V2", "V3", "V4", "V5", "V6"]
ATTRIBUTION = (
    "PTB-XL, a large publicly available electrocardiography dataset (version 1.0.x): "
    "P. Wagner, N. Strodthoff, R.-D. Bousseljot, D. Kreiseler, F. I. Lunze, W. Samek and "
    "T. Schaeffter, Scientific Data 7, 154 (2020), https://doi.org/10.1038/s41597-020-0495-6; "
    "PhysioNet, https://physionet.org/content/ptb-xl/. Licensed under CC BY 4.0 "
    "(https://creativecommons.org/licenses/by/4.0/). The records were band-pass filtered, "
    "z-scored, resampled to 100 Hz and cut into 5-s frames; the model holds no signal."
)


def load_ptbxl(data=DEFAULT_DATA):
    """Every PTB-XL record of ``data``, conditioned as the shipped model's: a Bunch of
    ``X`` (float32, (n, 12, 1000) at 100 Hz), ``attributes`` (class, sex, age in years),
    ``groups`` (patient ids) and ``source`` ("sample" or "more")."""
    from sklearn.utils import Bunch

    from sklearn_crocs.preprocessing import SignalConditioner

    data = Path(data)
    conditioner = SignalConditioner(
        sampling_rate=100, bandpass=tuple(RECIPE["conditioning"]["bandpass"]),
        notch=RECIPE["conditioning"]["notch"], normalize=RECIPE["conditioning"]["normalize"],
    )  # fmt: skip
    parts, tables = [], []
    for name, scale in (("ptbxl-sample", 1.0), ("ptbxl-more", 1e-3)):  # more: uV -> mV
        with np.load(data / name / "signals.npz") as archive:
            X, ids = archive["X"], archive["ecg_id"]
        table = pd.read_csv(data / name / "records.csv")
        if not np.array_equal(ids, table["ecg_id"].to_numpy()):
            raise SystemExit(f"{data / name}: signals.npz and records.csv list other records.")
        parts.append(conditioner.fit_transform(X.astype(np.float64) * scale).astype(np.float32))
        tables.append(table.assign(source=name.removeprefix("ptbxl-")))
    table = pd.concat(tables, ignore_index=True)
    attributes = pd.DataFrame({
        "class": table["label"].astype(str),
        "sex": table["sex"].astype(str),
        "age": table["age"].astype(float).clip(upper=RECIPE["age_cap"]),
    })  # fmt: skip
    return Bunch(
        X=np.concatenate(parts),
        attributes=attributes,
        groups=table["patient_id"].to_numpy(),
        source=table["source"].to_numpy(),
        ecg_id=table["ecg_id"].to_numpy(),
    )


def frame_length():
    return round(RECIPE["frame_seconds"] * RECIPE["params"]["sampling_rate"])


def fit(records, index=None, *, ready=True, **overrides):
    """A ``CROCSClusterer`` of ``RECIPE`` (with ``overrides``) fitted on the records
    ``index`` (default: all) as 5-s frames; if ``ready``, set to read raw recordings
    (without: it reads records conditioned as ``load_ptbxl``'s, frame by frame)."""
    from sklearn_crocs import CROCSClusterer
    from sklearn_crocs.preprocessing import SignalConditioner, make_frames

    index = np.arange(len(records.X)) if index is None else index
    X, y, groups = make_frames(
        records.X[index], frame_length(),
        attributes=records.attributes.iloc[index].reset_index(drop=True),
        groups=records.groups[index],
    )  # fmt: skip
    params = {**RECIPE["params"], **overrides}
    model = CROCSClusterer(**params).fit(X, y, groups=groups)
    if not ready:
        return model
    # The frames were conditioned whole, as records; the model conditions what it is
    # given the same way, and embeds a longer record as the mean of its frames.
    conditioning = SignalConditioner(
        bandpass=tuple(RECIPE["conditioning"]["bandpass"]),
        notch=RECIPE["conditioning"]["notch"], normalize=RECIPE["conditioning"]["normalize"],
    )  # fmt: skip
    return model.set_params(conditioning=conditioning, longer_signals="average")


def provenance(records):
    """The file's record of where the model comes from."""
    import sklearn_crocs

    counts = pd.Series(records.source).value_counts()
    return {
        "name": "ptbxl",
        "data": "PTB-XL (ptbxl-sample and ptbxl-more of ../shared/data)",
        "license": "CC BY 4.0",
        "attribution": ATTRIBUTION,
        "records": {
            "ptbxl-sample": int(counts.get("sample", 0)),
            "ptbxl-more": int(counts.get("more", 0)),
            "total": len(records.X),
            "patients": int(len(np.unique(records.groups))),
        },
        "recipe": RECIPE,
        "script": "scripts/build_pretrained.py",
        "sklearn_crocs_version": sklearn_crocs.__version__,
    }


def build(data, output):
    from sklearn_crocs._persistence._pretrained import write_pretrained

    torch.set_num_threads(RECIPE["torch_threads"])  # a script: the process is its own
    start = time.perf_counter()
    records = load_ptbxl(data)
    print(f"{len(records.X)} records of {len(np.unique(records.groups))} patients read")
    model = fit(records, verbose=1)
    model.set_params(verbose=0)
    write_pretrained(model, output, provenance(records), LEAD_NAMES)
    size = Path(output).stat().st_size
    print(f"Written {output} ({size / 1e6:.2f} MB) in {time.perf_counter() - start:.0f} s")
    return output


def _tensor_digest(path):
    """SHA-256 of the tensors of a model file (the document holds a build date-free record)."""
    from safetensors.torch import load_file

    digest = hashlib.sha256()
    for name, tensor in sorted(load_file(path).items()):
        digest.update(name.encode())
        digest.update(tensor.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument(
        "--check", action="store_true",
        help="rebuild into a temporary file and compare its tensors with --output's",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if not args.check:
        build(args.data, args.output)
        return 0
    with tempfile.TemporaryDirectory() as folder:
        rebuilt = build(args.data, Path(folder) / "ptbxl.safetensors")
        same = _tensor_digest(rebuilt) == _tensor_digest(args.output)
    print("The rebuilt tensors are", "identical." if same else "DIFFERENT.")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
