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
    records (band-pass 0.5-40 Hz, resampled to 100 Hz, z-scored per lead),
    then frames, then ``CROCSClusterer(sampling_rate=100)``; its time
    includes the conditioning;
  * ``raw 500 Hz, conditioning in the model``: 500-Hz frames to
    ``CROCSClusterer(sampling_rate=500, conditioning=SignalConditioner())``
    (filtered frame by frame);
  * ``raw 500 Hz, z-score only``: resampled to 100 Hz and z-scored per frame
    without filtering (what the command line did before);
  * ``raw 500 Hz, no conditioning``: 500-Hz frames in mV straight to
    ``CROCSClusterer(sampling_rate=500)``: what conditioning buys.
  * with ``--working-rates 250``, ``clean 500 Hz, working_rate=250``: the
    encoder at 250 Hz instead, what a higher working rate costs and buys.

Reported per row, mean (std) over the splits: class, sex and age accuracy,
class AMI, P@10 (=3) of the learned prototypes and fit seconds; fit times are
also given as the median over splits of the ratio to the clean 100 Hz fit of
the same split (the rows of a split run back to back, so a change of machine
speed between splits cancels out).

Usage::

    python benchmarks/bench_recordings.py [--seeds 0 1 2 3 4] [--working-rates 250] [--wander mild]
    python benchmarks/bench_recordings.py --quick   # one split, 2 epochs: a smoke test
