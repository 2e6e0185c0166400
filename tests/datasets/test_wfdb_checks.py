"""What load_wfdb verifies on read: checksums, sampling frequency, ADC gain, file sizes; fuzzed.

Every test works on copies of real records from ../shared/data (LUDB format 16
.dat files, CinC 2021 .mat files), changed the way a damaged download, a bad
disk or a hostile file would change them.
"""

import re
import shutil
import tempfile
import warnings
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
import wfdb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wfdb.io.header import HeaderSyntaxError

from sklearn_crocs.datasets import InvalidRecordError, load_wfdb
from sklearn_crocs.datasets._wfdb import _repair_record_line

from .conftest import SHARED_DATA

LUDB = SHARED_DATA / "ludb-subset"
CINC = SHARED_DATA / "cinc2021"
# Records whose files the fuzz tests change: LUDB (.dat) and CinC (.mat, byte offset 24).
FUZZ_RECORDS = [(LUDB, "3"), (LUDB, "30"), (CINC, "HR03961"), (CINC, "JS01048")]

pytestmark = pytest.mark.skipif(
    not (LUDB.is_dir() and CINC.is_dir()),
    reason=f"the real ECG records are not available at {SHARED_DATA}",
)


def _copy(folder, source_dir, name):
    """Copy record ``name`` into ``folder``; return the copied header's path."""
    for path in Path(source_dir).glob(f"{name}.*"):
        shutil.copyfile(path, Path(folder) / path.name)
    return Path(folder) / f"{name}.hea"


