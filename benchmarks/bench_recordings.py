"""Recordings as users have them: the PTB-XL sample as shipped against the same records made raw.

The bundled sample was band-passed (0.5-40 Hz), z-scored per lead and
resampled to 100 Hz before it was shipped. Users bring raw recordings: 500 Hz,
in mV, with DC offsets, baseline wander and mains interference. This script
makes the same 500 records raw-like and runs each way of feeding them to
``CROCSClusterer`` on the same patient splits:

- raw-like records (fixed seed, independent of the split), upsampled to
  500 Hz (polyphase); by default (``--wander hard``, issue 46's generator)
  scaled to mV by a gain per record of U(0.1, 0.4) mV per unit, plus per
  lead a DC offset of N(0, 0.3) mV and three wander tones (each
  U(0.05, 0.5) Hz, U(0, 0.4) mV, random phase), per record 50 Hz hum of
  U(0, 0.1) mV on every lead, and white noise of 0.01 mV. ``--wander mild``
  is the first generator: a gain of 0.1-0.5 mV per unit, per lead a DC
  offset (up to +-1.5 mV), baseline wander (two tones below 0.45 Hz of up
  to 0.25 mV each), mains at 50 Hz (even records) or 60 Hz (odd ones,
  0.05-0.2 mV) and white noise (0.02 mV);
- rows, each trained on 60 % of the patients and scored on the other 40 %
  (5-s frames, class x sex x age quartile, as ``bench_accuracy``):

  * ``clean 100 Hz``: the sample as shipped, ``CROCSClusterer(sampling_rate=100)``;
  * ``clean 500 Hz``: the same signals upsampled to 500 Hz,
    ``CROCSClusterer(sampling_rate=500)`` (the encoder runs at its working
    rate, 100 Hz): what declaring the rate costs and changes;
  * ``raw 500 Hz, documented path``: :class:`SignalConditioner` on whole
    records (its default band-pass, 0.67-40 Hz, resampled to 100 Hz, z-scored
    per lead; 0.5-40 Hz before 2026-11-29),
    then frames, then ``CROCSClusterer(sampling_rate=100)``; its time
    includes the conditioning;
  * ``raw 500 Hz, conditioning in the model``: 500-Hz frames to
    ``CROCSClusterer(sampling_rate=500, conditioning=SignalConditioner())``
    (filtered frame by frame);
  * ``raw 500 Hz, z-score only``: resampled to 100 Hz and z-scored per lead
    of each record without filtering (what the command line did before);
  * ``raw 500 Hz, no conditioning``: 500-Hz frames in mV straight to
    ``CROCSClusterer(sampling_rate=500)``: what conditioning buys.
  * with ``--working-rates 250``, ``clean 500 Hz, working_rate=250``: the
    encoder at 250 Hz instead, what a higher working rate costs and buys.

Settings of the conditioning are chosen on validation patients instead: with
``--bands`` or ``--baselines`` each split's training patients are split again
(75 % to fit, 25 % to score) and the rows are the reference and the candidates,
each a way of conditioning the raw records (in the timed part) before 5-s
frames go to ``CROCSClusterer(sampling_rate=100)``:

- ``--bands 0.5 0.67 1``: the documented path with these lower band-pass edges
  (``raw 500 Hz, band-pass 0.5-40 Hz`` ...);
- ``--baselines [bandpass median spline detrend]`` (alone: all four), ways of
  removing the baseline, each then what the documented path does otherwise
  (low-pass at 40 Hz, Butterworth of order 3 forward and backward, at 100 Hz,
  z-score per lead); all but ``bandpass`` resample to 100 Hz first, as the
  documented path does:

  * ``bandpass``: the documented path, the default band-pass (the reference
    of the candidates; the same row as ``--bands 0.67``);
  * ``median``: the baseline estimated by two median filters, 200 ms then
    600 ms (de Chazal et al., 2004), subtracted, then the low-pass;
  * ``spline``: the baseline as a cubic spline through the medians of
    consecutive 0.5-s windows, subtracted, then the low-pass;
  * ``detrend``: the low-pass, then a linear detrend of each 5-s frame (no
    high-pass at all).

``--dataset more`` runs the rows on ``ptbxl-more`` instead (3,903 PTB-XL
records of 3,741 patients, genuinely raw: 100 Hz, int16 microvolts with their
own offsets, wander and noise; read by ``_ptbxl_all.load_more``), split by its
own patients as above, with class (NORM/ABN), sex and age quartile (edges on
the training patients; PTB-XL's age 300, over 89, falls in the top quartile).
It has no clean version, so its rows are the ways of feeding raw records:
``raw 100 Hz, documented path`` (the reference), ``raw 100 Hz, z-score only``
and ``raw 100 Hz, no conditioning`` (mV frames to
``CROCSClusterer(sampling_rate=100)``); with ``--bands`` or ``--baselines``,
the documented path (``raw 100 Hz, band-pass 0.67-40 Hz``) and the candidates on
validation patients (``--on-test``: on the test patients, to report a
candidate chosen on validation patients). ``--max-records N`` keeps about N records, whole patients
drawn with a fixed seed; by default all are kept: the default ``max_epochs``
shrinks as the training set grows, so a fit on all (about 4,700 frames) costs
only about 1.6 times one on 1,500 records (about 1,800 frames).

Reported per row, mean (std) over the splits: class, sex and age accuracy,
class AMI, P@10 (=3) of the learned prototypes and fit seconds; fit times are
also given as the median over splits of the ratio to the fit of the first row
(the reference: clean 100 Hz, or on ``ptbxl-more`` the documented path) of the
same split (the rows of a split run back to back, so a change of machine speed
between splits cancels out), and each score as the mean paired difference from
the reference row of the same split.

Usage::

    python benchmarks/bench_recordings.py [--seeds 0 1 2 3 4] [--working-rates 250] [--wander mild]
    python benchmarks/bench_recordings.py --bands 0.5 0.67 1   # on validation patients
    python benchmarks/bench_recordings.py --baselines          # the 4 baselines, likewise
    python benchmarks/bench_recordings.py --signal-error --bands 0.5 0.67   # no fit: the signals
    python benchmarks/bench_recordings.py --dataset more [--max-records 1500] [--baselines]
    python benchmarks/bench_recordings.py --dataset more --baselines bandpass-joint --on-test
    python benchmarks/bench_recordings.py --quick   # one split, 2 epochs: a smoke test
"""

