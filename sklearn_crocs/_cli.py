"""The ``sklearn-crocs`` command: CROCS on a folder of WFDB records, without Python.

``sklearn-crocs fit``, ``predict`` and ``search`` read a folder of WFDB
records (e.g. PhysioNet/CinC challenge or LUDB folders) with
:func:`~sklearn_crocs.datasets.load_wfdb`, cut every record into frames
(:func:`~sklearn_crocs.preprocessing.make_frames`) and train, apply or query
a :class:`~sklearn_crocs.CROCSClusterer`. The model folder holds the
estimator's safe file and the reading settings (``settings.json``), so that
``predict`` and ``search`` prepare new records exactly as ``fit`` did.
Without a subcommand the command runs the main job (:mod:`sklearn_crocs._main`).

Exit status: 0 on success, 2 for a malformed command line, 1 for any other
error (unreadable data, existing output, invalid query), reported on one line
of standard error; ``--debug`` shows the traceback instead. Record contents
and patient attributes are never printed: standard output and error carry
counts, record names, file problems and the model's categories; predicted
attributes go only to the ``--out`` file.
"""

import argparse
import json
import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from . import __version__
from ._clusterer import CROCSClusterer
from ._main import main as main_job
from ._retrieval import PrototypeRetriever
from ._utils import _atomic_path
from .datasets import load_wfdb
from .datasets._base import parse_age, parse_sex, progress
from .preprocessing import AgeGroupEncoder, make_frames, normalize_frames

SUBCOMMANDS = ("fit", "predict", "search")
MODEL_FILE = "model.safetensors"
SETTINGS_FILE = "settings.json"
SETTINGS_FORMAT = "sklearn-crocs-cli/1"
# Frames handed to the model at a time by predict and search (one progress step each).
_CHUNK = 256
# load_wfdb's warning about skipped records, replaced by one line per record.
_SKIPPED_WARNING = r"Skipped \d+ of \d+ records that could not be used"


class CommandError(Exception):
    """A problem with the data, the files or the model: reported on one line, status 1."""


def _names(text):
    """Comma-separated names (``--attributes sex,age,dx``), non-empty and distinct."""
    names = [name.strip() for name in text.split(",")]
    if not all(names) or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(
            f"expected distinct comma-separated names such as 'sex,age,dx', got {text!r}"
        )
    return names


def _query_pairs(text):
    """``[(attribute, value), ...]`` from ``"sex=F,age=>=71"``.

    A comma starts a new pair only where ``name=`` follows it, so that values
    may hold commas (``dx=426177001,428750005``).
    """
    pairs = []
    for part in re.split(r",(?=[^,=]*=)", text):
        name, sep, value = part.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise argparse.ArgumentTypeError(
                f"expected attribute=value pairs separated by commas, such as "
                f"'sex=F,age=>=71', got {text!r}"
            )
        pairs.append((name.strip(), value.strip()))
    names = [name for name, _ in pairs]
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"an attribute is named twice in {text!r}")
    return pairs


