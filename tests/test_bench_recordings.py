"""benchmarks/bench_recordings.py's raw-like generator (the benchmark itself is not run here)."""

import numpy as np
import pytest
from conftest import load_benchmark


@pytest.fixture(scope="module")
def bench_recordings():
    yield from load_benchmark("bench_recordings")


def test_hard_wander_is_the_default_and_follows_issue_46(bench_recordings):
    # Flat records: what remains is the offset, the wander, the hum and the noise.
    flat = np.zeros((400, 2, 1000), dtype=np.float32)  # 10 s at 100 Hz
    raw = bench_recordings.make_raw(flat, 100, seed=0)
    np.testing.assert_array_equal(raw, bench_recordings.make_raw(flat, 100, seed=0, wander="hard"))
    assert raw.shape == (400, 2, 5000)
    # Per-lead DC offsets of N(0, 0.3) mV (the tones average out over 10 s only in part).
    assert 0.25 < np.std(raw.mean(axis=-1)) < 0.4
    # Three tones of up to 0.4 mV, 50 Hz hum of up to 0.1 mV and 0.01 mV of noise.
    assert np.abs(raw - raw.mean(axis=-1, keepdims=True)).max() < 2 * 3 * 0.4 + 0.1 + 0.06
    spectrum = np.abs(np.fft.rfft(raw - raw.mean(axis=-1, keepdims=True), axis=-1))
    freqs = np.fft.rfftfreq(5000, 1 / 500)
    hum = spectrum[..., np.argmin(np.abs(freqs - 50))] * 2 / 5000
    assert hum.max() <= 0.1 + 0.01 and np.isclose(hum[:, 0], hum[:, 1], atol=0.005).all()
    assert spectrum[..., np.argmin(np.abs(freqs - 60))].max() * 2 / 5000 < 0.01  # no 60 Hz
    mild = bench_recordings.make_raw(flat, 100, seed=0, wander="mild")
    assert np.std(mild.mean(axis=-1)) > 0.6  # offsets of U(-1.5, 1.5) mV


def test_baseline_candidates_remove_the_wander(bench_recordings):
    # --baselines: each candidate gives z-scored 100-Hz records closer to the clean ones than
    # z-scoring alone; the documented band-pass and the two median filters come close.
    from sklearn_crocs.datasets import load_ptbxl_sample

    clean = load_ptbxl_sample().data[:20]
    raw = bench_recordings.make_raw(clean, 100, seed=0)
    reference = (clean - clean.mean(axis=-1, keepdims=True)) / clean.std(axis=-1, keepdims=True)

    def correlation(out):
        pairs = zip(out.reshape(-1, 1000), reference.reshape(-1, 1000))
        return np.median([np.corrcoef(a, b)[0, 1] for a, b in pairs])

    z_scored = correlation(bench_recordings.z_scored(raw, 500))
    in_mv = {"bandpass-mV", "unfiltered-mV"}  # not z-scored, by design: below
    for baseline in set(bench_recordings.BASELINES) - in_mv:
        out = bench_recordings.conditioned(raw, 500, baseline=baseline)
        assert out.shape == clean.shape and out.dtype == np.float32, baseline
        np.testing.assert_allclose(out.mean(axis=-1), 0, atol=1e-5)
        # bandpass-joint: one scale for all leads of a record, the median lead's
        spread = out.std(axis=-1)
        spread = np.median(spread, axis=1) if baseline == "bandpass-joint" else spread
        np.testing.assert_allclose(spread, 1, atol=1e-4)
        assert correlation(out) > z_scored + 0.05, baseline  # detrend: 0.75 against 0.69
    for baseline in ["bandpass", "median"]:
        assert correlation(bench_recordings.conditioned(raw, 500, baseline=baseline)) > 0.95
    # In mV: the band-pass output is the documented one before its z-score.
    documented = bench_recordings.conditioned(raw, 500)
    in_mv = bench_recordings.conditioned(raw, 500, baseline="bandpass-mV")
    scale = in_mv.std(axis=-1, keepdims=True)
    np.testing.assert_allclose((in_mv - in_mv.mean(axis=-1, keepdims=True)) / scale, documented,
                               atol=1e-3)  # fmt: skip
    unfiltered = bench_recordings.conditioned(raw, 500, baseline="unfiltered-mV")
    assert unfiltered.shape == clean.shape and abs(unfiltered.mean()) > 1e-3  # offsets kept


def test_signal_error_ranks_the_band_edges(bench_recordings, capsys):
    # --signal-error: no fit, the squared error of each candidate's z-scored output against the
    # clean records. Under the hard wander (tones up to 0.5 Hz) a 0.67 Hz edge leaves less of
    # it than 0.5 Hz; no edge (z-score of the resampled raw records) is far worse than either.
    from sklearn.utils import Bunch

    from sklearn_crocs.datasets import load_ptbxl_sample

    clean = load_ptbxl_sample().data[:40]
    data = Bunch(clean=clean, raw=bench_recordings.make_raw(clean, 100, seed=0), rate=500)
    bench_recordings.signal_error(data, [0.5, 0.67], ["median"])
    lines = capsys.readouterr().out.splitlines()
    means = {line.split(":")[0].strip(): float(line.split("mean ")[1].split(",")[0])
             for line in lines}  # fmt: skip
    assert list(means) == ["band-pass 0.5-40 Hz", "band-pass 0.67-40 Hz",
                           bench_recordings.BASELINES["median"]]  # fmt: skip
    assert 0 < means["band-pass 0.67-40 Hz"] < means["band-pass 0.5-40 Hz"] < 0.5
    unfiltered = bench_recordings.normalize_frames(bench_recordings.z_scored(data.raw, 500))
    assert ((unfiltered - bench_recordings.normalize_frames(clean)) ** 2).mean() > 0.5
    # The documented path is the default edge, and named after it.
    assert bench_recordings.DEFAULT_LOW == 0.67
    assert bench_recordings.BASELINES["bandpass"] == "band-pass 0.67-40 Hz"