def _load(header, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # repairs and skips are reported
        records = header if Path(header).is_dir() else [header]
        return load_wfdb(records, signal_length="variable", **kwargs)


def _edit_header(header, old, new):
    text = header.read_text()
    assert re.search(old, text, flags=re.M), old
    header.write_text(re.sub(old, new, text, count=1, flags=re.M))


def _wfdb_mv(header):
    """wfdb's own reading of the record, in mV (n_leads, n_samples)."""
    record = wfdb.rdrecord(str(header.with_suffix("")))
    return record.p_signal.T, record


# ------------------------------------------------------------------ checksums
@pytest.mark.bad_input("Read", "signal bytes changed (WFDB checksum mismatch)", "InvalidRecordError")
@pytest.mark.parametrize(("source", "name"), FUZZ_RECORDS)
def test_flipped_signal_bytes_fail_the_checksum(tmp_path, source, name):
    # Reproduction 4: ten flipped bytes in a .dat loaded silently with
    # samples off by up to 31 mV; the header's checksums were never read.
    header = _copy(tmp_path, source, name)
    signal_file = next(p for p in tmp_path.iterdir() if p.suffix in (".dat", ".mat"))
    data = bytearray(signal_file.read_bytes())
    positions = np.random.default_rng(0).choice(np.arange(100, len(data)), 10, replace=False)
    for position in positions:
        data[position] ^= 0x5A
    signal_file.write_bytes(bytes(data))
    with pytest.raises(InvalidRecordError, match=rf"{name}\.hea: lead '.+' fails its WFDB checksum"):
        _load(header)
    intact = _copy(tmp_path, LUDB if source == LUDB else CINC, "70" if source == LUDB else "JS09740")
    skipped = _load(tmp_path, on_error="skip")
    assert skipped.record_names.tolist() == [intact.stem]
    assert skipped.excluded["record"].tolist() == [name]
    assert "fails its WFDB checksum" in skipped.excluded["reason"].iloc[0]
    # Opting out reads what wfdb reads.
    unchecked = _load(header, verify_checksums=False)
    np.testing.assert_allclose(unchecked.data[0], _wfdb_mv(header)[0], rtol=1e-6)


def test_intact_records_pass_their_checksums():
    bunch = _load(LUDB)
    assert len(bunch.record_names) == 12 and bunch.excluded.empty
    for name in ["3", "70"]:
        i = bunch.record_names.tolist().index(name)
        np.testing.assert_allclose(bunch.data[i], _wfdb_mv(LUDB / f"{name}.hea")[0], rtol=1e-6)


# --------------------------------------------------- sampling frequency, gain
@pytest.mark.bad_input("Read", "non-positive or non-finite sampling frequency", "InvalidRecordError")
@pytest.mark.parametrize("fs", ["-500", "0", "0.0", "inf", "nan", "-inf", "5e2", "x500"])
def test_invalid_sampling_frequency(tmp_path, fs):
    # Reproduction 4: wfdb reads "-500" as no frequency at all, i.e. 250 Hz.
    header = _copy(tmp_path, LUDB, "3")
    _edit_header(header, r"^3 12 500 5000", f"3 12 {fs} 5000")
    with pytest.raises(InvalidRecordError, match=r"3\.hea: invalid sampling frequency"):
        _load(header)
    with pytest.raises(InvalidRecordError, match="invalid sampling frequency"):
        _load(header, wfdb_defaults=True)


@pytest.mark.bad_input("Read", "missing sampling frequency (WFDB default 250 Hz)", "InvalidRecordError")
def test_missing_sampling_frequency_needs_opting_in(tmp_path):
    header = _copy(tmp_path, LUDB, "3")
    _edit_header(header, r"^3 12 500 5000", "3 12")
    with pytest.raises(InvalidRecordError, match="gives no sampling frequency .*250 Hz"):
        _load(header)
    assert _load(header, wfdb_defaults=True).fs == 250


@pytest.mark.bad_input("Read", "ADC gain of 0 (WFDB default 200/mV)", "InvalidRecordError")
@pytest.mark.parametrize("gain", ["0", "0.0", "0(-2)"])
def test_zero_adc_gain_needs_opting_in(tmp_path, gain):
    # Reproduction 4: a gain of 0 was used as 200 adu/mV without a word.
    header = _copy(tmp_path, LUDB, "3")
    _edit_header(header, r"^3\.dat 16 (\d+)\(-?\d+\)/mV", f"3.dat 16 {gain}/mV")
    with pytest.raises(InvalidRecordError, match=r"3\.hea: lead 'i' has an ADC gain of 0 .*wfdb_defaults=True"):
        _load(header)
    accepted = _load(header, wfdb_defaults=True)
    np.testing.assert_allclose(accepted.data[0], _wfdb_mv(header)[0], rtol=1e-6)
    assert _wfdb_mv(header)[1].adc_gain[0] == 200


@pytest.mark.bad_input("Read", "signal file shorter than its header says", "InvalidRecordError")
@pytest.mark.parametrize(("sig_len", "keep"), [("5000", 1000), ("5000000000", None), ("60000", None)])
def test_truncated_signal_file_or_inflated_length(tmp_path, sig_len, keep):
    header = _copy(tmp_path, LUDB, "3")
    _edit_header(header, r"^3 12 500 5000", f"3 12 500 {sig_len}")
    dat = tmp_path / "3.dat"
    if keep is not None:
        dat.write_bytes(dat.read_bytes()[:keep])
    # Refused from the file size, before wfdb allocates the announced samples.
    with pytest.raises(InvalidRecordError, match=r"3\.dat has \d+ bytes, but the header announces"):
        _load(header)


# ----------------------------------------------------------------- the fuzz
def _outcome(header):
    """Load with load_wfdb; None for an InvalidRecordError, else the checked record."""
    try:
        bunch = _load(header)
    except InvalidRecordError:
        return None
    # Loaded: it must be what wfdb reads from these files, and the files valid.
    try:
        signal, record = _wfdb_mv(header)
    except HeaderSyntaxError:  # a record line "3.dat ...": repaired as documented
        text = header.read_bytes().decode("ascii", errors="ignore")
        header.write_text(_repair_record_line(text, header.stem))
        signal, record = _wfdb_mv(header)
    scale = {"mv": 1.0, "uv": 1e-3, "µv": 1e-3, "μv": 1e-3, "v": 1e3}
    signal = signal * np.array([scale[str(u).lower()] for u in record.units])[:, None]
    np.testing.assert_allclose(bunch.data[0], signal.astype(np.float32), rtol=1e-6, atol=0)
    assert bunch.fs == record.fs and np.isfinite(record.fs) and record.fs > 0
    digital = wfdb.rdrecord(str(header.with_suffix("")), physical=False)
    for expected, values in zip(digital.checksum or [], digital.d_signal.T):
        assert expected is None or (int(values.sum()) - expected) % 65536 == 0
    return bunch


def _fuzz_settings(n):
    return settings(
        max_examples=n,
        deadline=timedelta(seconds=10),  # a hang or runaway allocation fails the test
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


_record = st.sampled_from(FUZZ_RECORDS)


_token = st.one_of(
    st.integers(-(2**40), 2**40).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.sampled_from(["3.dat", "16", "16+24", "16x3", "212", "0", "0(0)/mV", "mV", "uV", "V", "#"]),
    st.text(alphabet=st.characters(codec="latin-1"), max_size=12),
)


@pytest.mark.bad_input("Read (fuzz)", "random header lines, fields and bytes", "InvalidRecordError")
@_fuzz_settings(400)
@given(
    record=_record,
    line=st.integers(0, 40),
    field=st.integers(0, 12),
    replacement=st.one_of(
        st.tuples(st.just("line"), st.text(alphabet=st.characters(codec="latin-1"), max_size=60)),
        st.tuples(st.just("field"), _token),
    ),
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), max_size=2),
)
def test_fuzz_header(record_property, record, line, field, replacement, flips):
    with tempfile.TemporaryDirectory() as folder:
        header = _copy(folder, *record)
        lines = header.read_bytes().decode("latin-1").split("\n")
        line %= len(lines)
        kind, text = replacement
        if kind == "line":
            lines[line] = text
        else:
            tokens = lines[line].split(" ")
            tokens[field % len(tokens)] = text
            lines[line] = " ".join(tokens)
        data = bytearray("\n".join(lines).encode("latin-1"))
        for position, mask in flips:
            data[position % len(data)] ^= mask
        header.write_bytes(bytes(data))
        _outcome(header)
    _count(record_property)


