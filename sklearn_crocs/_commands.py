"""What ``fit``, ``predict``, ``search`` and ``score`` do (see :mod:`sklearn_crocs._cli`).

Kept apart from the argument parser so that ``sklearn-crocs --help`` imports
neither numpy, pandas nor torch: :mod:`sklearn_crocs._cli` imports this module
only once a command has been parsed.

Every input (a folder of WFDB and EDF records, an EDF file, a ``.npy`` or
``.npz`` array, a bundled data set) becomes candidate records, read one at a
time as :class:`~sklearn_crocs.datasets._records.RawRecord` at their own
rate. Each record is conditioned whole (band-pass, optional notch,
resampling to the working rate, per-lead scaling:
:class:`~sklearn_crocs.preprocessing.SignalConditioner`) or, without
conditioning, resampled only; it is then cut into frames. ``settings.json``
keeps these settings so that predict and search prepare new records exactly
as fit did, whatever their rate.
"""

import argparse
import json
import math
import os
import sys
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from . import __version__
from ._cli_common import (
    ARRAY_SUFFIXES,
    BUNDLED,
    MODEL_FILE,
    SETTINGS_FILE,
    SETTINGS_FORMAT,
    CommandError,
    escape,
    note,
)
from ._clusterer import CROCSClusterer
from ._guards import available_memory
from ._retrieval import PrototypeRetriever
from ._utils import _atomic_path
from .datasets import load_ludb, load_ptbxl_sample
from .datasets._base import (
    ExclusionLog,
    parse_age,
    parse_comments,
    parse_sex,
    progress,
)
from .datasets._class_maps import map_classes, read_class_map
from .datasets._edf import EDF_SUFFIXES, find_edf_files, import_edfio, read_edf_record
from .datasets._records import RawRecord, collect_signals
from .datasets._wfdb import find_wfdb_records, read_wfdb_record, warn_repaired
from .preprocessing import (
    AgeGroupEncoder,
    SignalConditioner,
    check_signal_layout,
    make_frames,
    normalize_frames,
    resample_signals,
)
from .preprocessing._signals import check_bandpass, check_rate

# The per-lead scalings of --normalize besides "none".
_NORMALIZE_OPTIONS = ("zscore", "minmax")

# Frames handed to the model at a time by predict and search (one progress step each).
_CHUNK = 256
# collect_signals' warning about skipped records, replaced by one line per record.
_SKIPPED_WARNING = r"Skipped \d+ of \d+ records that could not be used"


@dataclass
class _Source:
    """Candidate records of RECORDS, before any is read."""

    names: list  # one display name per candidate
    read: object  # read(i, leads) -> RawRecord
    description: str
    attributes: object = None  # DataFrame, one row per candidate (bundled data), or None
    groups: object = None  # patient id per candidate, or None (one patient per record)
    in_order: bool = False  # arrays: --labels rows may follow the candidates' order
    from_headers: bool = False  # WFDB: attributes come from the header comments


@dataclass
class _Records:
    """The usable records of RECORDS, as frames at the working rate."""

    names: np.ndarray  # record names
    frames: np.ndarray  # (n_frames, n_leads, frame_length), float32
    frame_record: np.ndarray  # row of names of each frame
    lead_names: list
    attributes: object  # DataFrame, one row per record (may be empty), or None
    groups: np.ndarray  # patient id per record
    all_names: list  # every candidate's name, in order (for --labels in row order)


# ----------------------------------------------------------------- sources


def _bundled(name):
    if name == "bundled:ptbxl-sample":
        data = load_ptbxl_sample()
        names = [str(i) for i in data.ecg_ids]
        what = "the bundled PTB-XL sample"
    else:
        data = load_ludb()
        names = [str(i) for i in data.record_names]
        what = "the bundled LUDB records"
    signals, fs, leads = data.data, float(data.fs), list(data.lead_names)

    def read(i, _leads):
        return RawRecord(signal=signals[i], fs=fs, lead_names=leads, source=f"{name}:{names[i]}")

    return _Source(
        names,
        read,
        what,
        attributes=data.attributes.reset_index(drop=True),
        groups=np.asarray(data.groups),
    )


