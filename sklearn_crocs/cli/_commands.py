"""What ``fit``, ``predict``, ``search`` and ``score`` do (see :mod:`sklearn_crocs.cli`).

Kept apart from the argument parser so that ``sklearn-crocs --help`` imports
neither numpy, pandas nor torch: :mod:`sklearn_crocs.cli._parser` imports
this module only once a command has been parsed. ``settings.json`` keeps the
reading settings (:mod:`sklearn_crocs.cli._records`) so that predict and
search prepare new records exactly as fit did, whatever their rate.
"""

import argparse
import contextlib
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from .. import __version__
from .._clusterer import CROCSClusterer
from .._guards import NonFiniteEmbeddingError
from .._persistence._pretrained import read_pretrained
from .._retrieval import PrototypeRetriever
from .._utils import _atomic_path
from ..datasets._base import parse_age, parse_sex, progress
from ..datasets._class_maps import read_class_map
from ..preprocessing import AgeGroupEncoder, SignalConditioner
from ..preprocessing._age_groups import group_labels
from ..preprocessing._signals import NORMALIZE_METHODS, check_bandpass, check_rate
from ._common import (
    MODEL_FILE,
    SETTINGS_FILE,
    SETTINGS_FORMAT,
    SHIPPED_MODELS,
    CommandError,
    escape,
    note,
)
from ._notes import MULTI_CLASS, note_class_map, note_left_out, note_support, read_classes
from ._records import read_records, record_attributes

# Frames handed to the model at a time by predict and search (one progress step each).
_CHUNK = 256


def _age_groups(y, age_groups):
    """Ages in ``y`` binned into the groups that fit learned (``settings["age_groups"]``)."""
    for name, groups in age_groups.items():
        ages = y[name].astype(float).to_numpy()
        index = np.searchsorted(np.asarray(groups["edges"], dtype=float), ages, side="right")
        labels = np.asarray(groups["labels"], dtype=object)
        y[name] = np.where(np.isnan(ages), None, labels[np.minimum(index, len(labels) - 1)])
    return y


# ----------------------------------------------------------------- commands


def check_output(path, force, *, folder=False, option="--out"):
    """Refuse to replace an existing output unless ``--force``, and a link even then."""
    path = Path(path)
    if folder:
        if path.exists() and not path.is_dir():
            raise CommandError(f"--model {path} is a file, not a folder.")
        if path.is_dir() and any(path.iterdir()) and not force:
            raise CommandError(
                f"--model {path} exists and is not empty; pass --force to overwrite it."
            )
        for name in (MODEL_FILE, SETTINGS_FILE):  # refused now rather than after training
            check_output(path / name, True, option="--model:")
    elif path.is_symlink():  # dangling or not: a file written there would land elsewhere
        raise CommandError(
            f"{option} {path} is a symbolic link; sklearn-crocs writes no file through a "
            "link nor in place of one. Remove the link or choose another path."
        )
    elif path.exists() and not force:
        raise CommandError(f"{option} {path} exists; pass --force to overwrite it.")
    return path


@contextlib.contextmanager
def _finite(records, frames=None):
    """A non-finite embedding of frames (``frames``: their positions) as an error naming records."""
    try:
        yield
    except NonFiniteEmbeddingError as exc:
        rows = exc.rows if frames is None else np.asarray(frames)[exc.rows]
        found = [records.names[r] for r in np.unique(records.frame_record[rows])]
        more = f" and {len(found) - 10} more" if len(found) > 10 else ""
        raise CommandError(
            f"The model embeds record(s) {', '.join(found[:10])}{more} as NaN or infinity "
            "(not finite): its weights overflow on them, so they have no prediction. Look at "
            "these records for spikes or a wrong scale; if they are ordinary ECGs, the model "
            "is faulty: fit it again or use a model you trust."
        ) from None


def write_csv(frame, path, force):
    with _atomic_path(path, replace=force) as tmp:
        frame.to_csv(tmp, index=False)


def fit_settings(args):
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


