"""Frames, resampling, normalisation and leads as instances."""

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_crocs.datasets import load_ludb
from sklearn_crocs.preprocessing import (
    FrameNormalizer,
    leads_as_instances,
    make_frames,
    normalize_frames,
    resample_signals,
)

# --------------------------------------------------------------------- frames


def test_make_frames_order_and_tail():
    X = np.arange(2 * 3 * 11, dtype=np.float32).reshape(2, 3, 11)
    frames, attrs, groups = make_frames(X, frame_length=5)
    assert frames.shape == (4, 3, 5)
    assert frames.dtype == np.float32
    assert attrs is None and groups is None
    # record 0 frame 0, record 0 frame 1, record 1 frame 0, record 1 frame 1
    np.testing.assert_array_equal(frames[0], X[0, :, 0:5])
    np.testing.assert_array_equal(frames[1], X[0, :, 5:10])
    np.testing.assert_array_equal(frames[2], X[1, :, 0:5])
    np.testing.assert_array_equal(frames[3], X[1, :, 5:10])  # sample 10 dropped


def test_make_frames_single_lead_and_carries_attributes():
    X = np.random.default_rng(0).normal(size=(3, 5000))
    attrs = pd.DataFrame(
        {"rhythm": ["SR", "SB", "AFIB"], "age": [50.0, 60.0, 70.0]},
        index=[10, 20, 30],
    )
    frames, f_attrs, f_groups = make_frames(X, attributes=attrs, groups=["a", "b", "c"])
    assert frames.shape == (6, 2500)
    assert f_attrs["rhythm"].tolist() == ["SR", "SR", "SB", "SB", "AFIB", "AFIB"]
    assert f_attrs.index.tolist() == list(range(6))
    assert f_groups.tolist() == ["a", "a", "b", "b", "c", "c"]
    series_frames = make_frames(X, attributes=attrs["age"])[1]
    assert series_frames.tolist() == [50.0, 50.0, 60.0, 60.0, 70.0, 70.0]


def test_make_frames_variable_lengths_and_short_records():
    records = [np.ones((2, 7)), np.zeros((2, 3)), np.full((2, 12), 2.0)]
    with pytest.raises(ValueError, match=r"record 1 \(3 samples\)"):
        make_frames(records, frame_length=4)
    with pytest.warns(UserWarning, match="Skipped 1 of 3 records shorter"):
        frames, attrs, groups = make_frames(
            records, frame_length=4, attributes=["x", "y", "z"], groups=[1, 2, 3],
            on_short="skip",
        )  # fmt: skip
    assert frames.shape == (4, 2, 4)  # 1 frame from record 0, 3 from record 2
    assert attrs.tolist() == ["x", "z", "z", "z"]
    assert groups.tolist() == [1, 3, 3, 3]
    np.testing.assert_array_equal(frames[1:], 2.0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"frame_length": 0}, "frame_length must be a positive int"),
        ({"frame_length": 2.5}, "frame_length must be a positive int"),
        ({"on_short": "drop"}, "on_short must be"),
        ({"attributes": ["a"]}, "attributes has 1 rows but X has 2 records"),
        ({"groups": [1, 2, 3]}, "groups has 3 rows but X has 2 records"),
    ],
)
def test_make_frames_errors(kwargs, match):
    X = np.zeros((2, 12, 5000))
    with pytest.raises(ValueError, match=match):
        make_frames(X, **kwargs)


def test_make_frames_rejects_bad_x():
    with pytest.raises(ValueError, match="at least 2 dimension"):
        make_frames(np.zeros(5000))
    with pytest.raises(ValueError, match="shorter than frame_length"):
        make_frames(np.zeros((2, 100)))
    with pytest.raises(ValueError, match="X is empty"):
        make_frames(np.zeros((0, 5000)))
    with pytest.raises(TypeError, match="real numbers"):
        make_frames(np.array([["a"] * 5000]))
    with pytest.raises(ValueError, match="different numbers of leads"):
        make_frames([np.zeros((2, 5000)), np.zeros((3, 5000))])


# ----------------------------------------------------------------- resampling


