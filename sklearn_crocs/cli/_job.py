"""The main job: CROCS on bundled real ECGs, evaluated on held-out patients.

Run it with ``python -m sklearn_crocs`` (or the ``sklearn-crocs`` command).
By default it trains :class:`~sklearn_crocs.CROCSClusterer` with its default
parameters on the bundled PTB-XL sample: 5-s 12-lead frames (two per record)
with attributes class (NORM/ABN) x sex x age quartile (quartiles fitted on the
training patients), 60 % of the patients for training and 40 % held out. It
prints the paper's clustering table (accuracy and AMI per attribute) and
retrieval table (P@K by K and number of matched attributes) for CP and TP
CROCS on the held-out patients, with the majority predictor and random
retrieval beside them, and writes a prototype map.

``--dataset ludb`` runs the paper's Chapman protocol on the 102 bundled LUDB
records instead: each lead a single-lead 2500-sample instance scaled to
[0, 1], rhythm group x sex x age quartile, the paper's CNN, 20 % of the
patients held out and 20 % for early stopping, both splits stratified by
rhythm group so that every group is in each part.
"""

import argparse
import sys
import time
from pathlib import Path

from .. import __version__
from .._display import escape

# LUDB's setting: the paper's Chapman protocol, with early stopping on 20 %
# of all patients (a quarter of the training ones), at the constant rate it
# was chosen with.
_LUDB_PARAMS = {
    "encoder": "cnn",
    "lr": 1e-3,
    "lr_schedule": "constant",
    "max_epochs": 300,
    "validation_fraction": 0.25,
    "n_iter_no_change": 20,
}
_CLASS_ATTRIBUTE = {"ptbxl": "class", "ludb": "rhythm"}


def _figure(model, X, y, class_attribute, title, path):
    import matplotlib

    matplotlib.use("Agg")
    from .._utils import _atomic_path
    from ..plotting import PrototypeDisplay

    display = PrototypeDisplay.from_estimator(model, X, y, class_attribute=class_attribute)
    display.ax_.set_title(title)
    # The figure of an earlier run is the job's own: replaced (a link is refused).
    with _atomic_path(path, replace=True) as tmp:  # its name ends in .tmp
        display.figure_.savefig(tmp, format="png", dpi=120, bbox_inches="tight")
    return path


def main(argv=None):
    """Command-line entry point."""
    parser = argparse.ArgumentParser(
        prog="python -m sklearn_crocs",
        description="Train CROCS on bundled real ECGs and evaluate it on held-out patients.",
        epilog="For your own records (WFDB or EDF/EDF+ files, .npy/.npz arrays): "
        "sklearn-crocs fit, predict, search, score and evaluate (see sklearn-crocs fit --help).",
    )
    parser.add_argument("--version", action="version", version=f"sklearn-crocs {__version__}")
    parser.add_argument(
        "--dataset",
        choices=["ptbxl", "ludb"],
        default="ptbxl",
        help="the bundled PTB-XL sample (12-lead 5-s frames, default) or LUDB (the paper's "
        "single-lead Chapman protocol)",
    )
    parser.add_argument(
        "--output-dir",
        default="crocs_output",
        help="where to write the figure prototypes.png (replacing an earlier run's; never "
        "through a symbolic link)",
    )
    parser.add_argument(
        "--max-epochs", type=int, default=None, help="override the number of epochs"
    )
    parser.add_argument("--random-state", type=int, default=0)
    parser.add_argument(
        "--k",
        type=int,
        nargs="+",
        default=[1, 5, 10],
        help="numbers of ECGs retrieved per prototype in the retrieval table (the paper's K)",
    )
    parser.add_argument("--quiet", action="store_true", help="no per-epoch progress")
    args = parser.parse_args(argv)
    figure_path = Path(args.output_dir) / "prototypes.png"
    if figure_path.is_symlink():  # refused now rather than after training
        parser.error(
            f"--output-dir: {escape(figure_path)} is a symbolic link; no file is written "
            "through a link nor in place of one. Remove it or choose another folder."
        )

    # Imported here, not at the top: torch takes seconds to import and --help needs none of it.
    import numpy as np

    from .._clusterer import CROCSClusterer
    from ..datasets import load_ludb_instances, load_ptbxl_sample_frames
    from ..metrics import evaluate_prototypes

    start = time.perf_counter()
    if args.dataset == "ptbxl":
        data = load_ptbxl_sample_frames(random_state=args.random_state)
        params, what = {}, "5-s 12-lead frames"
    else:
        data = load_ludb_instances(random_state=args.random_state)
        params, what = dict(_LUDB_PARAMS), "single-lead instances"
    if args.max_epochs is not None:
        params["max_epochs"] = args.max_epochs
    X_train, y_train, g_train = data.X_train, data.y_train, data.groups_train
    X_test, y_test, g_test = data.X_test, data.y_test, data.groups_test
    name = {"ptbxl": "PTB-XL sample", "ludb": "LUDB"}[args.dataset]
    print(
        escape(
            f"{name}: {len(np.unique(g_train))} training patients ({len(X_train)} {what}), "
            f"{len(np.unique(g_test))} test patients ({len(X_test)}); attributes "
            f"{list(y_train.columns)}."
        )
    )
    # The class attribute also stratifies the early-stopping split by patient.
    model = CROCSClusterer(
        **params,
        class_attribute=_CLASS_ATTRIBUTE[args.dataset],
        random_state=args.random_state,
        verbose=0 if args.quiet else 1,
    )
    model.fit(X_train, y_train, groups=g_train)
    print(
        f"Trained {model.n_iter_} epochs in {time.perf_counter() - start:.0f} s; "
        f"{len(model.prototypes_)} prototypes "
        f"({' x '.join(str(len(c)) for c in model.categories_)} attribute values)."
    )
    print()
    evaluate_prototypes(model, X_test, y_test, k=args.k, file=sys.stdout)

    output = Path(args.output_dir)
    output.mkdir(parents=True, exist_ok=True)
    title = f"CROCS prototypes and held-out {name} embeddings (PCA)"
    try:
        figure = _figure(
            model, X_test, y_test, _CLASS_ATTRIBUTE[args.dataset], title, figure_path
        )
    except ImportError as exc:
        print(f"\nNo figure: {escape(exc)}")
    else:
        print(f"\nPrototype map written to {escape(figure)}")
    print(f"Total time: {time.perf_counter() - start:.0f} s")
    return 0