def check_attributes(args):
    """fit's ``--attributes``, ``--class-attribute`` and ``--class-map``, checked and read."""
    _check_output_names(args.attributes, "--attributes")
    class_attribute = args.class_attribute or args.attributes[0]
    if class_attribute not in args.attributes:
        raise CommandError(
            f"--class-attribute {class_attribute!r} is not one of --attributes "
            f"{','.join(args.attributes)}."
        )
    class_map = None
    if args.class_map is None and args.multi_class != "drop":
        raise CommandError(f"--multi-class {args.multi_class} needs --class-map.")
    if args.class_map is not None:
        try:
            class_map = read_class_map(args.class_map)
        except (TypeError, ValueError) as exc:
            raise CommandError(f"--class-map: {exc}") from exc
    return class_attribute, class_map


def fit_labels(args, records, source, class_attribute, class_map, *, bin_ages=True):
    """The attributes fit learns: ``(y, labelled, age_groups)``.

    ``y`` holds the labelled records' attributes (classes by the class map,
    ages in groups learned from these records, or in years without
    ``bin_ages``), ``labelled`` their positions among ``records``; records
    with no known attribute are left out.
    """
    y = record_attributes(args, records, source, args.attributes)
    written = y[class_attribute].to_numpy()
    y[class_attribute] = read_classes(
        written, class_map, args.multi_class, [] if class_map is None else class_map.values()
    )
    note_class_map(written, y[class_attribute].to_numpy(), class_map, args.multi_class,
                   class_attribute)  # fmt: skip
    unknown = y.isna()
    # A record trains with what it has (its unknown attributes summed out); one with
    # no known attribute has nothing to learn from.
    nothing = unknown.all(axis=1).to_numpy()
    if nothing.any():
        note(f"left out {int(nothing.sum())} record(s) with no known attribute")
    if unknown[~nothing].to_numpy().any():
        counts = ", ".join(f"{n} ({c})" for n, c in unknown[~nothing].sum().items() if c)
        note(
            f"{int(unknown[~nothing].any(axis=1).sum())} record(s) train with the attributes "
            f"they have; unknown: {counts}"
        )
    labelled = np.flatnonzero(~nothing)
    n_class = int(y[class_attribute].notna().sum())
    if n_class < 2:
        raise CommandError(
            f"{'no record has' if n_class == 0 else 'only 1 record has'} a known "
            f"{class_attribute!r}; fit needs at least 2."
        )
    y = y.iloc[labelled].reset_index(drop=True)
    if not bin_ages:
        return y, labelled, {}
    y, age_groups = bin_ages_of(y, np.arange(len(y)), args.age_groups)
    return y, labelled, age_groups


def bin_ages_of(y, rows, n_groups):
    """``(y, age_groups)``: the age columns of ``y`` in ``n_groups`` quantile groups of
    the known ages of ``rows`` (the records a model learns from), every row binned."""
    y, age_groups = y.copy(), {}
    for name in y.columns:
        if name.lower() == "age":
            ages = y[name].astype(float).to_numpy()
            known = ~np.isnan(ages)
            learned = ages[rows][known[rows]][:, None]
            n_ages = len(np.unique(learned))
            if n_groups > n_ages:
                raise CommandError(
                    f"--age-groups {n_groups}: the {len(learned)} records' known ages take "
                    f"only {n_ages} distinct value(s), too few for that many groups. Pass "
                    f"--age-groups {n_ages} or fewer."
                )
            encoder = AgeGroupEncoder(n_groups=n_groups).fit(learned)
            groups = np.full(len(y), None, dtype=object)
            groups[known] = encoder.transform(ages[known][:, None]).ravel()
            y[name] = pd.Categorical(groups, categories=encoder.labels_)
            # The inner edges only: the outer ones are the youngest and oldest ages.
            age_groups[name] = {
                "labels": list(encoder.labels_),
                "edges": encoder.bin_edges_[1:-1].tolist(),
            }
    return y, age_groups


def new_model(args, settings, class_attribute, start=None):
    """The CROCSClusterer of fit's options, at the working rate of ``settings``."""
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
    return CROCSClusterer(
        **params,
        sampling_rate=working_rate,
        working_rate=working_rate,
        class_attribute=class_attribute,
        device=args.device or "cpu",
        random_state=args.random_state,
        verbose=0 if args.quiet else 1,
        pretrained=start,
    )