def _positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _parser():
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("records_dir", metavar="RECORDS_DIR", help="folder of WFDB records")
    common.add_argument("--model", required=True, metavar="MODEL_DIR", help="folder of the model")
    common.add_argument(
        "--device",
        default=None,
        help="torch device, e.g. cuda (default: cpu for fit, the "
        "saved device if available for predict and search)",
    )
    common.add_argument(
        "--strict",
        action="store_true",
        help="stop at the first unusable record (default: skip it and say why)",
    )
    common.add_argument(
        "--no-repair-headers",
        action="store_true",
        help="treat headers whose record line names a file (E00271.mat, as in the "
        "Georgia/CinC data) as unusable instead of repairing them in a temporary copy",
    )
    common.add_argument(
        "--force", action="store_true", help="overwrite an existing --model (fit) or --out"
    )
    common.add_argument("--quiet", action="store_true", help="no progress bars or epoch lines")
    common.add_argument("--debug", action="store_true", help="show tracebacks of errors")

    parser = argparse.ArgumentParser(
        prog="sklearn-crocs",
        description="CROCS on a folder of WFDB records. Without a subcommand, "
        "sklearn-crocs runs the main job on the bundled data (see sklearn-crocs --help).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    fit = sub.add_parser(
        "fit",
        parents=[common],
        help="train a model on the records and their attributes",
        description="Train CROCS on every record of RECORDS_DIR with the attributes "
        "named by --attributes, read from the header comments (#Age, #Sex, #Dx, ...) "
        "or from --labels, and write the model to MODEL_DIR. Records with an unknown "
        "value of an attribute are left out of training. Age is binned into groups "
        "learned from the records.",
    )
    fit.add_argument(
        "--attributes",
        required=True,
        type=_names,
        metavar="NAMES",
        help="comma-separated attributes, e.g. sex,age,dx: header comment keys or "
        "--labels columns (case-insensitive); 'sex' is read as M/F, 'age' in years",
    )
    fit.add_argument(
        "--labels",
        metavar="CSV",
        help="a CSV file with one row per record and a column "
        "per attribute, instead of the headers",
    )
    fit.add_argument(
        "--record-column",
        metavar="NAME",
        help="column of --labels with the record names (default: its first column)",
    )
    fit.add_argument(
        "--class-attribute",
        metavar="NAME",
        help="the attribute whose prototypes an ECG is attracted to (default: the first)",
    )
    fit.add_argument(
        "--age-groups",
        type=_positive_int,
        default=4,
        help="number of age groups, quantiles of the records' ages (default: 4)",
    )
    fit.add_argument(
        "--fs",
        type=float,
        default=250.0,
        help="resample every record to this rate in Hz (default: 250, as in the paper)",
    )
    fit.add_argument(
        "--frame-length",
        type=_positive_int,
        default=2500,
        help="samples per frame; each record gives its whole frames (default: 2500)",
    )
    fit.add_argument(
        "--leads",
        type=_names,
        metavar="NAMES",
        help="comma-separated leads, e.g. I,II,V1 (default: those of the first record)",
    )
    fit.add_argument(
        "--normalize",
        choices=["zscore", "minmax", "none"],
        default="zscore",
        help="per-frame normalisation of each lead (default: zscore)",
    )
    fit.add_argument("--encoder", choices=["resnet", "cnn"], default=None)
    fit.add_argument("--embedding-dim", type=_positive_int, default=None)
    fit.add_argument("--max-epochs", type=_positive_int, default=None)
    fit.add_argument("--batch-size", type=_positive_int, default=None)
    fit.add_argument("--lr", type=float, default=None)
    fit.add_argument(
        "--validation-fraction",
        type=float,
        default=None,
        help="fraction of the records held out for early stopping (default: none)",
    )
    fit.add_argument("--random-state", type=int, default=0)

    predict = sub.add_parser(
        "predict",
        parents=[common],
        help="write the predicted attributes of each record to a CSV file",
        description="Predict the attributes of every record of RECORDS_DIR: those of "
        "the prototype with the highest probability averaged over the record's frames. "
        "Writes one row per record (record name and attributes) to --out.",
    )
    predict.add_argument("--out", required=True, metavar="CSV", help="the file to write")
    predict.add_argument(
        "--proba",
        action="store_true",
        help="add a column <attribute>_proba per attribute: the probability of the "
        "predicted value (summed over the prototypes that have it)",
    )

    search = sub.add_parser(
        "search",
        parents=[common],
        help="write the records nearest to attribute queries to a CSV file",
        description="Retrieve the --k records of RECORDS_DIR nearest to the prototype of "
        "each query (a record's distance is that of its nearest frame) and write one "
        "row per hit (query, rank, record, distance) to --out.",
    )
    search.add_argument(
        "--query",
        action="append",
        type=_query_pairs,
        metavar="QUERY",
        help="attribute values such as 'sex=F,age=>=71', among the model's values "
        "(repeat for several queries; default: every prototype)",
    )
    search.add_argument(
        "--k", type=_positive_int, default=10, help="records per query (default: 10)"
    )
    search.add_argument("--out", required=True, metavar="CSV", help="the file to write")
    return parser


