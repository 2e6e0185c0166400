"""The ``sklearn-crocs`` argument parser, one function a command, and its entry point.

This module imports nothing heavy: numpy, pandas and torch are imported with
:mod:`sklearn_crocs.cli._commands` once a command has been parsed, so that
``--help`` answers at once.
"""

import argparse
import re
import sys
import warnings

from .. import __version__
from ._common import BUNDLED, SHIPPED_MODELS, CommandError, escape
from ._job import main as main_job

SUBCOMMANDS = ("fit", "predict", "search", "score", "evaluate")
# Whether fit conditions whole records (band-pass 0.67-40 Hz, per-lead z-score)
# before cutting frames: the one place that sets the default of --conditioning.
CONDITIONING_DEFAULT = True


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
    names = [name.lower() for name, _ in pairs]  # names match in any case
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"an attribute is named twice in {text!r}")
    return pairs


def _positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _positive_float(text):
    value = float(text)
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def _common_parser(model=True):
    """The arguments of every command: the records, the model and how to read them
    (evaluate fits its own models: no ``--model``)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "records",
        metavar="RECORDS",
        help="a folder of WFDB records (.hea) and EDF/EDF+ files (.edf), searched "
        "recursively; one WFDB record (x.hea, or x without .hea); one .edf file; a .npy "
        "or .npz array of shape (n_records, n_leads, "
        "n_samples) with --sampling-rate; or the bundled data: " + " or ".join(BUNDLED),
    )
    common.add_argument(
        "--sampling-rate",
        type=_positive_float,
        metavar="HZ",
        help="rate of a .npy or .npz array in Hz (required for arrays; WFDB and EDF "
        "records give their own)",
    )
    if model:
        common.add_argument(
            "--model",
            required=True,
            metavar="MODEL",
            help="folder of the model (fit: the folder to write); predict, search and score "
            "also take the model shipped with the package: " + " or ".join(SHIPPED_MODELS),
        )
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
    return common


def _fit_parser(sub, common):
    fit = sub.add_parser(
        "fit",
        parents=[common],
        help="train a model on the records and their attributes",
        description="Train CROCS on every record of RECORDS with the attributes "
        "named by --attributes, read from the WFDB header comments (#Age, #Sex, #Dx, ...), "
        "from the bundled data's table or from --labels (needed for EDF files and arrays), "
        "and write the model to the folder --model. Each record is conditioned whole at its own "
        "rate (band-pass, resampling to --working-rate, per-lead scaling) and cut into "
        "frames of --frame-seconds. A record with some attributes unknown (a diagnosis "
        "missing, say) trains with those it has; one with none is left out. Age is binned "
        "into groups learned from the records. "
        "--from starts the encoder from a trained model.",
    )
    fit.add_argument(
        "--from",
        dest="start_from",
        metavar="MODEL",
        help="start from a trained model's encoder (fine-tuning): "
        + " or ".join(SHIPPED_MODELS)
        + ", or the folder of a model written by fit; the attributes are this fit's own",
    )
    _add_attribute_arguments(fit)
    _add_reading_arguments(fit)
    _add_estimator_arguments(fit)


def _add_attribute_arguments(fit):
    """Where fit reads the attributes and how it groups them."""
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
        help="a CSV file with one row per record and a column per attribute, instead of "
        "the headers; for an array, its rows follow the array's records unless "
        "--record-column names the column of its record_ids",
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
        "--class-map",
        metavar="MAP",
        help="group the class attribute's codes into classes: chapman-rhythms (SNOMED CT "
        "codes of #Dx to the paper's AFIB, GSVT, SB, SR), ptbxl-superclasses (PTB-XL "
        "statements to CD, HYP, MI, NORM, STTC), or a .csv file of code,class rows (a "
        "header row is optional: a first row whose first cell is code, dx, snomed, "
        "statement, scp_code or diagnosis is skipped, any other is a mapping) or a .json "
        "file of {code: class}; records with no class are left out, and those of several "
        "as --multi-class says",
    )
    fit.add_argument(
        "--multi-class",
        choices=["drop", "first", "mixed"],
        default="drop",
        help="with --class-map, the class of a record whose codes give several: drop, none "
        "(the record is left out, or trains with its other attributes); first, that of the "
        "first of its codes in the map; mixed, its classes joined by '+' (SB+SR), a class "
        "of each combination; search and score read codes the same way (default: drop)",
    )
    fit.add_argument(
        "--age-groups",
        type=_positive_int,
        default=4,
        help="number of age groups, quantiles of the records' ages (default: 4)",
    )


def _add_reading_arguments(fit):
    """How fit conditions records and cuts frames; settings.json keeps them for the others."""
    fit.add_argument(
        "--working-rate",
        type=_positive_float,
        metavar="HZ",
        help="rate in Hz that every record is brought to and the encoder runs at "
        "(default: CROCSClusterer's working_rate, the rate its defaults were chosen at)",
    )
    fit.add_argument(
        "--frame-seconds",
        type=_positive_float,
        default=5.0,
        metavar="SECONDS",
        help="length of a frame; each record gives its whole frames (default: 5, two "
        "frames per 10-s record, the protocol the defaults were measured on)",
    )
    fit.add_argument(
        "--leads",
        type=_names,
        metavar="NAMES",
        help="comma-separated leads, e.g. I,II,V1 (default: those of the first record)",
    )
    fit.add_argument(
        "--conditioning",
        action=argparse.BooleanOptionalAction,
        default=CONDITIONING_DEFAULT,
        help="condition each whole record before cutting frames: zero-phase band-pass "
        "0.67-40 Hz, --notch, resampling, --normalize (SignalConditioner). "
        "--no-conditioning only resamples and normalises each frame "
        f"(default: {'--conditioning' if CONDITIONING_DEFAULT else '--no-conditioning'})",
    )
    fit.add_argument(
        "--notch",
        type=int,
        choices=[50, 60],
        help="remove mains interference at this frequency in Hz (default: none; the "
        "40 Hz edge already attenuates it)",
    )
    fit.add_argument(
        "--normalize",
        choices=["zscore", "zscore-joint", "minmax", "none"],
        default="zscore",
        help="scaling of the whole record with conditioning, of each frame without: "
        "zscore and minmax scale each lead on its own, zscore-joint all leads by the "
        "median lead's standard deviation (their relative amplitudes stay) (default: zscore)",
    )


def _add_estimator_arguments(fit):
    """The estimator's parameters that the command sets."""
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
    fit.add_argument(
        "--ensemble-size",
        type=_positive_int,
        default=None,
        metavar="N",
        help="train N nets from consecutive seeds, sharing the epochs, and average their "
        "similarities: more accurate, N times the time of predict and search (default: 2)",
    )
    fit.add_argument("--random-state", type=int, default=0)


