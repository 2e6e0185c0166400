"""A researcher's recordings end to end (issue 58): a folder of WFDB records of two rates
and two lengths, diagnosis codes grouped by a class map without a header line, read
by the README's raw path in Python and by every command of the command line."""

import numpy as np
import pandas as pd
import pytest
import wfdb
from test_cli import run

from sklearn_crocs import CROCSClusterer
from sklearn_crocs.datasets import load_ludb, load_wfdb
from sklearn_crocs.preprocessing import SignalConditioner, make_frames, resample_signals

TINY = ["--encoder", "cnn", "--embedding-dim", 8, "--max-epochs", 1, "--working-rate", 100]
# A code per rhythm, as a hospital's diagnosis statements would be.
CODES = {"SR": "426783006", "SB": "426177001", "AFIB": "164889003", "GSVT": "713422000"}


@pytest.fixture(scope="module")
def hospital(tmp_path_factory):
    """The bundled LUDB records as WFDB files at 500 or 250 Hz, 10 or 8 s long (2 leads);
    labels with diagnosis codes and with class names; a header-less code,class map."""
    folder = tmp_path_factory.mktemp("hospital")
    records = folder / "records"
    records.mkdir()
    ludb = load_ludb()
    for i, name in enumerate(ludb.record_names):
        fs, seconds = (500, 10) if i % 2 else (250, 8)
        signal = ludb.data[i, :2, : 500 * seconds].astype(np.float64)
        if fs != 500:
            signal = resample_signals(signal, 500, fs)
        wfdb.wrsamp(f"p{name}", fs=fs, units=["mV", "mV"], sig_name=["I", "II"],
                    p_signal=signal.T, fmt=["16", "16"], adc_gain=[1000, 1000],
                    baseline=[0, 0], write_dir=str(records))  # fmt: skip
    ids = [f"p{name}" for name in ludb.record_names]
    attributes = ludb.attributes.assign(record=ids)
    codes = attributes.assign(rhythm=attributes["rhythm"].map(CODES))
    codes[["record", "rhythm", "sex", "age"]].to_csv(folder / "codes.csv", index=False)
    attributes[["record", "rhythm", "sex", "age"]].to_csv(folder / "classes.csv", index=False)
    (folder / "map.csv").write_text("".join(f"{c},{r}\n" for r, c in CODES.items()))
    return folder, records, attributes


def test_the_readme_raw_path_on_records_of_two_rates(hospital):
    _, records, attributes = hospital
    data = load_wfdb(records, signal_length="variable")
    assert sorted(set(data.sampling_rates)) == [250, 500]
    conditioned = SignalConditioner(target_rate=100).fit_transform(
        data.data, sampling_rates=data.sampling_rates
    )
    y = attributes.set_index("record").loc[data.record_names, ["rhythm", "sex"]]
    X, y_frames, groups = make_frames(
        conditioned, 500, attributes=y.reset_index(drop=True), groups=data.record_names
    )
    assert len(X) == 51 * 2 + 51 * 1  # 10-s records give 2 frames, 8-s ones 1
    model = CROCSClusterer(encoder="cnn", embedding_dim=8, max_epochs=1, random_state=0)
    model.fit(X, y_frames, groups=groups)
    assert set(model.predict(X)["rhythm"]) <= set(CODES)


def test_every_command_on_the_hospital_folder(hospital, tmp_path):
    folder, records, attributes = hospital
    model = tmp_path / "model"
    fit = ["fit", records, "--labels", folder / "codes.csv", "--attributes", "rhythm,sex"]
    status, out, err = run(*fit, "--class-map", folder / "map.csv", "--model", model, *TINY)
    assert status == 0, err
    # The header-less map keeps its first row: every record has a class.
    assert "Trained on 153 frames of 102 records" in out, out
    status, _, err = run("predict", records, "--model", model, "--out", tmp_path / "p.csv")
    assert status == 0, err
    assert len(pd.read_csv(tmp_path / "p.csv")) == 102
    example = records / f"{attributes['record'].iloc[0]}.hea"
    argv = ["search", records, "--model", model, "--example", example, "--k", 3]
    status, _, err = run(*argv, "--out", tmp_path / "hits.csv")
    assert status == 0, err
    assert pd.read_csv(tmp_path / "hits.csv")["query"].nunique() == 1
    # Labels that give the model's class names, not codes.
    argv = ["score", records, "--model", model, "--labels", folder / "classes.csv"]
    status, out, err = run(*argv, "--out-dir", tmp_path / "score")
    assert status == 0, err
    assert "Scored on 153 frames of 102 records" in out
    for split in (["--test-size", 0.3], ["--cv", 2]):
        argv = ["evaluate", records, "--labels", folder / "codes.csv", "--attributes"]
        argv += ["rhythm,sex,age", "--class-map", folder / "map.csv", *split, *TINY]
        out_dir = tmp_path / f"evaluate{split[0]}"
        status, out, err = run(*argv, "--out-dir", out_dir)
        assert status == 0, err
        parts = pd.read_csv(out_dir / "split.csv")
        assert parts.groupby(parts.columns[1])[parts.columns[2]].nunique().max() == 1
        assert (out_dir / "confusion.png").stat().st_size > 0