def _arrays(path, sampling_rate, model_leads):
    """A ``.npy`` array (n_records, n_leads, n_samples), or a ``.npz`` file of one.

    The ``.npz`` file holds ``X`` and optionally ``record_ids`` and ``lead_names``.
    """
    if sampling_rate is None:
        raise CommandError(
            f"{path}: arrays carry no sampling rate; pass --sampling-rate HZ (e.g. "
            f"--sampling-rate 500)."
        )
    try:
        sampling_rate = check_rate(sampling_rate, "--sampling-rate")
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    try:
        if path.suffix.lower() == ".npz":
            with zipfile.ZipFile(path) as archive:
                found = {name.removesuffix(".npy") for name in archive.namelist()}
                # Only the arrays used are read: another member may be a bomb.
                stored = {
                    key: _npz_member(archive, key, path)
                    for key in ("X", "record_ids", "lead_names")
                    if key in found
                }
        else:  # mapped, read record by record; a header larger than the file is refused
            found = {"X"}
            stored = {"X": np.load(path, mmap_mode="r", allow_pickle=False)}
    except (OSError, ValueError, zipfile.BadZipFile) as exc:  # also object arrays
        raise CommandError(f"cannot read {path}: {exc}") from exc
    if "X" not in stored:
        raise CommandError(
            f"{path} has no array named 'X' (found {', '.join(sorted(found)) or 'none'}); save the "
            f"signals with np.savez(path, X=X, record_ids=ids)."
        )
    X = stored["X"]
    if X.ndim != 3 or not np.issubdtype(X.dtype, np.number):
        raise CommandError(
            f"{path}: expected numbers of shape (n_records, n_leads, n_samples), got "
            f"{X.dtype} of shape {X.shape}. For one lead, save X[:, np.newaxis, :]."
        )
    try:  # swapped axes (wfdb's layout), or a rate that makes records too short
        check_signal_layout(X.shape, sampling_rate, name="X")
    except ValueError as exc:
        raise CommandError(f"{path}: {exc}") from exc
    names = (
        [str(v) for v in stored["record_ids"]]
        if "record_ids" in stored
        else [str(i) for i in range(len(X))]
    )
    if len(names) != len(X) or len(set(names)) != len(names):
        raise CommandError(
            f"{path}: record_ids must name each of the {len(X)} records once, got "
            f"{len(names)} ids ({len(set(names))} distinct)."
        )
    if "lead_names" in stored:
        leads = [str(v) for v in stored["lead_names"]]
        if len(leads) != X.shape[1]:
            raise CommandError(f"{path}: {len(leads)} lead_names for {X.shape[1]} leads in X.")
    elif model_leads is not None and len(model_leads) == X.shape[1]:
        leads = list(model_leads)  # unnamed leads are taken to be in the model's order
    else:
        leads = [str(j + 1) for j in range(X.shape[1])]
    fs = float(sampling_rate)

    def read(i, _leads):
        return RawRecord(signal=X[i], fs=fs, lead_names=leads, source=f"{path}[{names[i]}]")

    return _Source(names, read, str(path), in_order=True)


def _npz_member(archive, key, path):
    """The array ``key`` of an open ``.npz`` archive, its header checked before its data is read.

    The size the header declares must fit in the member and in the memory available.
    """
    info = archive.getinfo(f"{key}.npy")
    with archive.open(info) as fh:
        version = np.lib.format.read_magic(fh)
        read_header = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        shape, _, dtype = read_header(fh)
        declared = math.prod(shape) * dtype.itemsize
        if dtype.hasobject or declared > info.file_size - fh.tell():
            raise ValueError(
                f"its array {key!r} declares {declared} bytes of {dtype} in a member of "
                f"{info.file_size} bytes: the file is damaged or crafted"
            )
    if declared > available_memory():
        raise CommandError(
            f"{path}: its array {key!r} needs {declared / 1e9:.3g} GB, more than the "
            f"{available_memory() / 1e9:.3g} GB of memory available. Split it into smaller files."
        )
    with archive.open(info) as fh:
        return np.lib.format.read_array(fh, allow_pickle=False)