import argparse
import os
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.interpolate import CubicSpline
from scipy.ndimage import median_filter
from scipy.signal import butter, detrend, sosfiltfilt
from sklearn.frozen import FrozenEstimator
from sklearn.utils import Bunch

from sklearn_crocs import CROCSClusterer, PrototypeRetriever
from sklearn_crocs.datasets import load_ptbxl_sample, patient_split
from sklearn_crocs.metrics import attribute_accuracy_score, attribute_ami_score, retrieval_report
from sklearn_crocs.preprocessing import (
    AgeGroupEncoder,
    SignalConditioner,
    make_frames,
    normalize_frames,
    resample_signals,
)

sys.path.insert(0, str(Path(__file__).parent))
from _ptbxl_all import load_more, subsample_patients  # noqa: E402

from _utils import machine_summary  # noqa: E402

RAW_RATE = 500
FRAME_SECONDS = 5
# Baseline removal candidates (``--baselines``), each followed by the rest of the documented
# path (low-pass at 40 Hz, 100 Hz, z-score per lead); "bandpass" is the documented path itself,
# named as the ``--bands`` row of the default edge so that the two run once.
DEFAULT_LOW = SignalConditioner().bandpass[0]
BASELINES = {
    "bandpass": f"band-pass {DEFAULT_LOW:g}-40 Hz",
    # the documented filter without the z-score: amplitudes stay in mV, as recorded
    "bandpass-mV": f"band-pass {DEFAULT_LOW:g}-40 Hz, in mV",
    # one scale (the median lead's) for all leads of a record: no unit, relative amplitudes stay
    "bandpass-joint": f"band-pass {DEFAULT_LOW:g}-40 Hz, z-score per record",
    "unfiltered-mV": "no filter, in mV",
    "median": "median baseline (0.2 s, 0.6 s), low-pass 40 Hz",
    "spline": "spline baseline (0.5-s medians), low-pass 40 Hz",
    "detrend": "low-pass 40 Hz, 5-s detrend",
}