def fit(args):
    model_dir = check_output(args.model, args.force, folder=True)
    if args.labels is None and args.record_column is not None:
        raise CommandError("--record-column needs --labels.")
    class_attribute, class_map = check_attributes(args)
    settings = fit_settings(args)
    start, start_settings = None, None
    if args.start_from is not None:
        start_args = argparse.Namespace(model=args.start_from, device=None)
        start, start_settings = _load_model(start_args)
        _check_start(args.start_from, start_settings, settings)
    leads = args.leads if start is None else args.leads or start_settings["lead_names"]
    records, source = read_records(args, settings, leads=leads)
    if start is not None and records.lead_names != start_settings["lead_names"]:
        raise CommandError(
            f"--from {args.start_from} reads the leads {','.join(start_settings['lead_names'])}"
            f", in this order; the records give {','.join(records.lead_names)}. Pass --leads "
            "with the model's leads."
        )
    y, labelled, age_groups = fit_labels(args, records, source, class_attribute, class_map)
    rows = np.flatnonzero(np.isin(records.frame_record, labelled))
    # Record number among the labelled ones, for each frame.
    y_frames = y.iloc[np.searchsorted(labelled, records.frame_record[rows])]
    model = new_model(args, settings, class_attribute, start)
    model.fit(
        records.frames[rows],
        y_frames.reset_index(drop=True),
        groups=records.groups[records.frame_record[rows]],
    )
    note_support(model, y[class_attribute].to_numpy(), records.groups[labelled])
    settings.update(
        {
            "lead_names": records.lead_names,
            "attributes": list(args.attributes),
            "class_attribute": class_attribute,
            "class_map": class_map,
            "multi_class": args.multi_class,
            "age_groups": age_groups,
            "n_training_records": len(labelled),
        }
    )
    model_dir.mkdir(parents=True, exist_ok=True)
    model.save(model_dir / MODEL_FILE, overwrite=args.force)
    with _atomic_path(model_dir / SETTINGS_FILE, replace=args.force) as tmp:
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


def _shipped_settings(model, lead_names):
    """The reading settings of a shipped model, as fit would write them: from the model
    itself (its rate, frames, conditioning and age edges) and the file's lead names."""
    rate, frame_length = model.sampling_rate_, model.input_shape_[1]
    step = model.conditioning
    conditioning = None if step is None else {
        "bandpass": None if step.bandpass is None else list(step.bandpass),
        "notch": step.notch,
        "normalize": step.normalize,
    }  # fmt: skip
    names = list(model.attribute_names_)
    age_groups = {
        name: {
            "labels": [str(c) for c in model.categories_[names.index(name)]],
            "edges": edges[1:-1].tolist(),
        }
        for name, edges in model.bin_edges_.items()
        if name.lower() == "age"
    }
    return {
        "format": SETTINGS_FORMAT,
        "sklearn_crocs_version": __version__,
        "working_rate": rate,
        "frame_seconds": frame_length / rate,
        "frame_length": frame_length,
        "conditioning": conditioning,
        "normalize": "none" if step is None else (step.normalize or "none"),
        "lead_names": list(lead_names),
        "attributes": names,
        "class_attribute": names[model.class_index_],
        "class_map": None,
        "age_groups": age_groups,
    }


def _load_shipped(name, device):
    """A shipped model (``bundled:ptbxl``) and its reading settings."""
    model, document = read_pretrained(
        CROCSClusterer, name.removeprefix("bundled:"), device=device
    )
    settings = _shipped_settings(model, document["lead_names"])
    # The command line conditions and frames each record itself, as the settings say.
    model.set_params(conditioning=None, longer_signals="error", verbose=0)
    return model, settings


def _check_start(name, start_settings, settings):
    """Refuse a ``--from`` model that read its records otherwise than this fit will."""
    for key, option in (
        ("working_rate", "--working-rate"),
        ("conditioning", "--conditioning, --notch and --normalize"),
        ("normalize", "--normalize"),
    ):
        if start_settings[key] != settings[key]:
            raise CommandError(
                f"--from {name} read its records with {key} {start_settings[key]!r}; this fit "
                f"would use {settings[key]!r}. Give {option} as that model was fitted with."
            )