def _files(path, repair_headers):
    """A folder of WFDB records and EDF files, or a single EDF file."""
    if path.is_dir():
        wfdb_records = find_wfdb_records(path)
        edf_files = find_edf_files(path)
        if edf_files:
            import_edfio()  # a missing extra is one error, not one skipped record per file
        if not wfdb_records and not edf_files:
            raise CommandError(f"{path} holds no WFDB records (*.hea) and no EDF files (*.edf).")
        paths = [*wfdb_records, *edf_files]
        relative = [p.relative_to(path) for p in paths]
    else:
        import_edfio()
        wfdb_records, edf_files, paths, relative = [], [path], [path], [Path(path.name)]
    n_wfdb = len(wfdb_records)
    # EDF records are named without their extension, as WFDB records are.
    names = [p.name if i < n_wfdb else p.stem for i, p in enumerate(paths)]
    if len(set(names)) != len(names):
        names = [
            r.as_posix() if i < n_wfdb else r.with_suffix("").as_posix()
            for i, r in enumerate(relative)
        ]

    def read(i, leads):
        if i < n_wfdb:
            return read_wfdb_record(paths[i], repair_headers=repair_headers)
        return read_edf_record(paths[i], leads=leads)

    return _Source(names, read, str(path), from_headers=n_wfdb > 0)


def _source(args, model_leads=None):
    text = str(args.records)
    if text.startswith("bundled:"):
        if text not in BUNDLED:
            raise CommandError(f"unknown bundled data {text!r}; choose {' or '.join(BUNDLED)}.")
        if args.sampling_rate is not None:
            raise CommandError(f"{text} has its own rate; leave out --sampling-rate.")
        return _bundled(text)
    path = Path(os.path.expanduser(text))
    if not path.exists():
        raise CommandError(
            f"{path} does not exist; RECORDS is a folder of WFDB or EDF records, an .edf, "
            f".npy or .npz file, or {' or '.join(BUNDLED)}."
        )
    if not path.is_dir() and not path.is_file():  # links are followed
        raise CommandError(
            f"{path} is not a regular file or a folder but a FIFO, device or socket, which "
            "could block or never end; copy the records into a file or folder."
        )
    if path.is_file() and path.suffix.lower() in ARRAY_SUFFIXES:
        return _arrays(path, args.sampling_rate, model_leads)
    if args.sampling_rate is not None:
        raise CommandError(
            "--sampling-rate is for .npy and .npz arrays; WFDB and EDF records give their own rate."
        )
    if path.is_file() and path.suffix.lower() not in EDF_SUFFIXES:
        raise CommandError(
            f"{path} is not a folder, an .edf, .npy or .npz file; for a WFDB record, give "
            f"its folder."
        )
    return _files(path, not args.no_repair_headers)


# ----------------------------------------------------------------- reading


def _condition_function(settings):
    """``f(signal, rate) -> signal at the working rate``, as recorded in ``settings``."""
    working_rate = settings["working_rate"]
    conditioning = settings["conditioning"]
    if conditioning is None:

        def resample(signal, rate):
            return signal if rate == working_rate else resample_signals(signal, rate, working_rate)

        return resample
    options = {
        "target_rate": working_rate,
        "bandpass": None if conditioning["bandpass"] is None else tuple(conditioning["bandpass"]),
        "notch": conditioning["notch"],
        "normalize": conditioning["normalize"],
    }

    def condition(signal, rate):
        # Whole records, one at a time: records may differ in length and rate.
        conditioner = SignalConditioner(sampling_rate=rate, **options)
        return conditioner.fit_transform(np.asarray(signal, dtype=np.float64)[np.newaxis])[0]

    return condition