def test_resample_keeps_a_sine_and_the_shape():
    fs, f0 = 500, 7.0
    t = np.arange(5000) / fs
    X = np.stack([np.sin(2 * np.pi * f0 * t), np.cos(2 * np.pi * f0 * t)])
    X = np.stack([X, 2 * X]).astype(np.float32)  # (2 records, 2 leads, 5000)
    Y = resample_signals(X, 500, 250)
    assert Y.shape == (2, 2, 2500)
    assert Y.dtype == np.float32
    t2 = np.arange(2500) / 250
    inner = slice(50, -50)  # away from the edges of the filter
    np.testing.assert_allclose(Y[0, 0, inner], np.sin(2 * np.pi * f0 * t2)[inner], atol=1e-3)
    np.testing.assert_allclose(Y[1, 1, inner], 2 * np.cos(2 * np.pi * f0 * t2)[inner], atol=2e-3)
    # Upsampling and non-integer ratios.
    assert resample_signals(X, 500, 1000).shape == (2, 2, 10000)
    assert resample_signals(X[0, 0], 500, 360).shape == (3600,)
    assert resample_signals(np.arange(10), 100, 50).dtype == np.float64


def test_resample_same_rate_is_a_copy():
    X = np.ones((1, 100))
    Y = resample_signals(X, 250, 250)
    np.testing.assert_array_equal(X, Y)
    assert Y is not X


@pytest.mark.parametrize(
    ("orig", "target", "match"),
    [
        (0, 250, "orig_fs must be a number of Hz from 1 to 100000"),
        (500, -1, "target_fs must be a number of Hz from 1 to 100000"),
        (500, float("nan"), "target_fs must be a number of Hz from 1 to 100000"),
        (500, "250", "target_fs must be a number of Hz from 1 to 100000"),
        (1e-9, 100, "orig_fs must be a number of Hz from 1 to 100000"),  # was ZeroDivisionError
        (500, 499.999, "impractically long filter"),
    ],
)
def test_resample_errors(orig, target, match):
    with pytest.raises(ValueError, match=match):
        resample_signals(np.zeros((1, 100)), orig, target)


# -------------------------------------------------------------- normalisation


def test_zscore_and_minmax_per_frame_and_lead():
    rng = np.random.default_rng(1)
    X = rng.normal(3.0, 5.0, size=(4, 3, 200)).astype(np.float32)
    Z = normalize_frames(X, "zscore")
    assert Z.dtype == np.float32
    np.testing.assert_allclose(Z.mean(axis=-1), 0, atol=1e-5)
    np.testing.assert_allclose(Z.std(axis=-1), 1, atol=1e-5)
    M = normalize_frames(X, "minmax")
    np.testing.assert_allclose(M.min(axis=-1), 0, atol=1e-7)
    np.testing.assert_allclose(M.max(axis=-1), 1, atol=1e-6)
    # Each lead on its own: scaling one lead leaves the others unchanged.
    X2 = X.copy()
    X2[0, 1] *= 100
    np.testing.assert_allclose(normalize_frames(X2, "minmax")[0, 0], M[0, 0])
    np.testing.assert_allclose(normalize_frames(X2, "minmax")[0, 1], M[0, 1], atol=1e-6)


def test_zscore_joint_keeps_the_leads_relative_amplitudes():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(4, 3, 200)) * np.array([0.5, 2.0, 1.0])[:, None] + 7.0
    J = normalize_frames(X, "zscore-joint")
    np.testing.assert_allclose(J.mean(axis=-1), 0, atol=1e-12)
    # One scale per frame, for all leads: the median of the leads' standard deviations.
    spread = X.std(axis=-1)
    np.testing.assert_allclose(J, normalize_frames(X, "zscore")
                               * (spread / np.median(spread, axis=1)[:, None])[..., None])  # fmt: skip
    # So the ratio of two leads' amplitudes survives, and no unit does.
    np.testing.assert_allclose(J.std(axis=-1)[:, 1] / J.std(axis=-1)[:, 0], spread[:, 1] / spread[:, 0])
    np.testing.assert_allclose(normalize_frames(1000 * X - 3, "zscore-joint"), J)
    # A lead with an artefact 100 times larger leaves the others as they were...
    artefact = X.copy()
    artefact[:, 1] *= 100
    np.testing.assert_allclose(normalize_frames(artefact, "zscore-joint")[:, [0, 2]], J[:, [0, 2]])
    # ... and a missing lead stored as zeros counts for nothing (its own output is zeros).
    missing = np.concatenate([X, np.zeros((4, 1, 200))], axis=1)
    np.testing.assert_allclose(normalize_frames(missing, "zscore-joint"),
                               np.concatenate([J, np.zeros((4, 1, 200))], axis=1))  # fmt: skip
    # 2-D input has one lead per frame: the z-score of each row.
    np.testing.assert_allclose(normalize_frames(X[:, 0], "zscore-joint"),
                               normalize_frames(X[:, 0], "zscore"))  # fmt: skip
    np.testing.assert_allclose(FrameNormalizer(method="zscore-joint").fit_transform(X), J)