def _predict_parser(sub, common):
    predict = sub.add_parser(
        "predict",
        parents=[common],
        help="write the predicted attributes of each record to a CSV file",
        description="Predict the attributes of every record of RECORDS, prepared as fit "
        "prepared the model's records (at any rate): those of "
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


def _search_parser(sub, common):
    search = sub.add_parser(
        "search",
        parents=[common],
        help="write the records nearest to attribute queries or example ECGs to a CSV file",
        description="Retrieve the --k records of RECORDS nearest to the prototype of "
        "each query, or to each record of --example (a record's distance is that of its "
        "nearest frame) and write one row per hit (query, rank, record, distance) to --out.",
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
        "--example",
        metavar="EXAMPLES",
        help="search by example ECG: each record of EXAMPLES (read as RECORDS is, e.g. a "
        "folder, one WFDB record x.hea or one .edf file) is a query, named example=<record>",
    )
    search.add_argument(
        "--k", type=_positive_int, default=10, help="records per query (default: 10)"
    )
    search.add_argument("--out", required=True, metavar="CSV", help="the file to write")


def _score_parser(sub, common):
    score = sub.add_parser(
        "score",
        parents=[common],
        help="score the model against the records' labels: tables and figures",
        description="Score the model on the records of RECORDS against their attributes "
        "(from the headers or --labels, read as fit read them: class map, age groups): "
        "the paper's clustering table (accuracy and AMI per attribute) and retrieval "
        "table (P@K), printed and written to clustering.csv and retrieval.csv, and the "
        "prototype map (prototypes.png) and a retrieval grid (retrieval.png), in --out-dir. "
        "Use records of patients the model was not fitted on.",
    )
    score.add_argument("--out-dir", required=True, metavar="DIR", help="the folder to write")
    score.add_argument(
        "--labels", metavar="CSV", help="a CSV file of the attributes, as for fit"
    )
    score.add_argument(
        "--record-column",
        metavar="NAME",
        help="column of --labels with the record names (default: its first column)",
    )
    _add_scoring_arguments(score)


def _add_scoring_arguments(score):
    """What score and evaluate report: P@K and the query of retrieval.png."""
    score.add_argument(
        "--k",
        type=_positive_int,
        nargs="+",
        default=[1, 5, 10],
        help="numbers of frames retrieved per prototype in the retrieval table (default: "
        "1 5 10)",
    )
    score.add_argument(
        "--query",
        type=_query_pairs,
        metavar="QUERY",
        help="attribute values, as search --query takes them, e.g. 'rhythm=SR': "
        "retrieval.png shows the retrieval of the prototype of most training ECGs among those "
        "with these values (default: among all prototypes)",
    )


def _evaluate_parser(sub, common):
    evaluate = sub.add_parser(
        "evaluate",
        parents=[common],
        help="fit and score on held-out patients, or cross-validate: tables and figures",
        description="Read RECORDS and their attributes as fit does, split the records by "
        "patient (a held-out part stratified by the class attribute, or --cv folds), fit a "
        "model with fit's options on each training part and score it on the held-out "
        "patients as score does. Writes to --out-dir: split.csv (each record's patient and "
        "part), clustering.csv (accuracy, AMI and balanced accuracy per attribute; with "
        "--cv one row per fold and method and their mean (std)), retrieval.csv (P@K), "
        "per_class.csv (recall of each class of the class attribute), confusion.png (its "
        "confusion matrix) and retrieval.png; with --cv, per_class.csv and confusion.png "
        "pool the folds' held-out records. No model is written: fit one on all records.",
    )
    evaluate.add_argument("--out-dir", required=True, metavar="DIR", help="the folder to write")
    split = evaluate.add_mutually_exclusive_group()
    split.add_argument(
        "--test-size",
        type=_positive_float,
        default=0.2,
        metavar="FRACTION",
        help="fraction of the patients held out for scoring (default: 0.2)",
    )
    split.add_argument(
        "--cv",
        type=_positive_int,
        metavar="K",
        help="K-fold cross-validation by patient, stratified by the class attribute, "
        "instead of one held-out part",
    )
    _add_attribute_arguments(evaluate)
    _add_reading_arguments(evaluate)
    _add_estimator_arguments(evaluate)
    _add_scoring_arguments(evaluate)


def _parser():
    common = _common_parser()
    parser = argparse.ArgumentParser(
        prog="sklearn-crocs",
        description="CROCS on ECG records (WFDB, EDF/EDF+, .npy/.npz arrays or the bundled "
        "data). Without a subcommand, "
        "sklearn-crocs runs the main job on the bundled data (see sklearn-crocs --help).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for add_command in (_fit_parser, _predict_parser, _search_parser, _score_parser):
        add_command(sub, common)
    _evaluate_parser(sub, _common_parser(model=False))
    return parser


# The Python advice of library messages (regular expressions, any case), and
# the command's flags that do the same.
_FLAGS = (
    (r"pass on_error='skip'(?: to leave (?:the record|such records) out)?|on_error='skip'",
     "leave out --strict to skip it"),
    (r"pass repair_headers=False", "pass --no-repair-headers"),
    (r"pass repair_headers=True", "leave out --no-repair-headers"),
    (r"pass leads=\[\.\.\.\]", "pass --leads"),
    (r"request leads that", "request with --leads leads that"),
    (r"e\.g\. with sklearn_crocs\.datasets\.map_classes",
     "with --class-map chapman-rhythms (SNOMED CT rhythms), --class-map ptbxl-superclasses "
     "(PTB-XL statements) or --class-map FILE (a code,class CSV or a JSON object)"),
)  # fmt: skip


def _as_found(flag, found):
    """``flag`` capitalised where the advice it replaces starts a sentence."""
    return flag[0].upper() + flag[1:] if found[0].isupper() else flag


def _cli_wording(message):
    """``message`` on one line, with Python arguments replaced by the command's flags."""
    message = " ".join(str(message).split())
    for pattern, flag in _FLAGS:
        message = re.sub(
            pattern, lambda m, f=flag: _as_found(f, m.group(0)), message, flags=re.IGNORECASE
        )
    return message


def main(argv=None):
    """Entry point of the ``sklearn-crocs`` command and of ``python -m sklearn_crocs``."""
    argv = sys.argv[1:] if argv is None else [str(arg) for arg in argv]
    if not argv or argv[0] not in SUBCOMMANDS:
        return main_job(argv)
    args = _parser().parse_args(argv)
    try:
        _check_device(getattr(args, "device", None))
        with warnings.catch_warnings():
            # Imported once the command line is parsed: numpy, pandas and torch take seconds.
            if args.command == "evaluate":
                from ._evaluate import evaluate as command
            else:
                from . import _commands

                command = getattr(_commands, args.command)
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
        message = _cli_wording(exc)
        if not isinstance(exc, (CommandError, ValueError, OSError)):
            message = f"{type(exc).__name__}: {message}"
        print(f"sklearn-crocs: error: {escape(message)}", file=sys.stderr)
        return 1


def _check_device(device):
    """Refuse a --device that torch cannot use here, before any record is read."""
    if device is None:
        return
    from .._utils import _device_problem  # imports torch: only when a device is asked for

    problem = _device_problem(device)
    if problem is not None:
        raise CommandError(f"--device {device}: {problem}. Pass --device cpu, or leave it out.")


def _show_warning(message, category, filename, lineno, file=None, line=None):
    print(f"sklearn-crocs: warning: {escape(_cli_wording(message))}", file=sys.stderr)