def make_raw(records, fs, seed=0, wander="hard"):
    """The records as a 500-Hz mV recording with offsets, wander, mains and noise.

    ``wander="hard"`` (issue 46's generator, the default): per record a gain
    of U(0.1, 0.4) mV per unit and 50 Hz hum of U(0, 0.1) mV on every lead;
    per lead a DC offset of N(0, 0.3) mV and 3 wander tones, each of
    U(0.05, 0.5) Hz, an amplitude of U(0, 0.4) mV and a random phase; white
    noise of 0.01 mV. ``"mild"``: the first generator (a gain of U(0.1, 0.5),
    offsets of U(-1.5, 1.5) mV, 2 tones below 0.45 Hz of up to 0.25 mV,
    mains at 50 or 60 Hz of U(0.05, 0.2) mV, noise of 0.02 mV).
    """
    rng = np.random.default_rng(seed)
    up = resample_signals(records.astype(np.float64), fs, RAW_RATE)
    n, leads, samples = up.shape
    t = np.arange(samples) / RAW_RATE
    hard = wander == "hard"
    gain = rng.uniform(0.1, 0.4 if hard else 0.5, size=(n, 1, 1))
    if hard:
        offset = rng.normal(0, 0.3, size=(n, leads, 1))
    else:
        offset = rng.uniform(-1.5, 1.5, size=(n, leads, 1))
    baseline = np.zeros_like(up)
    for _ in range(3 if hard else 2):
        freq = rng.uniform(0.05, 0.5 if hard else 0.45, size=(n, leads, 1))
        phase = rng.uniform(0, 2 * np.pi, size=(n, leads, 1))
        amplitude = rng.uniform(0, 0.4 if hard else 0.25, size=(n, leads, 1))
        baseline += amplitude * np.sin(2 * np.pi * freq * t + phase)
    if hard:
        mains_freq = np.full((n, 1, 1), 50.0)
        mains_amplitude = rng.uniform(0, 0.1, size=(n, 1, 1))
    else:
        mains_freq = np.where(np.arange(n) % 2 == 0, 50.0, 60.0)[:, None, None]
        mains_amplitude = rng.uniform(0.05, 0.2, size=(n, 1, 1))
    mains = mains_amplitude * np.sin(
        2 * np.pi * mains_freq * t + rng.uniform(0, 2 * np.pi, size=(n, 1, 1))
    )
    noise = (0.01 if hard else 0.02) * rng.standard_normal(up.shape)
    return (gain * up + offset + baseline + mains + noise).astype(np.float32)


def low_pass(X, fs, high=40.0):
    """The upper edge of the documented band-pass alone: Butterworth of order 3 (as
    :class:`SignalConditioner`'s), forward and backward."""
    return sosfiltfilt(butter(3, high, "lowpass", fs=fs, output="sos"), X, axis=-1)


def median_baseline(X, fs):
    """The baseline as two median filters, 200 ms then 600 ms (de Chazal et al., 2004)."""

    def median(signals, seconds):
        width = 2 * int(seconds * fs / 2) + 1  # odd: 21 and 61 samples at 100 Hz
        # Lead by lead: scipy's 1-D median filter is about 6 times faster than the n-D one.
        rows = signals.reshape(-1, signals.shape[-1])
        return np.stack([median_filter(row, size=width) for row in rows]).reshape(signals.shape)

    return median(median(X, 0.2), 0.6)


def spline_baseline(X, fs):
    """The baseline as a cubic spline through the medians of consecutive 0.5-s windows, each
    at its window's centre (the last partial window only in the extrapolation): two knots
    per period of the fastest wander tone (0.5 Hz) would not follow it."""
    width = int(round(fs / 2))
    n = X.shape[-1] // width
    knots = np.median(X[..., : n * width].reshape(*X.shape[:-1], n, width), axis=-1)
    return CubicSpline((np.arange(n) + 0.5) * width, knots, axis=-1)(np.arange(X.shape[-1]))


def conditioned(records, rate, baseline="bandpass", low=DEFAULT_LOW):
    """``records`` at ``rate`` Hz conditioned to 100 Hz, z-scored per lead.

    ``baseline="bandpass"``: the documented path, :class:`SignalConditioner` with a
    band-pass of ``low``-40 Hz; ``"bandpass-mV"``: the same without the z-score;
    ``"bandpass-joint"``: the same with ``normalize="zscore-joint"`` (each lead centred, all
    leads of a record divided by the median of their standard deviations: their relative
    amplitudes stay);
    ``"unfiltered-mV"``: resampled only. Otherwise resampled to 100 Hz first (as the documented path
    does), then ``"median"`` or ``"spline"``: that baseline subtracted, then low-passed at
    40 Hz; ``"detrend"``: low-passed at 40 Hz, then a linear detrend of each 5-s frame
    (no high-pass at all).
    """
    normalize = {"bandpass": "zscore", "bandpass-joint": "zscore-joint", "bandpass-mV": None}
    if baseline in normalize:
        conditioner = SignalConditioner(
            sampling_rate=rate, target_rate=100, bandpass=(low, 40.0),
            normalize=normalize[baseline],
        )  # fmt: skip
        return conditioner.fit_transform(records)
    X = resample_signals(records.astype(np.float64), rate, 100)
    if baseline == "unfiltered-mV":
        return X.astype(np.float32)
    if baseline == "detrend":
        frame = FRAME_SECONDS * 100
        X = detrend(low_pass(X, 100), axis=-1, bp=np.arange(frame, X.shape[-1], frame))
    else:
        removal = {"median": median_baseline, "spline": spline_baseline}[baseline]
        X = low_pass(X - removal(X, 100), 100)
    return normalize_frames(X).astype(np.float32)