def main(argv=None):
    """Entry point of the ``sklearn-crocs`` command and of ``python -m sklearn_crocs``."""
    argv = sys.argv[1:] if argv is None else [str(arg) for arg in argv]
    if not argv or argv[0] not in SUBCOMMANDS:
        return main_job(argv)
    args = _parser().parse_args(argv)
    command = {"fit": _fit, "predict": _predict, "search": _search}[args.command]
    try:
        _check_device(args.device)
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return command(args)
    except KeyboardInterrupt:
        if args.debug:
            raise
        print("sklearn-crocs: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.debug:
            raise
        message = " ".join(str(exc).split())
        if not isinstance(exc, (CommandError, ValueError, OSError)):
            message = f"{type(exc).__name__}: {message}"
        print(f"sklearn-crocs: error: {message}", file=sys.stderr)
        return 1


def _check_device(device):
    """Refuse a --device that torch cannot use here, before any record is read."""
    from ._utils import _device_problem

    problem = None if device is None else _device_problem(device)
    if problem is not None:
        raise CommandError(f"--device {device}: {problem}. Pass --device cpu, or leave it out.")


def _show_warning(message, category, filename, lineno, file=None, line=None):
    print(f"sklearn-crocs: warning: {' '.join(str(message).split())}", file=sys.stderr)


def _note(text):
    print(f"sklearn-crocs: {text}", file=sys.stderr)


def _check_output(path, force, *, folder=False):
    """Refuse to replace an existing output unless ``--force``."""
    path = Path(path)
    if folder:
        if path.exists() and not path.is_dir():
            raise CommandError(f"--model {path} is a file, not a folder.")
        if path.is_dir() and any(path.iterdir()) and not force:
            raise CommandError(
                f"--model {path} exists and is not empty; pass --force to overwrite it."
            )
    elif path.exists() and not force:
        raise CommandError(f"--out {path} exists; pass --force to overwrite it.")
    return path


def _write_csv(frame, path):
    with _atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)


def _read_folder(args, *, fs, leads, frame_length, normalize):
    """The frames of every usable record of ``RECORDS_DIR``.

    Returns the loader's Bunch (its ``record_names`` and ``attributes`` cut to
    the records long enough for a frame), the frames and the record of each
    frame (a row of those).
    """
    folder = Path(args.records_dir)
    if not folder.is_dir():
        raise CommandError(f"{folder} is not a folder.")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_SKIPPED_WARNING)
        data = load_wfdb(
            folder,
            leads=leads,
            target_fs=fs,
            signal_length="variable",
            on_error="raise" if args.strict else "skip",
            repair_headers=not args.no_repair_headers,
            verbose=0 if args.quiet else 1,
        )
    n_found = len(data.record_names) + len(data.excluded)
    for record, reason in zip(data.excluded["record"], data.excluded["reason"]):
        _note(f"skipped record {record}: {reason}")
    long_enough = np.array([x.shape[-1] >= frame_length for x in data.data], dtype=bool)
    if not long_enough.all():
        short = data.record_names[~long_enough]
        _note(
            f"skipped {len(short)} record(s) shorter than one frame ({frame_length} samples "
            f"at {fs:g} Hz): {', '.join(short)}"
        )
    if not long_enough.any():
        raise CommandError(f"no record of {folder} is long enough for one frame.")
    kept = np.flatnonzero(long_enough)
    data.record_names = data.record_names[kept]
    # Records without header comments give no row: reindex gives them an empty one.
    attributes = data.attributes.reindex(range(len(long_enough)))
    data.attributes = attributes.iloc[kept].reset_index(drop=True)
    frames, _, frame_record = make_frames(
        [data.data[i] for i in kept], frame_length, groups=np.arange(len(kept))
    )
    if normalize != "none":
        frames = normalize_frames(frames, normalize)
    if not args.quiet:
        _note(
            f"read {len(kept)} of {n_found} records of {folder}: {len(frames)} frames of "
            f"{len(data.lead_names)} leads x {frame_length} samples at {fs:g} Hz"
        )
    return data, np.asarray(frames, dtype=np.float32), frame_record