def _read_records(args, settings, *, leads, model_leads=None):
    """The frames of every usable record of RECORDS, prepared as ``settings`` say."""
    source = _source(args, model_leads)
    frame_length = settings["frame_length"]
    working_rate = settings["working_rate"]
    log = ExclusionLog()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_SKIPPED_WARNING)
        signal_set = collect_signals(
            source.names,
            lambda i: source.read(i, leads),
            leads=leads,
            target_fs=working_rate,
            signal_length="variable",
            on_error="raise" if args.strict else "skip",
            log=log,
            verbose=0 if args.quiet else 1,
            caller="read",
            condition=_condition_function(settings),
        )
    warn_repaired(source.names, signal_set)
    skipped = log.frame()
    for record, reason in zip(skipped["record"], skipped["reason"]):
        note(f"skipped record {record}: {reason}")
    kept, signals = signal_set.kept, signal_set.data
    long_enough = np.array([x.shape[-1] >= frame_length for x in signals], dtype=bool)
    if not long_enough.all():
        short = [source.names[i] for i in kept[~long_enough]]
        note(
            f"skipped {len(short)} record(s) shorter than one frame ({frame_length} samples "
            f"at {working_rate:g} Hz): {', '.join(short)}"
        )
    if not long_enough.any():
        raise CommandError(f"no record of {source.description} is long enough for one frame.")
    signals = [x for x, ok in zip(signals, long_enough) if ok]
    infos = [info for info, ok in zip(signal_set.infos, long_enough) if ok]
    kept = kept[long_enough]
    frames, _, frame_record = make_frames(signals, frame_length, groups=np.arange(len(kept)))
    if settings["conditioning"] is None and settings["normalize"] != "none":
        frames = normalize_frames(frames, settings["normalize"])
    if source.attributes is not None:
        attributes = source.attributes.iloc[kept].reset_index(drop=True)
    elif source.from_headers:
        # EDF records and headers without comments give an empty row.
        attributes = pd.DataFrame.from_records(
            [parse_comments(info.get("comments", [])) for info in infos],
            index=range(len(infos)),
        )
    else:
        attributes = None
    names = np.asarray([source.names[i] for i in kept])
    if not args.quiet:
        note(
            f"read {len(kept)} of {len(source.names)} records of {source.description}: "
            f"{len(frames)} frames of {len(signal_set.lead_names)} leads x {frame_length} "
            f"samples at {working_rate:g} Hz"
        )
    return _Records(
        names=names,
        frames=np.asarray(frames, dtype=np.float32),
        frame_record=frame_record,
        lead_names=list(signal_set.lead_names),
        attributes=attributes,
        groups=names if source.groups is None else source.groups[kept],
        all_names=list(source.names),
    ), source


# ----------------------------------------------------------------- attributes


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
    if isinstance(value, str):
        return value.strip() or None
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    return str(value)


def _record_attributes(args, records, source, wanted, class_attribute=None, class_map=None):
    """The attributes ``wanted`` of each record (NaN where unknown).

    Values are kept as written, except sex (M/F), age (years) and the class
    attribute under a class map (its class; NaN where it has none or several).
    """
    if args.labels is None:
        if records.attributes is None:
            raise CommandError(
                f"{source.description} has no attributes of its own; pass --labels CSV "
                f"with a column per attribute"
                + (
                    " (rows in the order of the records, or --record-column)."
                    if source.in_order
                    else " and the record names in its first column."
                )
            )
        source_table, where = (
            records.attributes,
            ("the header comments" if source.from_headers else source.description),
        )
    else:
        try:
            table = pd.read_csv(args.labels, dtype=str)
        except (OSError, ValueError) as exc:
            raise CommandError(f"cannot read --labels {args.labels}: {exc}") from exc
        where = f"--labels {args.labels}"
        if source.in_order and args.record_column is None:
            # Arrays: row i of the CSV describes record i of the array.
            if len(table) != len(records.all_names):
                raise CommandError(
                    f"{where} has {len(table)} rows for the {len(records.all_names)} records "
                    f"of {source.description}; give one row per record, in order, or name "
                    f"the column of record ids with --record-column."
                )
            names, key = pd.Series(records.all_names), "row order"
        else:
            key = (
                table.columns[0]
                if args.record_column is None
                else _find_column(table.columns, args.record_column, where)
            )
            names = table[key].astype(str).str.strip().str.removesuffix(".hea")
            names = names.str.replace(r"\.edf$", "", case=False, regex=True)
        if names.duplicated().any():
            raise CommandError(
                f"{where}: records named more than once in column {key!r}: "
                f"{', '.join(names[names.duplicated()].unique()[:5])}."
            )
        source_table = table.set_index(names).reindex(records.names).reset_index(drop=True)
    values = {}
    for name in wanted:
        column = source_table[_find_column(source_table.columns, name, where)]
        if name.lower() == "sex":
            column = column.map(parse_sex)
        elif name.lower() == "age":
            column = column.map(parse_age)
        else:
            column = column.map(_text)
        values[name] = column.to_numpy(dtype=object)
        if name == class_attribute and class_map is not None:
            written = values[name]
            values[name] = map_classes(written, class_map)
            lost = int(pd.isna(values[name]).sum() - pd.isna(written).sum())
            if lost:
                note(f"--class-map: {lost} record(s) have no class of the map, or several")
    return pd.DataFrame(values, index=range(len(records.names)))