def z_scored(records, rate):
    """Resampled to 100 Hz and z-scored per lead, without filtering."""
    return normalize_frames(resample_signals(records, rate, 100)).astype(np.float32)


def scores(model, X_test, y_test, sampling_rate=None):
    """Accuracy of each attribute, class AMI and P@10 (=3) of the learned prototypes."""
    rate = {} if sampling_rate is None else {"sampling_rate": sampling_rate}
    retriever = PrototypeRetriever(FrozenEstimator(model)).fit(X_test, **rate)
    embeddings = retriever.embeddings_
    prototypes, attributes = model.get_prototypes("learned")
    nearest = np.argmax(embeddings @ prototypes.T, axis=1)
    predicted = pd.DataFrame(attributes[nearest], columns=list(y_test.columns))
    accuracy = attribute_accuracy_score(y_test, predicted)
    ami = attribute_ami_score(y_test, predicted)
    indices = retriever.query(n_neighbors=10, return_distance=False)
    report = retrieval_report(y_test, (retriever.query_attributes_, indices), k=10, decimals=None)
    exact = report.iloc[0][(10, "=3")]
    return {
        "class Acc": 100 * accuracy["class"],
        "sex Acc": 100 * accuracy["sex"],
        "age Acc": 100 * accuracy["age"],
        "class AMI": 100 * ami["class"],
        "P@10 =3": exact,
    }