"""

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.frozen import FrozenEstimator

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
from _utils import machine_summary  # noqa: E402

RAW_RATE = 500
FRAME_SECONDS = 5


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


def run_split(seed, clean, raw, sample, params, working_rates, bands=None):
    train, _, test = patient_split(sample.groups, val_size=0.0, test_size=0.4, random_state=seed)
    if bands is not None:  # settings are compared on validation patients inside the training ones
        fit_part, _, valid = patient_split(
            sample.groups[train], val_size=0.0, test_size=0.25, random_state=seed
        )
        train, test = train[fit_part], train[valid]
    patients = pd.DataFrame(
        {"patient": sample.groups[train], "age": sample.attributes["age"][train]}
    )
    ages = AgeGroupEncoder(n_groups=4).fit(patients.drop_duplicates("patient")[["age"]])
    attributes = sample.attributes.assign(
        age=pd.Categorical(
            ages.transform(sample.attributes[["age"]]).ravel(),
            categories=ages.labels_,
            ordered=True,
        )
    )

    def frames(signals, rate, rows):
        """5-s frames of ``signals``, the records ``rows`` of the sample (in that order)."""
        X, y, groups = make_frames(
            signals,
            FRAME_SECONDS * rate,
            attributes=attributes.iloc[rows].reset_index(drop=True),
            groups=sample.groups[rows],
        )
        return np.asarray(X, dtype=np.float32), y, groups

    def fit_and_score(name, records, rate, model_params, prepare=None):
        """Fit on the training records (prepared in the timed part) and score the test ones."""
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
        return name, row

    def z_scored_100(records):
        return normalize_frames(resample_signals(records, RAW_RATE, 100)).astype(np.float32)

    def documented(records):
        return SignalConditioner(sampling_rate=RAW_RATE, target_rate=100).fit_transform(records)

    def band_from(low):
        def condition(records):
            conditioner = SignalConditioner(
                sampling_rate=RAW_RATE, target_rate=100, bandpass=(low, 40.0)
            )
            return conditioner.fit_transform(records)

        return condition

    if bands is not None:
        runs = [fit_and_score("clean 100 Hz", clean, 100, {"sampling_rate": 100})]
        for low in bands:
            name = f"raw 500 Hz, band-pass {low:g}-40 Hz"
            runs.append(fit_and_score(name, raw, 100, {"sampling_rate": 100}, band_from(low)))
        return pd.DataFrame.from_dict(dict(runs), orient="index").assign(
            **{"fit / clean 100 Hz": np.nan}
        )
    clean_500 = resample_signals(clean, 100, RAW_RATE).astype(np.float32)
    runs = [
        fit_and_score("clean 100 Hz", clean, 100, {"sampling_rate": 100}),
        fit_and_score("clean 500 Hz", clean_500, RAW_RATE, {"sampling_rate": RAW_RATE}),
        fit_and_score("raw 500 Hz, documented path", raw, 100, {"sampling_rate": 100}, documented),
        fit_and_score(
            "raw 500 Hz, conditioning in the model",
            raw,
            RAW_RATE,
            {"sampling_rate": RAW_RATE, "conditioning": SignalConditioner()},
        ),
        fit_and_score("raw 500 Hz, z-score only", raw, 100, {"sampling_rate": 100}, z_scored_100),
        fit_and_score("raw 500 Hz, no conditioning", raw, RAW_RATE, {"sampling_rate": RAW_RATE}),
    ]
    for working_rate in working_rates:
        runs.append(
            fit_and_score(
                f"clean 500 Hz, working_rate={working_rate:g}",
                clean_500,
                RAW_RATE,
                {"sampling_rate": RAW_RATE, "working_rate": working_rate},
            )
        )
    table = pd.DataFrame.from_dict(dict(runs), orient="index")
    table["fit / clean 100 Hz"] = table["fit s"] / table.loc["clean 100 Hz", "fit s"]
    return table


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--working-rates", type=float, nargs="*", default=[])
    parser.add_argument(
        "--bands",
        type=float,
        nargs="+",
        help="instead: compare these lower band-pass edges (Hz) of the documented path on "
        "validation patients inside the training patients (how its default was chosen)",
    )
    parser.add_argument(
        "--wander",
        choices=["hard", "mild"],
        default="hard",
        help="the raw-like generator: issue 46's harder wander (default) or the first one",
    )
    parser.add_argument("--output", type=Path, default=Path("recordings.csv"))
    parser.add_argument("--quick", action="store_true", help="one split, 2 epochs: a smoke test")
    args = parser.parse_args(argv)
    seeds = args.seeds[:1] if args.quick else args.seeds
    params = {"max_epochs": 2} if args.quick else {}
    print(f"Machine: {machine_summary()}; load average {os.getloadavg()[0]:.2f}")
    sample = load_ptbxl_sample()
    clean = sample.data
    raw = make_raw(clean, sample.fs, wander=args.wander)
    print(
        f"PTB-XL sample, {len(clean)} records; raw-like copy ({args.wander} wander) at "
        f"{RAW_RATE} Hz: "
        f"median lead std {np.median(raw.std(axis=-1)):.3g} mV, splits {seeds}",
        flush=True,
    )
    # One untimed fit first: the first fit of a process pays torch's start-up.
    CROCSClusterer(max_epochs=1, random_state=0).fit(
        clean[:64, :, :500], sample.attributes["class"][:64]
    )
    start = time.perf_counter()
    tables = [
        run_split(s, clean, raw, sample, params, args.working_rates, args.bands) for s in seeds
    ]
    stacked = pd.concat(tables, keys=seeds)
    grouped = stacked.groupby(level=1, sort=False)
    mean, std = grouped.mean(), grouped.std(ddof=1)
    text = mean.map(lambda v: f"{v:.1f}") + std.map(lambda v: f" ({v:.1f})" if v == v else "")
    text["fit / clean 100 Hz"] = grouped["fit / clean 100 Hz"].median().map(lambda v: f"{v:.2f}")
    differences = stacked.sub(stacked.xs("clean 100 Hz", level=1), level=0)
    paired = differences.groupby(level=1, sort=False).mean()
    with pd.option_context("display.width", 250, "display.max_columns", 20):
        held_out = "validation patients" if args.bands else "held-out ECGs"
        print(f"\n{held_out}, %: mean (std) over {len(seeds)} splits; fit ratio: median")
        print(text.to_string())
        print("\nMean paired difference to the clean 100 Hz row of the same split (points)")
        columns = ["class Acc", "sex Acc", "age Acc", "class AMI", "P@10 =3"]
        print(paired[columns].round(1).to_string())
    print(f"load average {os.getloadavg()[0]:.2f}; total time {time.perf_counter() - start:.0f} s")
    pd.concat({"mean": mean, "std": std}, axis=1).to_csv(args.output)
    print(f"Written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