def _age_groups(y, age_groups):
    """Ages in ``y`` binned into the groups that fit learned (``settings["age_groups"]``)."""
    for name, groups in age_groups.items():
        ages = y[name].astype(float).to_numpy()
        index = np.searchsorted(np.asarray(groups["edges"], dtype=float), ages, side="right")
        labels = np.asarray(groups["labels"], dtype=object)
        y[name] = np.where(np.isnan(ages), None, labels[np.minimum(index, len(labels) - 1)])
    return y


# ----------------------------------------------------------------- commands


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


def _fit_settings(args):
    """The reading settings of ``fit``: rate, frames and conditioning."""
    # The estimator's working rate is the default, read from it rather than repeated here.
    try:
        working_rate = check_rate(
            CROCSClusterer().working_rate if args.working_rate is None else args.working_rate,
            "--working-rate",
        )
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    frame_length = round(args.frame_seconds * working_rate)
    if frame_length < 1:
        raise CommandError(
            f"--frame-seconds {args.frame_seconds:g} is less than one sample at "
            f"{working_rate:g} Hz."
        )
    if args.conditioning:
        conditioner = SignalConditioner(
            notch=args.notch, normalize=None if args.normalize == "none" else args.normalize
        )
        conditioning = {
            "bandpass": None if conditioner.bandpass is None else list(conditioner.bandpass),
            "notch": conditioner.notch,
            "normalize": conditioner.normalize,
        }
    elif args.notch is not None:
        raise CommandError("--notch is part of the conditioning; leave out --no-conditioning.")
    else:
        conditioning = None
    return {
        "format": SETTINGS_FORMAT,
        "sklearn_crocs_version": __version__,
        "working_rate": working_rate,
        "frame_seconds": args.frame_seconds,
        "frame_length": frame_length,
        "conditioning": conditioning,
        "normalize": args.normalize,
    }


def fit(args):
    model_dir = _check_output(args.model, args.force, folder=True)
    if args.labels is None and args.record_column is not None:
        raise CommandError("--record-column needs --labels.")
    class_attribute = args.class_attribute or args.attributes[0]
    if class_attribute not in args.attributes:
        raise CommandError(
            f"--class-attribute {class_attribute!r} is not one of --attributes "
            f"{','.join(args.attributes)}."
        )
    class_map = None
    if args.class_map is not None:
        try:
            class_map = read_class_map(args.class_map)
        except (TypeError, ValueError) as exc:
            raise CommandError(f"--class-map: {exc}") from exc
    settings = _fit_settings(args)
    records, source = _read_records(args, settings, leads=args.leads)
    y = _record_attributes(args, records, source, args.attributes, class_attribute, class_map)
    unknown = y.isna()
    if unknown.to_numpy().any():
        counts = ", ".join(f"{n} ({c})" for n, c in unknown.sum().items() if c)
        note(f"left out {int(unknown.any(axis=1).sum())} record(s) with an unknown {counts}")
    labelled = np.flatnonzero(~unknown.any(axis=1).to_numpy())
    if len(labelled) < 2:
        raise CommandError(
            f"{'no record has' if len(labelled) == 0 else 'only 1 record has'} a known value "
            "of every attribute; fit needs at least 2 labelled records."
        )
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
    rows = np.flatnonzero(np.isin(records.frame_record, labelled))
    # Record number among the labelled ones, for each frame.
    y_frames = y.iloc[np.searchsorted(labelled, records.frame_record[rows])]
    params = {
        name: getattr(args, name)
        for name in (
            "encoder",
            "embedding_dim",
            "max_epochs",
            "batch_size",
            "lr",
            "validation_fraction",
            "ensemble_size",
        )
        if getattr(args, name) is not None
    }
    working_rate = settings["working_rate"]
    # The frames are already at the working rate: the model records it and resamples nothing.
    model = CROCSClusterer(
        **params,
        sampling_rate=working_rate,
        working_rate=working_rate,
        class_attribute=class_attribute,
        device=args.device or "cpu",
        random_state=args.random_state,
        verbose=0 if args.quiet else 1,
    )
    model.fit(
        records.frames[rows],
        y_frames.reset_index(drop=True),
        groups=records.groups[records.frame_record[rows]],
    )
    settings.update(
        {
            "lead_names": records.lead_names,
            "attributes": list(args.attributes),
            "class_attribute": class_attribute,
            "class_map": class_map,
            "age_groups": age_groups,
            "n_training_records": len(labelled),
        }
    )
    model_dir.mkdir(parents=True, exist_ok=True)
    model.save(model_dir / MODEL_FILE)
    with _atomic_path(model_dir / SETTINGS_FILE) as tmp:
        tmp.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
    described = "; ".join(
        f"{name}: {', '.join(map(str, cats))}" if len(cats) <= 10 else f"{name}: {len(cats)} values"
        for name, cats in zip(model.attribute_names_, model.categories_)
    )
    print(
        escape(
            f"Trained on {len(rows)} frames of {len(labelled)} records in {model.n_iter_} "
            f"epochs; {len(model.prototypes_)} prototypes ({described})."
        )
    )
    print(escape(f"Model written to {model_dir}"))
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
    try:
        _check_settings(settings, model)
    except (KeyError, TypeError, ValueError) as exc:
        problem = f"no {exc}" if isinstance(exc, KeyError) else str(exc).rstrip(".")
        raise CommandError(
            f"{settings_path} does not fit the {MODEL_FILE} beside it ({problem}); fit the "
            "model again, or restore the settings.json written with it."
        ) from exc
    return model, settings