def _find_column(columns, name, where):
    """The column of ``columns`` named ``name``, ignoring case."""
    by_lower = {str(c).strip().lower(): c for c in columns}
    if name.lower() not in by_lower:
        raise CommandError(
            f"no attribute {name!r} in {where}; found {', '.join(map(str, columns)) or 'none'}."
        )
    return by_lower[name.lower()]


def _text(value):
    """A header or CSV value as stripped text; None where empty or missing."""
    return (value.strip() or None) if isinstance(value, str) else None


def _record_attributes(args, data):
    """The requested attributes of each record as written (NaN where unknown)."""
    if args.labels is None:
        source, where = data.attributes, "the header comments"
    else:
        try:
            table = pd.read_csv(args.labels, dtype=str)
        except (OSError, ValueError) as exc:
            raise CommandError(f"cannot read --labels {args.labels}: {exc}") from exc
        key = (
            table.columns[0]
            if args.record_column is None
            else _find_column(table.columns, args.record_column, f"--labels {args.labels}")
        )
        names = table[key].astype(str).str.strip().str.removesuffix(".hea")
        if names.duplicated().any():
            raise CommandError(
                f"--labels {args.labels}: records named more than once in column {key!r}: "
                f"{', '.join(names[names.duplicated()].unique()[:5])}."
            )
        source = table.set_index(names).reindex(data.record_names).reset_index(drop=True)
        where = f"--labels {args.labels}"
    values = {}
    for name in args.attributes:
        column = source[_find_column(source.columns, name, where)]
        if name.lower() == "sex":
            column = column.map(parse_sex)
        elif name.lower() == "age":
            column = column.map(parse_age)
        else:
            column = column.map(_text)
        values[name] = column.to_numpy(dtype=object)
    return pd.DataFrame(values)