def _load_model(args):
    """The fitted model and the reading settings of ``--model``."""
    if args.model in SHIPPED_MODELS:
        return _load_shipped(args.model, args.device)
    if args.model.startswith("bundled:"):
        raise CommandError(
            f"{args.model} is not a shipped model; the package ships {', '.join(SHIPPED_MODELS)}."
        )
    model_dir = Path(args.model)
    settings_path = model_dir / SETTINGS_FILE
    if not settings_path.is_file() or not (model_dir / MODEL_FILE).is_file():
        raise CommandError(
            f"--model {model_dir} is not a model folder written by 'sklearn-crocs fit' "
            f"(it needs {MODEL_FILE} and {SETTINGS_FILE})."
        )
    from .._utils import _MAX_TABLE_BYTES, _read_regular

    try:  # a regular file of bounded size: is_file above follows a link that may change
        data = _read_regular(settings_path, limit=_MAX_TABLE_BYTES, what="settings file")
    except (OSError, ValueError) as exc:
        raise CommandError(str(exc)) from exc
    try:
        settings = json.loads(data.decode("utf-8"))
    except ValueError as exc:
        raise CommandError(f"{settings_path} is not valid JSON ({exc}).") from exc
    if not isinstance(settings, dict) or settings.get("format") != SETTINGS_FORMAT:
        raise CommandError(
            f"{settings_path} is not in the format {SETTINGS_FORMAT} that this version "
            f"of sklearn-crocs ({__version__}) reads; fit the model again."
        )
    model = CROCSClusterer.load(model_dir / MODEL_FILE, device=args.device)
    model.set_params(verbose=0)
    _check_output_names(model.attribute_names_, f"--model {model_dir}")
    try:
        _check_settings(settings, model)
    except (KeyError, TypeError, ValueError) as exc:
        problem = f"no {exc}" if isinstance(exc, KeyError) else str(exc).rstrip(".")
        raise CommandError(
            f"{settings_path} does not fit the {MODEL_FILE} beside it ({problem}); fit the "
            "model again, or restore the settings.json written with it."
        ) from exc
    return model, settings


def _check_output_names(names, where):
    """Refuse attribute names that would overwrite another column of predict's CSV."""
    taken = {"record"} | {f"{name}_proba" for name in names}
    clashes = [name for name in names if name in taken]
    if clashes:
        raise CommandError(
            f"{where} has the attribute(s) {', '.join(clashes)}, but predict writes a column "
            "'record' (the record names) and '<attribute>_proba' for each attribute: the "
            "columns would overwrite each other. Rename the attribute (its column in the "
            "labels file) and fit again."
        )


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
    if settings["normalize"] not in ("none", *NORMALIZE_METHODS):
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
    names = list(model.attribute_names_)
    if settings["attributes"] != names:
        raise ValueError(f"attributes {str(settings['attributes'])[:80]}, not the model's {names}")
    if settings["class_attribute"] != names[model.class_index_]:
        raise ValueError(
            f"class_attribute {str(settings['class_attribute'])[:40]!r}, not the model's "
            f"{names[model.class_index_]!r}"
        )
    _check_age_groups(settings["age_groups"], model)
    class_map = settings.get("class_map")  # written as a table, never a name or path
    if class_map is not None and (not isinstance(class_map, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in class_map.items()
    )):  # fmt: skip
        raise ValueError("class_map that is not a {code: class} table of strings")
    if class_map is not None:
        read_class_map(class_map)  # non-empty codes and classes
    # Absent from the settings of models fitted before --multi-class: "drop", as they read.
    if settings.get("multi_class", "drop") not in MULTI_CLASS:
        raise ValueError(
            f"multi_class {str(settings['multi_class'])[:40]!r}, not one of "
            f"{', '.join(MULTI_CLASS)}"
        )