def _check_settings(settings, model):
    """Raise unless the reading ``settings`` are those that ``fit`` wrote for ``model``."""
    working_rate = check_rate(settings["working_rate"], "working_rate")
    if working_rate != model.sampling_rate_:
        raise ValueError(
            f"working_rate {working_rate:g} Hz, but the model was trained at "
            f"{model.sampling_rate_} Hz"
        )
    frame_length = settings["frame_length"]
    if frame_length != model.input_shape_[1] or isinstance(frame_length, bool):
        raise ValueError(
            f"frames of {frame_length!r} samples, but the model takes "
            f"{model.input_shape_[1]}"
        )
    leads = settings["lead_names"]
    if (
        not isinstance(leads, list)
        or not all(isinstance(lead, str) and lead for lead in leads)
        or len(set(leads)) != len(leads)
        or len(leads) != model.input_shape_[0]
    ):
        raise ValueError(
            f"lead_names {str(leads)[:80]}, not {model.input_shape_[0]} distinct "
            "names of the model's leads"
        )
    if settings["normalize"] not in ("none", *_NORMALIZE_OPTIONS):
        raise ValueError(f"normalize {str(settings['normalize'])[:40]!r}")
    conditioning = settings["conditioning"]
    if conditioning is not None:
        if not isinstance(conditioning, dict) or set(conditioning) != {
            "bandpass", "notch", "normalize"
        }:  # fmt: skip
            raise ValueError("conditioning that is not {bandpass, notch, normalize}")
        bandpass = conditioning["bandpass"]
        check_bandpass(None if bandpass is None else tuple(bandpass), working_rate)
        SignalConditioner(
            notch=conditioning["notch"], normalize=conditioning["normalize"]
        )._validate_params()
    class_map = settings.get("class_map")  # written as a table, never a name or path
    if class_map is not None and (not isinstance(class_map, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in class_map.items()
    )):  # fmt: skip
        raise ValueError("class_map that is not a {code: class} table of strings")
    if class_map is not None:
        read_class_map(class_map)  # non-empty codes and classes


def _read_for_model(args, settings):
    leads = settings["lead_names"]
    return _read_records(args, settings, leads=leads, model_leads=leads)[0]