def test_normalize_flat_signals_give_zeros():
    X = np.array([[[4.0] * 10, list(range(10))]])
    for method in ("zscore", "zscore-joint", "minmax"):
        out = normalize_frames(X, method)
        assert np.isfinite(out).all()
        np.testing.assert_array_equal(out[0, 0], 0.0)


def test_normalize_errors():
    with pytest.raises(ValueError, match="method must be 'zscore'"):
        normalize_frames(np.zeros((1, 5)), "robust")
    with pytest.raises(ValueError, match="NaN or infinite"):
        normalize_frames(np.array([[1.0, np.nan, 2.0]]))


def test_frame_normalizer_is_stateless_and_pipeline_ready():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(5, 2, 50))
    norm = FrameNormalizer(method="minmax")
    # Stateless: transform works without fit, and fit learns nothing.
    np.testing.assert_allclose(norm.transform(X), normalize_frames(X, "minmax"))
    fitted = clone(norm).fit(X[:2])
    np.testing.assert_allclose(fitted.transform(X), normalize_frames(X, "minmax"))
    assert fitted.n_features_in_ == 2
    with pytest.raises(ValueError, match="features"):
        fitted.transform(rng.normal(size=(5, 3, 50)))
    pipe = make_pipeline(FrameNormalizer(), FrameNormalizer(method="minmax"))
    assert pipe.fit_transform(X).shape == X.shape
    with pytest.raises(ValueError, match="method must be one of"):
        FrameNormalizer(method="l2").fit(X)


# ---------------------------------------------------------- leads as instances


def test_leads_as_instances_on_ludb():
    ludb = load_ludb()
    X = ludb.data[:3]
    X1, attrs, groups, lead = leads_as_instances(X, ludb.attributes.iloc[:3], ludb.groups[:3])
    assert X1.shape == (36, 1, 5000)
    np.testing.assert_array_equal(X1[13, 0], X[1, 1])  # record 1, lead II
    assert ludb.lead_names[lead[13]] == "II"
    assert attrs["rhythm"].tolist()[12:24] == [ludb.attributes["rhythm"][1]] * 12
    assert groups.tolist()[12:24] == [ludb.groups[1]] * 12
    X1_only = leads_as_instances(X)
    assert X1_only[1] is None and X1_only[2] is None
    with pytest.raises(ValueError, match=r"\(n_records, n_leads, n_samples\)"):
        leads_as_instances(X[0])


def test_paper_chapman_preprocessing_chain_on_ludb():
    """500 -> 250 Hz, frames of 2500, leads as instances, min-max per frame."""
    ludb = load_ludb()
    X = resample_signals(ludb.data[:4], ludb.fs, 250)
    frames, attrs, groups = make_frames(X, 2500, attributes=ludb.attributes[:4],
                                        groups=ludb.groups[:4])  # fmt: skip
    X1, attrs1, groups1, _ = leads_as_instances(frames, attrs, groups)
    X1 = normalize_frames(X1, "minmax")
    assert X1.shape == (4 * 12, 1, 2500)
    assert X1.min() == 0.0 and X1.max() == 1.0
    assert len(attrs1) == len(groups1) == 48


@parametrize_with_checks(
    [FrameNormalizer(), FrameNormalizer(method="zscore-joint"), FrameNormalizer(method="minmax")]
)
def test_frame_normalizer_passes_sklearn_checks(estimator, check):
    check(estimator)


# ---------------------------------------------------------------- conditioning
def _raw_like(rate=500, seconds=10, seed=0):
    """A clean 12-lead 'ECG' and the same with DC offset, baseline wander, mains and gain."""
    rng = np.random.default_rng(seed)
    t = np.arange(seconds * rate) / rate
    # Whole numbers of cycles in the record: no energy below the band-pass edge.
    freqs = rng.integers(10, 16, size=12) / seconds
    clean = np.stack([np.sin(2 * np.pi * f * t) + 0.5 * np.sin(2 * np.pi * 3 * f * t)
                      for f in freqs])[None]  # fmt: skip
    wander = 0.4 * np.sin(2 * np.pi * 0.15 * t + 1.0)
    raw = 0.3 * clean + 1.2 + wander + 0.15 * np.sin(2 * np.pi * 50 * t)
    return clean, raw