def _fit(args):
    model_dir = _check_output(args.model, args.force, folder=True)
    if args.labels is None and args.record_column is not None:
        raise CommandError("--record-column needs --labels.")
    class_attribute = args.class_attribute or args.attributes[0]
    if class_attribute not in args.attributes:
        raise CommandError(
            f"--class-attribute {class_attribute!r} is not one of --attributes "
            f"{','.join(args.attributes)}."
        )
    data, frames, frame_record = _read_folder(
        args,
        fs=args.fs,
        leads=args.leads,
        frame_length=args.frame_length,
        normalize=args.normalize,
    )
    y = _record_attributes(args, data)
    unknown = y.isna()
    if unknown.to_numpy().any():
        counts = ", ".join(f"{n} ({c})" for n, c in unknown.sum().items() if c)
        _note(f"left out {int(unknown.any(axis=1).sum())} record(s) with an unknown {counts}")
    labelled = np.flatnonzero(~unknown.any(axis=1).to_numpy())
    if len(labelled) == 0:
        raise CommandError("no record has a known value of every attribute.")
    y = y.iloc[labelled].reset_index(drop=True)
    age_groups = {}
    for name in y.columns:
        if name.lower() == "age":
            n_ages = y[name].nunique()
            if args.age_groups > n_ages:
                raise CommandError(
                    f"--age-groups {args.age_groups}: the {len(y)} labelled records' ages "
                    f"take only {n_ages} distinct value(s), too few for that many groups. "
                    f"Pass --age-groups {n_ages} or fewer."
                )
            encoder = AgeGroupEncoder(n_groups=args.age_groups).fit(y[[name]].astype(float))
            groups = encoder.transform(y[[name]].astype(float)).ravel()
            y[name] = pd.Categorical(groups, categories=encoder.labels_)
            # The inner edges only: the outer ones are the youngest and oldest ages.
            age_groups[name] = {
                "labels": list(encoder.labels_),
                "edges": encoder.bin_edges_[1:-1].tolist(),
            }
    rows = np.flatnonzero(np.isin(frame_record, labelled))
    # Record number among the labelled ones, for each frame.
    y_frames = y.iloc[np.searchsorted(labelled, frame_record[rows])].reset_index(drop=True)
    params = {
        name: getattr(args, name)
        for name in (
            "encoder",
            "embedding_dim",
            "max_epochs",
            "batch_size",
            "lr",
            "validation_fraction",
        )
        if getattr(args, name) is not None
    }
    model = CROCSClusterer(
        **params,
        class_attribute=class_attribute,
        device=args.device or "cpu",
        random_state=args.random_state,
        verbose=0 if args.quiet else 1,
    )
    model.fit(frames[rows], y_frames, groups=data.record_names[frame_record[rows]])
    settings = {
        "format": SETTINGS_FORMAT,
        "sklearn_crocs_version": __version__,
        "fs": data.fs,
        "lead_names": list(data.lead_names),
        "frame_length": args.frame_length,
        "normalize": args.normalize,
        "attributes": list(args.attributes),
        "class_attribute": class_attribute,
        "age_groups": age_groups,
        "n_training_records": len(labelled),
    }
    model_dir.mkdir(parents=True, exist_ok=True)
    model.save(model_dir / MODEL_FILE)
    with _atomic_path(model_dir / SETTINGS_FILE) as tmp:
        tmp.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
    described = "; ".join(
        f"{name}: {', '.join(map(str, cats))}" if len(cats) <= 10 else f"{name}: {len(cats)} values"
        for name, cats in zip(model.attribute_names_, model.categories_)
    )
    print(
        f"Trained on {len(rows)} frames of {len(labelled)} records in {model.n_iter_} epochs; "
        f"{len(model.prototypes_)} prototypes ({described})."
    )
    print(f"Model written to {model_dir}")
    return 0