def _check_age_groups(age_groups, model):
    """Raise unless ``age_groups`` bin ages into the model's age groups, in their order."""
    names = list(model.attribute_names_)
    if not isinstance(age_groups, dict) or not set(age_groups) <= set(names):
        raise ValueError("age_groups that are not a table of the model's attributes")
    for name, groups in age_groups.items():
        if not isinstance(groups, dict) or set(groups) != {"labels", "edges"}:
            raise ValueError(f"age_groups of {name!r} that are not {{labels, edges}}")
        labels, edges = groups["labels"], groups["edges"]
        if not (isinstance(labels, list) and isinstance(edges, list)) or not all(
            isinstance(e, (int, float)) and not isinstance(e, bool) for e in edges
        ):
            raise ValueError(f"age_groups of {name!r} that are not lists of labels and numbers")
        if len(labels) != len(edges) + 1 or not np.all(np.diff(edges) > 0):
            raise ValueError(f"age_groups of {name!r}: not increasing edges between its labels")
        # Fit's groups in age order: the model's categories are those it saw, in that order.
        categories = [str(c) for c in model.categories_[names.index(name)]]
        if [label for label in labels if label in categories] != categories:
            raise ValueError(
                f"age_groups of {name!r} labelled {str(labels)[:80]}, not the model's "
                f"{categories} in age order"
            )
        # The labels name the edges (<=47, 48-60, ...): a moved edge is found.
        outer = np.array([-np.inf, *edges, np.inf])
        if labels not in (group_labels(outer, True), group_labels(outer, False)):
            raise ValueError(f"age_groups of {name!r}: edges {edges} that its labels do not name")


def _read_for_model(args, settings):
    leads = settings["lead_names"]
    return read_records(args, settings, leads=leads, model_leads=leads)[0]


def predict(args):
    out = check_output(args.out, args.force)
    model, settings = _load_model(args)
    records = _read_for_model(args, settings)
    frames, frame_record = records.frames, records.frame_record
    starts = range(0, len(frames), _CHUNK)
    chunks = progress(starts, verbose=not args.quiet, desc="predict", unit="batch")
    parts = []
    for i in chunks:
        with _finite(records, range(i, len(frames))):
            parts.append(model.predict_proba(frames[i : i + _CHUNK]))
    proba = np.concatenate(parts)
    # Mean probability of each prototype over the frames of each record.
    n_records = len(records.names)
    mean = np.zeros((n_records, proba.shape[1]))
    np.add.at(mean, frame_record, proba)
    mean /= np.bincount(frame_record, minlength=n_records)[:, np.newaxis]
    attributes = model.get_prototypes()[1]  # the array, whatever the layout of y
    best = attributes[np.argmax(mean, axis=1)]
    table = pd.DataFrame({"record": records.names})
    for j, name in enumerate(model.attribute_names_):
        table[name] = best[:, j]
    if args.proba:
        for j, name in enumerate(model.attribute_names_):
            same = attributes[:, j][np.newaxis, :] == best[:, j][:, np.newaxis]
            table[f"{name}_proba"] = (mean * same).sum(axis=1).round(6)
    write_csv(table, out, args.force)
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
            # A class name as it is, a code by the class map, as score reads labels.
            multi_class = settings.get("multi_class", "drop")
            given = read_classes([text], settings["class_map"], multi_class, categories)[0]
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
    out = check_output(args.out, args.force)
    if args.example is not None and args.query:
        raise CommandError("--query and --example are two kinds of query; pass one of them.")
    model, settings = _load_model(args)
    queries = [_model_query(pairs, model, settings) for pairs in args.query or []]
    _check_queries(queries, model)
    examples = None
    if args.example is not None:
        leads = settings["lead_names"]
        example_args = argparse.Namespace(**{**vars(args), "records": args.example})
        examples = read_records(example_args, settings, leads=leads, model_leads=leads)[0]
    records = _read_for_model(args, settings)
    frames, frame_record = records.frames, records.frame_record
    bar = progress(None, verbose=not args.quiet, desc="embed", total=len(frames), unit="frame")
    with bar, _finite(records):
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
            with _finite(examples, np.flatnonzero(examples.frame_record == r)):
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
    write_csv(table, out, args.force)
    print(
        escape(
            f"Wrote the {min(args.k, n_records)} nearest records for {len(labels)} "
            f"quer{'y' if len(labels) == 1 else 'ies'} to {out}"
        )
    )
    return 0