def predict(args):
    out = _check_output(args.out, args.force)
    model, settings = _load_model(args)
    records = _read_for_model(args, settings)
    frames, frame_record = records.frames, records.frame_record
    starts = range(0, len(frames), _CHUNK)
    chunks = progress(starts, verbose=not args.quiet, desc="predict", unit="batch")
    proba = np.concatenate([model.predict_proba(frames[i : i + _CHUNK]) for i in chunks])
    # Mean probability of each prototype over the frames of each record.
    n_records = len(records.names)
    mean = np.zeros((n_records, proba.shape[1]))
    np.add.at(mean, frame_record, proba)
    mean /= np.bincount(frame_record, minlength=n_records)[:, np.newaxis]
    best = model.prototype_attributes_[np.argmax(mean, axis=1)]
    table = pd.DataFrame({"record": records.names})
    for j, name in enumerate(model.attribute_names_):
        table[name] = best[:, j]
    if args.proba:
        for j, name in enumerate(model.attribute_names_):
            same = model.prototype_attributes_[:, j][np.newaxis, :] == best[:, j][:, np.newaxis]
            table[f"{name}_proba"] = (mean * same).sum(axis=1).round(6)
    _write_csv(table, out)
    print(escape(f"Predicted the attributes of {n_records} records; written to {out}"))
    return 0


class _CountedRows:
    """Frames handed to ``PrototypeRetriever.fit``, which reads them in slices.

    Each slice read advances the progress bar, so that embedding the records
    shows progress as the loaders do.
    """

    def __init__(self, frames, bar):
        self._frames, self._bar = frames, bar
        self.shape = frames.shape

    def __getitem__(self, key):
        rows = self._frames[key]
        self._bar.update(len(rows))
        return rows


def _model_query(pairs, model, settings):
    """``{attribute: value}`` with the model's own values, read as fit read them.

    Names are matched regardless of case, as fit matches them; ``sex`` is
    read as fit reads it (``female`` is F), an age in years is put
    into its age group, a code of the class attribute into its class under
    the class map of fit, and other values match the model's regardless of case.
    """
    names = list(model.attribute_names_)
    by_lower = {n.lower(): n for n in names}
    query = {}
    for name, text in pairs:
        name = by_lower.get(name.lower(), name)  # attribute names, as in fit, in any case
        if name not in names:
            raise CommandError(
                f"--query: the model has no attribute {name!r}; its attributes are "
                f"{', '.join(names)}."
            )
        categories = model.categories_[names.index(name)]
        given = text
        if name.lower() == "sex":
            given = parse_sex(text) or text
        elif name in settings.get("age_groups", {}) and not np.isnan(parse_age(text)):
            ages = pd.DataFrame({name: [parse_age(text)]})
            given = _age_groups(ages, {name: settings["age_groups"][name]})[name][0]
        elif name == settings.get("class_attribute") and settings.get("class_map"):
            given = map_classes([text], settings["class_map"])[0]
            given = text if pd.isna(given) else given
        matches = [value for value in categories if str(value).lower() == str(given).lower()]
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
            probe.query(query, n_neighbors=1)
        except ValueError as exc:
            raise CommandError(f"--query {query}: {exc}") from exc


def _nearest_records(distances, indices, frame_record, k):
    """``[(record, distance), ...]``: the ``k`` nearest records of frame hits, each once.

    A record's distance is that of its nearest frame; ``distances`` and
    ``indices`` may hold the hits of several query frames.
    """
    order = np.argsort(distances, kind="stable")
    hit_records = frame_record[indices[order]]
    _, first = np.unique(hit_records, return_index=True)  # each record's nearest frame
    first = np.sort(first)[:k]
    return list(zip(hit_records[first], distances[order][first]))