def test_signal_conditioner_removes_offset_wander_and_mains():
    from sklearn_crocs.preprocessing import SignalConditioner

    clean, raw = _raw_like()
    out = SignalConditioner(sampling_rate=500, target_rate=100, notch=50).fit_transform(raw)
    assert out.shape == (1, 12, 1000) and out.dtype == np.float32
    expected = normalize_frames(resample_signals(clean, 500, 100))
    inner = slice(100, -200)  # away from the edges, where the filters settle
    # Close to the clean signal sample by sample: nothing left of the offset,
    # wander and mains, and no phase shift (the filters run both ways).
    assert np.abs(out[..., inner] - expected[..., inner]).max() < 0.15
    # Without it, the offset and wander dominate the z-scored signal.
    plain = normalize_frames(resample_signals(raw, 500, 100))
    assert np.abs(plain[..., inner] - expected[..., inner]).max() > 0.5


def test_signal_conditioner_options():
    from sklearn_crocs.preprocessing import SignalConditioner

    clean, raw = _raw_like()
    same_rate = SignalConditioner(sampling_rate=500).fit_transform(raw[0])  # 2-D: (n_ecgs, n_samples)
    assert same_rate.shape == (12, 5000)
    mv = SignalConditioner(sampling_rate=500, bandpass=(0.5, None), normalize=None).fit_transform(raw)
    assert (
        abs(float(np.median(mv.std(axis=-1))) - 0.3 * float(np.median(clean.std(axis=-1)))) < 0.05
    )
    unfiltered = SignalConditioner(sampling_rate=500, bandpass=None, normalize=None).fit_transform(raw)
    np.testing.assert_allclose(unfiltered, raw.astype(np.float32))
    # The joint z-score of the whole record: the mV signals over one scale for all leads.
    joint = SignalConditioner(sampling_rate=500, bandpass=(0.5, None), normalize="zscore-joint")
    spread = np.median(mv.std(axis=-1), axis=1)[:, None, None]
    np.testing.assert_allclose(joint.fit_transform(raw), (mv - mv.mean(-1, keepdims=True)) / spread,
                               atol=1e-5)  # fmt: skip
    # Edges above Nyquist: the band-pass becomes a high-pass.
    SignalConditioner(sampling_rate=60, bandpass=(0.5, 40.0)).fit_transform(raw[..., ::25])
    pipe = make_pipeline(SignalConditioner(sampling_rate=500, target_rate=250))
    assert clone(pipe).fit_transform(raw).shape == (1, 12, 2500)


@pytest.mark.bad_input(
    "Signals", "SignalConditioner without a rate or with a bad band", "ValueError"
)
@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({}, r"needs the rate of the signals: pass sampling_rate"),
        ({"sampling_rate": 500, "bandpass": (40, 0.5)}, r"0.05 <= low < high"),
        ({"sampling_rate": 500, "bandpass": (0.5,)}, r"0.05 <= low < high"),
        ({"sampling_rate": 50, "bandpass": (30, None)}, r"lower edge 30 Hz is not below half"),
        ({"sampling_rate": 500, "notch": 55}, r"notch"),
    ],
)
def test_signal_conditioner_bad_settings(params, match):
    from sklearn_crocs.preprocessing import SignalConditioner

    _, raw = _raw_like()
    with pytest.raises(ValueError, match=match):
        SignalConditioner(**params).fit(raw)


@pytest.mark.bad_input("Signals", "microvolts or ADC units where mV are expected", "UserWarning")
def test_signal_conditioner_flags_microvolts():
    import warnings

    from sklearn_crocs.preprocessing import SignalConditioner

    _, raw = _raw_like()
    conditioner = SignalConditioner(sampling_rate=500, normalize=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        conditioner.fit_transform(raw)
    with pytest.warns(UserWarning, match=r"microvolts or ADC units.*Divide it by the gain"):
        conditioner.fit_transform(raw * 1000)


@pytest.mark.bad_input("Signals", "(n, samples, leads) layout to SignalConditioner", "ValueError")
def test_signal_conditioner_refuses_swapped_axes():
    from sklearn_crocs.preprocessing import SignalConditioner

    _, raw = _raw_like()
    with pytest.raises(ValueError, match=r"np.swapaxes\(X, 1, 2\)"):
        SignalConditioner(sampling_rate=500).fit_transform(np.swapaxes(raw, 1, 2))