def _load_model(args):
    """The fitted model and the reading settings of ``--model``."""
    model_dir = Path(args.model)
    settings_path = model_dir / SETTINGS_FILE
    if not settings_path.is_file() or not (model_dir / MODEL_FILE).is_file():
        raise CommandError(
            f"--model {model_dir} is not a model folder written by 'sklearn-crocs fit' "
            f"(it needs {MODEL_FILE} and {SETTINGS_FILE})."
        )
    try:
        settings = json.loads(settings_path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise CommandError(f"{settings_path} is not valid JSON ({exc}).") from exc
    if not isinstance(settings, dict) or settings.get("format") != SETTINGS_FORMAT:
        raise CommandError(
            f"{settings_path} is not in the format {SETTINGS_FORMAT} that this version "
            f"of sklearn-crocs ({__version__}) reads; fit the model again."
        )
    model = CROCSClusterer.load(model_dir / MODEL_FILE, device=args.device)
    model.set_params(verbose=0)
    return model, settings


def _read_for_model(args, settings):
    return _read_folder(
        args,
        fs=settings["fs"],
        leads=settings["lead_names"],
        frame_length=settings["frame_length"],
        normalize=settings["normalize"],
    )


def _predict(args):
    out = _check_output(args.out, args.force)
    model, settings = _load_model(args)
    data, frames, frame_record = _read_for_model(args, settings)
    starts = range(0, len(frames), _CHUNK)
    chunks = progress(starts, verbose=not args.quiet, desc="predict", unit="batch")
    proba = np.concatenate([model.predict_proba(frames[i : i + _CHUNK]) for i in chunks])
    # Mean probability of each prototype over the frames of each record.
    n_records = len(data.record_names)
    mean = np.zeros((n_records, proba.shape[1]))
    np.add.at(mean, frame_record, proba)
    mean /= np.bincount(frame_record, minlength=n_records)[:, np.newaxis]
    best = model.prototype_attributes_[np.argmax(mean, axis=1)]
    table = pd.DataFrame({"record": data.record_names})
    for j, name in enumerate(model.attribute_names_):
        table[name] = best[:, j]
    if args.proba:
        for j, name in enumerate(model.attribute_names_):
            same = model.prototype_attributes_[:, j][np.newaxis, :] == best[:, j][:, np.newaxis]
            table[f"{name}_proba"] = (mean * same).sum(axis=1).round(6)
    _write_csv(table, out)
    print(f"Predicted the attributes of {n_records} records; written to {out}")
    return 0


class _CountedRows:
    """Frames handed to ``PrototypeRetriever.fit``, which reads them in slices.

    Each slice read advances the progress bar, so that embedding the folder
    shows progress as the loaders do.
    """

    def __init__(self, frames, bar):
        self._frames, self._bar = frames, bar
        self.shape = frames.shape

    def __getitem__(self, key):
        rows = self._frames[key]
        self._bar.update(len(rows))
        return rows


def _model_query(pairs, model):
    """``{attribute: value}`` with the model's own values (a category's type may differ)."""
    names = list(model.attribute_names_)
    query = {}
    for name, text in pairs:
        if name not in names:
            raise CommandError(
                f"--query: the model has no attribute {name!r}; its attributes are "
                f"{', '.join(names)}."
            )
        categories = model.categories_[names.index(name)]
        matches = [value for value in categories if str(value) == text]
        if not matches:
            raise CommandError(
                f"--query: {text!r} is not a value of {name!r} in this model; valid values: "
                f"{', '.join(map(str, categories))}."
            )
        query[name] = matches[0]
    return query


def _check_queries(queries, model):
    """Refuse, before any record is read, the queries that the retriever does not take."""
    blank = np.zeros((1, *model.input_shape_), dtype=np.float32)
    probe = PrototypeRetriever(model).fit(blank)
    for query in queries:
        try:
            probe.kneighbors(query, n_neighbors=1)
        except ValueError as exc:
            raise CommandError(f"--query {query}: {exc}") from exc


def _search(args):
    out = _check_output(args.out, args.force)
    model, settings = _load_model(args)
    queries = [_model_query(pairs, model) for pairs in args.query or []]
    _check_queries(queries, model)
    data, frames, frame_record = _read_for_model(args, settings)
    bar = progress(None, verbose=not args.quiet, desc="embed", total=len(frames), unit="frame")
    with bar:
        retriever = PrototypeRetriever(model, batch_size=_CHUNK).fit(_CountedRows(frames, bar))
    n_records = len(data.record_names)
    if args.k > n_records:
        _note(f"--k {args.k} is more than the {n_records} records read: all are returned")
    # Enough frames to hold the k nearest records even when each has all its frames first.
    n_frames = min(len(frames), args.k * int(np.bincount(frame_record).max()))
    names = list(model.attribute_names_)
    if queries:
        labels = [",".join(f"{n}={v}" for n, v in q.items()) for q in queries]
        results = [retriever.kneighbors(query, n_neighbors=n_frames) for query in queries]
        distances = np.concatenate([d for d, _ in results])
        indices = np.concatenate([i for _, i in results])
    else:
        labels = [
            ",".join(f"{n}={v}" for n, v in zip(names, row))
            for row in retriever.prototype_attributes_
        ]
        distances, indices = retriever.kneighbors(n_neighbors=n_frames)
    hits = []
    for label, row_distances, row_indices in zip(labels, distances, indices):
        records = frame_record[row_indices]
        _, first = np.unique(records, return_index=True)  # each record's nearest frame
        for rank, i in enumerate(np.sort(first)[: args.k], 1):
            hits.append((label, rank, data.record_names[records[i]], row_distances[i]))
    table = pd.DataFrame(hits, columns=["query", "rank", "record", "distance"])
    table["distance"] = table["distance"].round(6)
    _write_csv(table, out)
    print(
        f"Wrote the {min(args.k, n_records)} nearest records for {len(labels)} "
        f"quer{'y' if len(labels) == 1 else 'ies'} to {out}"
    )
    return 0