def search(args):
    out = _check_output(args.out, args.force)
    if args.example is not None and args.query:
        raise CommandError("--query and --example are two kinds of query; pass one of them.")
    model, settings = _load_model(args)
    queries = [_model_query(pairs, model, settings) for pairs in args.query or []]
    _check_queries(queries, model)
    examples = None
    if args.example is not None:
        leads = settings["lead_names"]
        example_args = argparse.Namespace(**{**vars(args), "records": args.example})
        examples = _read_records(example_args, settings, leads=leads, model_leads=leads)[0]
    records = _read_for_model(args, settings)
    frames, frame_record = records.frames, records.frame_record
    bar = progress(None, verbose=not args.quiet, desc="embed", total=len(frames), unit="frame")
    with bar:
        retriever = PrototypeRetriever(model, batch_size=_CHUNK).fit(_CountedRows(frames, bar))
    n_records = len(records.names)
    if args.k > n_records:
        note(f"--k {args.k} is more than the {n_records} records read: all are returned")
    # Enough frames to hold the k nearest records even when each has all its frames first.
    n_frames = min(len(frames), args.k * int(np.bincount(frame_record).max()))
    names = list(model.attribute_names_)
    if examples is not None:
        labels, results = [], []
        for r, name in enumerate(examples.names):
            # Each frame of the example ECG searches; a record's distance is its nearest pair's.
            d, i = retriever.kneighbors(examples.frames[examples.frame_record == r], n_frames)
            labels.append(f"example={name}")
            results.append((d.ravel(), i.ravel()))
    else:
        if queries:
            labels = [",".join(f"{n}={v}" for n, v in q.items()) for q in queries]
            found = [retriever.query(query, n_neighbors=n_frames) for query in queries]
            distances = np.concatenate([d for d, _ in found])
            indices = np.concatenate([i for _, i in found])
        else:
            labels = [
                ",".join(f"{n}={v}" for n, v in zip(names, row))
                for row in retriever.query_attributes_.to_numpy()
            ]
            distances, indices = retriever.query(n_neighbors=n_frames)
        results = list(zip(distances, indices))
    hits = []
    for label, (row_distances, row_indices) in zip(labels, results):
        nearest = _nearest_records(row_distances, row_indices, frame_record, args.k)
        for rank, (record, distance) in enumerate(nearest, 1):
            hits.append((label, rank, records.names[record], distance))
    table = pd.DataFrame(hits, columns=["query", "rank", "record", "distance"])
    table["distance"] = table["distance"].round(6)
    _write_csv(table, out)
    print(
        escape(
            f"Wrote the {min(args.k, n_records)} nearest records for {len(labels)} "
            f"quer{'y' if len(labels) == 1 else 'ies'} to {out}"
        )
    )
    return 0


def score(args):
    """The paper's clustering and retrieval tables against the records' labels, and figures."""
    out_dir = Path(args.out_dir)
    written = [out_dir / n for n in ("clustering.csv", "retrieval.csv", "prototypes.png",
                                     "retrieval.png")]  # fmt: skip
    if out_dir.exists() and not out_dir.is_dir():
        raise CommandError(f"--out-dir {out_dir} is a file, not a folder.")
    if any(path.exists() for path in written) and not args.force:
        raise CommandError(f"--out-dir {out_dir} holds earlier results; pass --force to overwrite.")
    model, settings = _load_model(args)
    records, source = _read_records(
        args, settings, leads=settings["lead_names"], model_leads=settings["lead_names"]
    )
    names = list(model.attribute_names_)
    y = _record_attributes(
        args, records, source, settings["attributes"], settings.get("class_attribute"),
        settings.get("class_map"),
    )
    y = _age_groups(y, settings.get("age_groups", {}))
    known = ~y.isna().any(axis=1).to_numpy()
    for j, name in enumerate(names):  # values fit never saw cannot be scored
        known &= y[name].isin(list(model.categories_[j])).to_numpy()
    if not known.all():
        note(
            f"left out {int((~known).sum())} record(s) with an unknown value, or one the "
            "model was not fitted on"
        )
    rows = np.flatnonzero(known[records.frame_record])
    if len(rows) < max(args.k):
        raise CommandError(
            f"only {len(rows)} frames have known values of {', '.join(names)}; --k "
            f"{max(args.k)} needs at least that many."
        )
    X = records.frames[rows]
    y = y.iloc[records.frame_record[rows]].reset_index(drop=True)
    y = y.astype({name: object for name in names})
    print(f"Scored on {len(rows)} frames of {int(known.sum())} records.")
    from .metrics import evaluate_prototypes

    result = evaluate_prototypes(model, X, y, k=args.k, file=sys.stdout)
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_csv(result.clustering.reset_index(), written[0])
    _write_csv(result.retrieval.reset_index(), written[1])
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no window
        from .plotting import PrototypeDisplay, RetrievalDisplay
    except ImportError as exc:
        note(f"no figures: {exc}")
        return 0
    import matplotlib.pyplot as plt

    display = PrototypeDisplay.from_estimator(model, X, y)
    display.figure_.savefig(written[2], dpi=120, bbox_inches="tight")
    display = RetrievalDisplay.from_estimator(model, X, y, n_neighbors=min(6, len(X)))
    display.figure_.savefig(written[3], dpi=120, bbox_inches="tight")
    plt.close("all")
    print(f"Tables and figures written to {out_dir}")
    return 0