@pytest.mark.bad_input("Read (fuzz)", "truncated header or signal file", "InvalidRecordError")
@_fuzz_settings(200)
@given(record=_record, which=st.sampled_from(["header", "signal"]), fraction=st.floats(0, 1))
def test_fuzz_truncations(record_property, record, which, fraction):
    with tempfile.TemporaryDirectory() as folder:
        header = _copy(folder, *record)
        target = header if which == "header" else next(
            p for p in Path(folder).iterdir() if p.suffix in (".dat", ".mat")
        )
        data = target.read_bytes()
        keep = int(len(data) * fraction)
        target.write_bytes(data[:keep])
        result = _outcome(header)
        if which == "signal" and keep < len(data):
            assert result is None  # a short signal file never loads
    _count(record_property)


@pytest.mark.bad_input("Read (fuzz)", "one signal byte flipped", "InvalidRecordError")
@_fuzz_settings(200)
@given(record=_record, position=st.integers(0, 2**31), mask=st.integers(1, 255))
def test_fuzz_signal_byte_flips(record_property, record, position, mask):
    with tempfile.TemporaryDirectory() as folder:
        header = _copy(folder, *record)
        target = next(p for p in Path(folder).iterdir() if p.suffix in (".dat", ".mat"))
        data = bytearray(target.read_bytes())
        offset = 24 if target.suffix == ".mat" else 0  # the .mat header precedes the samples
        data[offset + position % (len(data) - offset)] ^= mask
        target.write_bytes(bytes(data))
        # One changed byte of a 16-bit sample changes the signal's sum modulo
        # 2**16, so the checksum always catches it.
        assert _outcome(header) is None
    _count(record_property)


_CASES = {}


def _count(record_property):
    """Count this example; report the running total as the test's number of cases."""
    key = id(record_property)
    _CASES[key] = _CASES.get(key, 0) + 1
    record_property("bad_input_cases", _CASES[key])


# ------------------------------------------- files that are not regular files
@pytest.mark.bad_input(
    "Read", "signal file or header that is a device or folder (e.g. a link to /dev/zero)",
    "InvalidRecordError",
)  # fmt: skip
@pytest.mark.parametrize("planted", ["dat-dev-zero", "dat-folder", "hea-dev-zero"])
def test_only_regular_files_are_read(tmp_path, planted):
    # Reproduction (issue 36): a .dat linked to /dev/zero under a header that
    # announced 20 million samples was read for 15 s into 1 GB.
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero on this platform")
    header = _copy(tmp_path, LUDB, "3")
    _edit_header(header, r"^3 12 500 5000", "3 12 500 20000000")
    target = tmp_path / ("3.hea" if planted.startswith("hea") else "3.dat")
    target.unlink()
    if planted.endswith("folder"):
        target.mkdir()
    else:
        target.symlink_to("/dev/zero")
    with pytest.raises(InvalidRecordError, match=r"3\.(dat|hea) is not a regular file"):
        _load(header)


@pytest.mark.bad_input("Read", "non-numeric ADC gain (NaN)", "InvalidRecordError")
@pytest.mark.parametrize("gain", ["nan", "NaN(0)", "inf(5)"])
def test_invalid_gain_names_the_right_lead_and_field(tmp_path, gain):
    header = _copy(tmp_path, LUDB, "3")
    # The second lead ("ii"): wfdb's pattern would take later fields for its name.
    _edit_header(header, r"^(3\.dat 16 )\d+\(-?\d+\)(/mV .* ii)$", rf"\g<1>{gain}\g<2>")
    field = re.escape(f"{gain}/mV")
    with pytest.raises(
        InvalidRecordError, match=rf"lead 'ii' \(signal line 2\) has an invalid ADC gain .*'{field}'"
    ):
        _load(header)


@pytest.mark.bad_input(
    "Read", "ESC sequences and U+202E in a record name (Python errors, warnings)", "(escaped)"
)
def test_record_names_are_escaped_in_errors_and_warnings(tmp_path, ludb_dir):
    # A file name reaches the terminal in the exception or warning text: its
    # control and bidi characters are shown as escapes, never acted on.
    name = "x\x1b[2J\u202eevil"
    for suffix in (".hea", ".dat"):
        shutil.copy(ludb_dir / f"12{suffix}", tmp_path / f"12{suffix}")
    (tmp_path / f"{name}.hea").write_text((ludb_dir / "11.hea").read_text())  # no .dat
    with pytest.raises(InvalidRecordError) as info:
        load_wfdb(tmp_path)
    skipped = [w.message.args[0] for w in _skip_warnings(tmp_path)]
    assert len(skipped) == 1
    for text in (str(info.value), *skipped):
        assert "\x1b" not in text and "\u202e" not in text
        assert "x\\x1b[2J\\u202eevil" in text


def _skip_warnings(folder):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_wfdb(folder, on_error="skip")
    return [w for w in caught if "Skipped" in str(w.message)]
