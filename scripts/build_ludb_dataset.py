"""Build the bundled LUDB package data (sklearn_crocs/datasets/data/ludb.npz).

Reads the WFDB originals of the Lobachevsky University Electrocardiography
Database (PhysioNet, ODC-By 1.0) and stores, losslessly and compressed:

- the digital (ADC) samples as int16 first differences along time, which
  compress far better than raw samples and restore exactly with a cumulative
  sum;
- the per-lead ADC gains and baselines, so that the loader recomputes the
  physical values in mV with wfdb's own arithmetic;
- the rhythm group, sex and age of every record, parsed from the header
  comments with the rules of :mod:`sklearn_crocs.datasets._ludb`.

``ludb.csv`` (the database's spreadsheet), when present, is used as a cross
check: the script stops if it disagrees with a header on sex, age or rhythm.
The output is written atomically (a temporary file renamed into place).

Usage::

    python scripts/build_ludb_dataset.py [LUDB_DIR] [--output PATH]

LUDB_DIR defaults to ``../shared/data/ludb`` relative to the repository root.
"""

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import wfdb

from sklearn_crocs._utils import _atomic_path
from sklearn_crocs.datasets._base import (
    STANDARD_LEADS,
    canonical_lead_name,
    parse_age,
    parse_sex,
)
from sklearn_crocs.datasets._ludb import (
    LUDB_FILENAME,
    LUDB_FORMAT_VERSION,
    LUDB_RHYTHM_GROUPS,
    ludb_attributes_from_comments,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_LUDB_DIR = REPO_ROOT.parent / "shared" / "data" / "ludb"  # all 102 records
DEFAULT_OUTPUT = REPO_ROOT / "sklearn_crocs" / "datasets" / "data" / LUDB_FILENAME
FS = 500
N_SAMPLES = 5000
MAX_BYTES = 6 * 1024 * 1024


def _record_names(ludb_dir):
    names = [path.stem for path in ludb_dir.glob("*.hea")]
    if not names:
        raise SystemExit(f"No WFDB headers (*.hea) found in {ludb_dir}.")
    return sorted(names, key=int)


def _read_record(ludb_dir, name):
    record = wfdb.rdrecord(str(ludb_dir / name), physical=False)
    where = ludb_dir / f"{name}.hea"
    if record.fs != FS or record.sig_len != N_SAMPLES:
        raise SystemExit(
            f"{where}: expected {FS} Hz and {N_SAMPLES} samples, found "
            f"{record.fs} Hz and {record.sig_len} samples."
        )
    leads = [canonical_lead_name(name) for name in record.sig_name]
    if leads != list(STANDARD_LEADS):
        raise SystemExit(f"{where}: unexpected leads {record.sig_name}.")
    if any(unit.lower() != "mv" for unit in record.units):
        raise SystemExit(f"{where}: expected units mV, found {record.units}.")
    digital = record.d_signal.T.astype(np.int64)  # (leads, time)
    deltas = np.diff(digital, axis=-1, prepend=0)
    if np.abs(deltas).max() > np.iinfo(np.int16).max:
        raise SystemExit(f"{where}: a sample-to-sample step does not fit in int16.")
    return record, deltas.astype(np.int16)


def _check_against_csv(ludb_dir, table):
    csv_path = ludb_dir / "ludb.csv"
    if not csv_path.exists():
        print(f"note: {csv_path} not found, skipping the cross check")
        return
    sheet = pd.read_csv(csv_path, dtype=str)
    sheet = sheet.set_index(sheet["ID"].str.strip())
    problems = []
    for name, row in table.iterrows():
        if name not in sheet.index:
            problems.append(f"record {name} is missing from ludb.csv")
            continue
        entry = sheet.loc[name]
        sex = parse_sex(entry["Sex"])
        age = parse_age(entry["Age"])
        # A cell can list several rhythms on separate lines; the first line
        # is the rhythm the header's '#Rhythm:' statement gives.
        first_rhythm = str(entry["Rhythms"]).strip().splitlines()[0].strip()
        group = LUDB_RHYTHM_GROUPS.get(first_rhythm.rstrip(".").lower())
        if sex != row["sex"]:
            problems.append(f"{name}: sex {row['sex']} (header) vs {sex} (csv)")
        if not (age == row["age"] or (np.isnan(age) and np.isnan(row["age"]))):
            problems.append(f"{name}: age {row['age']} (header) vs {age} (csv)")
        if group != row["rhythm"]:
            problems.append(f"{name}: rhythm {row['rhythm']} (header) vs {first_rhythm!r} (csv)")
    if problems:
        raise SystemExit("ludb.csv disagrees with the headers:\n  " + "\n  ".join(problems))
    print(f"ludb.csv agrees with the headers on sex, age and rhythm ({len(table)})")


def build(ludb_dir, output):
    ludb_dir = Path(ludb_dir).resolve()
    names = _record_names(ludb_dir)
    deltas, gains, baselines, rows = [], [], [], []
    for name in names:
        record, record_deltas = _read_record(ludb_dir, name)
        deltas.append(record_deltas)
        gains.append(np.asarray(record.adc_gain, dtype=np.float64))
        baselines.append(np.asarray(record.baseline, dtype=np.int32))
        rows.append(ludb_attributes_from_comments(record.comments, name))
    table = pd.DataFrame(rows, index=pd.Index([str(n) for n in names], name="ID"))
    _check_against_csv(ludb_dir, table)

    with _atomic_path(output, replace=True) as tmp:  # the script rebuilds its output
        with open(tmp, "wb") as fh:
            np.savez_compressed(
                fh,
                format_version=np.int64(LUDB_FORMAT_VERSION),
                signal_deltas=np.stack(deltas),
                adc_gain=np.stack(gains),
                baseline=np.stack(baselines),
                record_names=np.array(names, dtype=str),
                rhythm=table["rhythm"].to_numpy(dtype=str),
                sex=table["sex"].to_numpy(dtype=str),
                age=table["age"].to_numpy(dtype=np.float64),
                rhythm_statement=table["rhythm_statement"].to_numpy(dtype=str),
                lead_names=np.array(STANDARD_LEADS, dtype=str),
                fs=np.int64(FS),
            )
        size = tmp.stat().st_size
        if size > MAX_BYTES:
            raise SystemExit(f"{output} would be {size} bytes, over {MAX_BYTES}.")
    counts = table["rhythm"].value_counts().sort_index().to_dict()
    print(f"wrote {output} ({size / 1e6:.2f} MB): {len(names)} records, {counts}")
    return output


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "ludb_dir",
        nargs="?",
        default=DEFAULT_LUDB_DIR,
        type=Path,
        help=f"folder with the LUDB .hea/.dat files (default: {DEFAULT_LUDB_DIR})",
    )
    parser.add_argument(
        "--output",
        default=DEFAULT_OUTPUT,
        type=Path,
        help=f"where to write the archive (default: {DEFAULT_OUTPUT})",
    )
    args = parser.parse_args(argv)
    build(args.ludb_dir, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