def scorable(y, model):
    """Whether each row of ``y`` has all attributes known, with values the model was fitted on."""
    known = ~y.isna().any(axis=1).to_numpy()
    for j, name in enumerate(model.attribute_names_):  # values fit never saw cannot be scored
        known &= y[name].isin(list(model.categories_[j])).to_numpy()
    return known


def retrieval_query(pairs, model, settings):
    """The prototype that retrieval.png shows: of those with the values of ``--query`` (any
    attribute left out takes any value), the one of most training ECGs; the first
    prototype may have none, and so retrieve nothing alike."""
    query = {} if pairs is None else _model_query(pairs, model, settings)
    attributes = pd.DataFrame(model.get_prototypes()[1], columns=model.attribute_names_)
    chosen = np.ones(len(attributes), dtype=bool)
    for name, value in query.items():
        chosen &= (attributes[name] == value).to_numpy()
    best = np.argmax(np.where(chosen, model.prototype_counts_, -1))
    return attributes.iloc[best].to_dict()


def save_figure(figure, path, force):
    with _atomic_path(path, replace=force) as tmp:  # its name ends in .tmp
        figure.savefig(tmp, format="png", dpi=120, bbox_inches="tight")


def score(args):
    """The paper's clustering and retrieval tables against the records' labels, and figures."""
    out_dir = Path(args.out_dir)
    written = [out_dir / n for n in ("clustering.csv", "retrieval.csv", "prototypes.png",
                                     "retrieval.png")]  # fmt: skip
    if out_dir.exists() and not out_dir.is_dir():
        raise CommandError(f"--out-dir {out_dir} is a file, not a folder.")
    for path in written:
        check_output(path, args.force, option="--out-dir:")
    model, settings = _load_model(args)
    query = retrieval_query(args.query, model, settings)
    records, source = read_records(
        args, settings, leads=settings["lead_names"], model_leads=settings["lead_names"]
    )
    names = list(model.attribute_names_)
    labels = record_attributes(args, records, source, settings["attributes"])  # as written
    y, class_attribute = labels.copy(), names[model.class_index_]
    y[class_attribute] = read_classes(
        labels[class_attribute], settings.get("class_map"), settings.get("multi_class", "drop"),
        model.categories_[model.class_index_],
    )
    y = _age_groups(y, settings.get("age_groups", {}))
    known = scorable(y, model)
    note_left_out(labels, y, known, model, settings.get("class_map"))
    rows = np.flatnonzero(known[records.frame_record])
    if not known.any():
        raise CommandError(
            "no record has labels the model knows (see the note above): nothing to score. "
            f"Give the values of {', '.join(names)} that fit printed for the model."
        )
    if len(rows) < max(args.k):
        raise CommandError(
            f"only {len(rows)} frames have labels the model knows; --k {max(args.k)} needs "
            "at least that many."
        )
    X = records.frames[rows]
    y = y.iloc[records.frame_record[rows]].reset_index(drop=True)
    y = y.astype({name: object for name in names})
    print(f"Scored on {len(rows)} frames of {int(known.sum())} records.")
    from ..metrics import evaluate_prototypes

    with _finite(records, rows):
        result = evaluate_prototypes(model, X, y, k=args.k, file=sys.stdout)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_csv(result.clustering.reset_index(), written[0], args.force)
    write_csv(result.retrieval.reset_index(), written[1], args.force)
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no window
        from ..plotting import PrototypeDisplay, RetrievalDisplay
    except ImportError as exc:
        note(f"no figures: {exc}")
        return 0
    import matplotlib.pyplot as plt

    displays = [
        PrototypeDisplay.from_estimator(model, X, y),
        RetrievalDisplay.from_estimator(model, X, y, query=query, n_neighbors=min(6, len(X))),
    ]
    for display, path in zip(displays, written[2:]):
        save_figure(display.figure_, path, args.force)
    plt.close("all")
    print(escape(f"Tables and figures written to {out_dir}"))
    return 0
