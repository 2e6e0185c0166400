"""load_edf on EDF and EDF+ files written here with edfio (the ``edf`` extra)."""

import sys

import numpy as np
import pytest

from sklearn_crocs.datasets import InvalidRecordError, load_edf

edfio = pytest.importorskip("edfio")


def write_edf(path, signals, *, fs=500, unit="mV", labels=None, annotations=None):
    """An EDF(+) file of ``signals`` (n_leads, n_samples) in ``unit``."""
    labels = labels or [f"ECG L{i}" for i in range(len(signals))]
    span = max(float(np.abs(x).max()) for x in signals) * 1.1 + 1e-3
    rates = fs if isinstance(fs, list) else [fs] * len(signals)
    edf = edfio.Edf(
        [
            edfio.EdfSignal(
                np.asarray(x, dtype=float),
                rate,
                label=label,
                physical_dimension=unit,
                physical_range=(-span, span),
            )
            for x, rate, label in zip(signals, rates, labels)
        ],
        annotations=annotations,
    )
    edf.write(path)
    return path


def sine(n_samples, fs, freq=1.0, amplitude=1.0):
    return amplitude * np.sin(2 * np.pi * freq * np.arange(n_samples) / fs)


@pytest.mark.parametrize(("unit", "factor"), [("mV", 1.0), ("uV", 1e3), ("V", 1e-3)])
def test_signals_in_mv_from_the_physical_dimension(tmp_path, unit, factor):
    x = np.stack([sine(5000, 500, amplitude=1.5), sine(5000, 500, freq=2, amplitude=0.5)])
    write_edf(tmp_path / "r.edf", x * factor, unit=unit, labels=["ECG I", "II"])
    bunch = load_edf(tmp_path / "r.edf")
    assert bunch.data.shape == (1, 2, 5000) and bunch.data.dtype == np.float32
    # EDF stores 16-bit integers over the physical range: about 1e-4 of it.
    np.testing.assert_allclose(bunch.data[0], x, atol=2e-4 * 1.5 * 1.1)
    assert bunch.fs == 500 and bunch.lead_names == ["I", "II"]
    assert bunch.record_names.tolist() == ["r"]


def test_edf_plus_labels_annotations_and_leads(tmp_path):
    x = np.stack([sine(2500, 250, amplitude=a) for a in (1.0, 2.0, 3.0)])
    annotations = [edfio.EdfAnnotation(1.0, None, "beat")]
    labels = ["ECG V2", "EKG avr", "ECG II"]
    write_edf(tmp_path / "a.edf", x, fs=250, labels=labels, annotations=annotations)
    bunch = load_edf(tmp_path, leads=["II", "V2"])
    # The annotation signal is not a lead; leads come in the order asked for.
    assert bunch.lead_names == ["II", "V2"]
    np.testing.assert_allclose(bunch.data[0, 0].max(), 3.0, atol=1e-3)
    np.testing.assert_allclose(bunch.data[0, 1].max(), 1.0, atol=1e-3)
    assert load_edf(tmp_path).lead_names == ["V2", "aVR", "II"]


def test_records_of_different_rates(tmp_path):
    write_edf(tmp_path / "a.edf", sine(5000, 500)[None], fs=500)
    write_edf(tmp_path / "b.edf", sine(2500, 250)[None], fs=250)
    with pytest.raises(InvalidRecordError, match=r"b\.edf: sampling rate 250 Hz differs"):
        load_edf(tmp_path)
    bunch = load_edf(tmp_path, target_fs=100)
    assert bunch.data.shape == (2, 1, 1000) and bunch.fs == 100
    np.testing.assert_allclose(bunch.data[0], bunch.data[1], atol=0.02)


def test_signals_of_different_rates_in_one_file(tmp_path):
    x = [sine(5000, 500), sine(250, 25)]
    write_edf(tmp_path / "r.edf", x, fs=[500, 25], labels=["ECG II", "Resp"])
    with pytest.raises(InvalidRecordError, match=r"different sampling rates \(25, 500 Hz\)"):
        load_edf(tmp_path)
    assert load_edf(tmp_path, leads=["II"]).data.shape == (1, 1, 5000)


def test_unusable_files(tmp_path):
    write_edf(tmp_path / "good.edf", sine(1000, 500)[None])
    write_edf(tmp_path / "degc.edf", sine(1000, 500)[None], unit="degC")
    (tmp_path / "junk.edf").write_bytes(b"not an EDF file")
    with pytest.raises(InvalidRecordError, match=r"degc\.edf: signal 'L0' has the physical"):
        load_edf(tmp_path)
    with pytest.warns(UserWarning, match="Skipped 2 of 3 records"):
        bunch = load_edf(tmp_path, on_error="skip")
    assert bunch.record_names.tolist() == ["good"]
    assert sorted(bunch.excluded["record"]) == ["degc", "junk"]
    assert "cannot read the EDF file" in bunch.excluded.set_index("record").loc["junk", "reason"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="No EDF files"):
        load_edf(tmp_path / "empty")
    with pytest.raises(InvalidRecordError, match=r"none\.edf: EDF file not found"):
        load_edf(tmp_path / "none.edf")


def test_missing_extra_names_the_install(tmp_path, monkeypatch):
    write_edf(tmp_path / "r.edf", sine(1000, 500)[None])
    monkeypatch.setitem(sys.modules, "edfio", None)  # import edfio now raises ImportError
    with pytest.raises(ImportError, match=r"pip install sklearn-crocs\[edf\]"):
        load_edf(tmp_path)