def run_split(seed, data, params, working_rates=(), bands=None, baselines=None, on_test=False):
    """The table of one patient split: a row per way of feeding ``data`` (a Bunch of
    ``raw`` records at ``rate`` Hz, ``clean`` ones at 100 Hz or None, ``attributes`` and
    ``groups``), the first the reference of the fit-time ratio. ``on_test``: the candidates
    of ``bands`` and ``baselines`` scored on the test patients instead of validation ones."""
    train, _, test = patient_split(data.groups, val_size=0.0, test_size=0.4, random_state=seed)
    candidates = bands is not None or baselines is not None
    if candidates and not on_test:  # settings are compared on validation patients inside the
        # training ones
        fit_part, _, valid = patient_split(
            data.groups[train], val_size=0.0, test_size=0.25, random_state=seed
        )
        train, test = train[fit_part], train[valid]
    patients = pd.DataFrame({"patient": data.groups[train], "age": data.attributes["age"][train]})
    ages = AgeGroupEncoder(n_groups=4).fit(patients.drop_duplicates("patient")[["age"]])
    attributes = data.attributes.assign(
        age=pd.Categorical(
            ages.transform(data.attributes[["age"]]).ravel(),
            categories=ages.labels_,
            ordered=True,
        )
    )

    def frames(signals, rate, rows):
        """5-s frames of ``signals``, the records ``rows`` of ``data`` (in that order)."""
        X, y, groups = make_frames(
            signals,
            FRAME_SECONDS * rate,
            attributes=attributes.iloc[rows].reset_index(drop=True),
            groups=data.groups[rows],
        )
        return np.asarray(X, dtype=np.float32), y, groups

    runs = {}

    def fit_and_score(name, records, rate, model_params, prepare=None):
        """Fit on the training records (prepared in the timed part) and score the test ones;
        a row already run under ``name`` is not run again."""
        if name in runs:
            return
        prepare = prepare or (lambda signals: signals)
        start = time.perf_counter()
        X_train, y_train, groups = frames(prepare(records[train]), rate, train)
        model = CROCSClusterer(**params, **model_params, random_state=seed)
        model.fit(X_train, y_train, groups=groups)
        seconds = time.perf_counter() - start
        X_test, y_test, _ = frames(prepare(records[test]), rate, test)
        row = scores(model, X_test, y_test)
        row["fit s"] = seconds
        print(f"  split {seed}: {name}: " + ", ".join(f"{k} {v:.1f}" for k, v in row.items()),
              flush=True)  # fmt: skip
        runs[name] = row

    raw, rate, clean = data.raw, data.rate, data.clean
    at_100 = {"sampling_rate": 100}
    prefix = f"raw {rate:g} Hz"
    if clean is not None:
        fit_and_score("clean 100 Hz", clean, 100, at_100)
    if candidates:
        # Without clean records the documented path (the default edge) is the reference, run first.
        for low in ([] if clean is not None else [DEFAULT_LOW]) + list(bands or []):
            name = f"{prefix}, band-pass {low:g}-40 Hz"
            fit_and_score(name, raw, 100, at_100, partial(conditioned, rate=rate, low=low))
        for baseline in baselines or []:
            name = f"{prefix}, {BASELINES[baseline]}"
            prepare = partial(conditioned, rate=rate, baseline=baseline)
            fit_and_score(name, raw, 100, at_100, prepare)
    else:
        if clean is not None:
            clean_500 = resample_signals(clean, 100, RAW_RATE).astype(np.float32)
            fit_and_score("clean 500 Hz", clean_500, RAW_RATE, {"sampling_rate": RAW_RATE})
        documented = partial(conditioned, rate=rate)
        fit_and_score(f"{prefix}, documented path", raw, 100, at_100, documented)
        if clean is not None:
            in_model = {"sampling_rate": rate, "conditioning": SignalConditioner()}
            fit_and_score(f"{prefix}, conditioning in the model", raw, rate, in_model)
        z_score = partial(z_scored, rate=rate)
        fit_and_score(f"{prefix}, z-score only", raw, 100, at_100, z_score)
        fit_and_score(f"{prefix}, no conditioning", raw, rate, {"sampling_rate": rate})
        for working_rate in working_rates:
            fit_and_score(
                f"clean 500 Hz, working_rate={working_rate:g}",
                clean_500,
                RAW_RATE,
                {"sampling_rate": RAW_RATE, "working_rate": working_rate},
            )
    table = pd.DataFrame.from_dict(runs, orient="index")
    table[f"fit / {table.index[0]}"] = table["fit s"] / table["fit s"].iloc[0]
    return table


def signal_error(data, bands, baselines):
    """How far each candidate's conditioned raw-like records lie from the clean ones, without
    a fit: the mean over records and leads of the squared difference of the two z-scored
    signals at 100 Hz (the clean ones have unit variance, so 0 is a perfect recovery, 1 the
    error of a flat lead)."""
    clean = normalize_frames(data.clean.astype(np.float64))
    rows = {f"band-pass {low:g}-40 Hz": partial(conditioned, low=low) for low in bands or []}
    rows.update({BASELINES[b]: partial(conditioned, baseline=b) for b in baselines or []})
    for name, prepare in rows.items():
        X = normalize_frames(np.asarray(prepare(data.raw, data.rate), dtype=np.float64))
        error = ((X - clean) ** 2).mean(axis=-1)
        print(f"  {name}: mean {error.mean():.4f}, median {np.median(error):.4f}, "
              f"90th percentile {np.quantile(error, 0.9):.4f}", flush=True)  # fmt: skip


def load(args):
    """The records of ``--dataset`` as :func:`run_split` takes them, and a line about them."""
    if args.dataset == "sample":
        sample = load_ptbxl_sample()
        raw = make_raw(sample.data, sample.fs, wander=args.wander)
        data = Bunch(clean=sample.data, raw=raw, rate=RAW_RATE)
        about = f"PTB-XL sample, {len(raw)} records; raw-like copy ({args.wander} wander)"
    else:
        more = load_more()
        keep = np.arange(len(more.X))
        if args.max_records is not None:
            keep = subsample_patients(more, keep, args.max_records, seed=0)
        sample = Bunch(attributes=more.attributes.iloc[keep].reset_index(drop=True),
                       groups=more.groups[keep])  # fmt: skip
        data = Bunch(clean=None, raw=more.X[keep], rate=100)
        about = (f"ptbxl-more, {len(keep)} of {len(more.X)} records "
                 f"({len(np.unique(sample.groups))} patients) as stored")  # fmt: skip
    data.update(attributes=sample.attributes, groups=sample.groups)
    about += f" at {data.rate} Hz: median lead std {np.median(data.raw.std(axis=-1)):.3g} mV"
    return data, about


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument(
        "--dataset",
        choices=["sample", "more"],
        default="sample",
        help="the bundled sample against a raw-like copy (default), or ptbxl-more's raw records",
    )
    parser.add_argument(
        "--max-records",
        type=int,
        help="with --dataset more: about this many records, whole patients drawn with a fixed "
        "seed (default: all 3,903)",
    )
    parser.add_argument("--working-rates", type=float, nargs="*", default=[])
    parser.add_argument(
        "--bands",
        type=float,
        nargs="+",
        help="instead: compare these lower band-pass edges (Hz) of the documented path on "
        "validation patients inside the training patients (how its default was chosen)",
    )
    parser.add_argument(
        "--baselines",
        choices=list(BASELINES),
        nargs="*",
        help="instead (or with --bands): compare these baseline removals on validation "
        "patients inside the training patients; alone, all of them",
    )
    parser.add_argument(
        "--on-test",
        action="store_true",
        help="with --bands or --baselines: score the candidates on the test patients (to "
        "report a candidate already chosen on validation patients, never to choose one)",
    )
    parser.add_argument(
        "--wander",
        choices=["hard", "mild"],
        default="hard",
        help="the raw-like generator: issue 46's harder wander (default) or the first one",
    )
    parser.add_argument(
        "--signal-error",
        action="store_true",
        help="with --bands or --baselines on the sample: no fit, only how far each candidate's "
        "conditioned raw-like records lie from the clean ones",
    )
    parser.add_argument("--output", type=Path, default=Path("recordings.csv"))
    parser.add_argument("--quick", action="store_true", help="one split, 2 epochs: a smoke test")
    args = parser.parse_args(argv)
    if args.dataset == "more" and args.working_rates:
        parser.error("--working-rates needs the clean records of --dataset sample")
    no_candidates = args.bands is None and args.baselines is None
    if args.on_test and no_candidates:
        parser.error("--on-test needs --bands or --baselines")
    if args.signal_error and (args.dataset == "more" or no_candidates):
        parser.error("--signal-error needs --bands or --baselines on --dataset sample")
    baselines = list(BASELINES) if args.baselines == [] else args.baselines
    seeds = args.seeds[:1] if args.quick else args.seeds
    params = {"max_epochs": 2} if args.quick else {}
    print(f"Machine: {machine_summary()}; load average {os.getloadavg()[0]:.2f}")
    data, about = load(args)
    if args.signal_error:
        print(f"{about}; mean squared error of the z-scored signals against the clean ones")
        signal_error(data, args.bands, baselines)
        return 0
    print(f"{about}, splits {seeds}", flush=True)
    # One untimed fit first: the first fit of a process pays torch's start-up.
    CROCSClusterer(max_epochs=1, random_state=0).fit(
        normalize_frames(data.raw[:64, :, :500]).astype(np.float32),
        data.attributes["class"][:64],
    )
    start = time.perf_counter()
    tables = [run_split(s, data, params, args.working_rates, args.bands, baselines, args.on_test)
              for s in seeds]  # fmt: skip
    stacked = pd.concat(tables, keys=seeds)
    reference = tables[0].index[0]
    ratio = f"fit / {reference}"
    grouped = stacked.groupby(level=1, sort=False)
    mean, std = grouped.mean(), grouped.std(ddof=1)
    text = mean.map(lambda v: f"{v:.1f}") + std.map(lambda v: f" ({v:.1f})" if v == v else "")
    text[ratio] = grouped[ratio].median().map(lambda v: f"{v:.2f}")
    differences = stacked.sub(stacked.xs(reference, level=1), level=0)
    paired = differences.groupby(level=1, sort=False).mean()
    with pd.option_context("display.width", 250, "display.max_columns", 20):
        validation = not (no_candidates or args.on_test)
        held_out = "validation patients" if validation else "held-out ECGs"
        print(f"\n{held_out}, %: mean (std) over {len(seeds)} splits; fit ratio: median")
        print(text.to_string())
        print(f"\nMean paired difference to the {reference} row of the same split (points)")
        columns = ["class Acc", "sex Acc", "age Acc", "class AMI", "P@10 =3"]
        print(paired[columns].round(1).to_string())
    print(f"load average {os.getloadavg()[0]:.2f}; total time {time.perf_counter() - start:.0f} s")
    pd.concat({"mean": mean, "std": std}, axis=1).to_csv(args.output)
    print(f"Written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
