"""Shared fixtures: synthetic ECG-like signals with known attributes, and the bundled LUDB records."""

import importlib.util
import itertools
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

# One intra-op thread: the suite runs one xdist worker per core, and more
# threads only contend (OpenMP spin-waits can make that tens of times slower).
# No test asserts on time.
torch.set_num_threads(1)


def make_synthetic_ecgs(n_patients=24, frames_per_patient=3, n_leads=1, length=600, seed=0):
    """Periodic signals whose shape depends on three attributes.

    The class sets the base frequency, sex the amplitude of a second harmonic
    and the age group a slow baseline drift, so that every attribute is
    learnable but the class is the easiest one, as in real ECGs.

    Returns
    -------
    X : ndarray of shape (n_patients * frames_per_patient, n_leads, length)
    y : DataFrame with columns rhythm, sex, age_group
    groups : ndarray of patient ids
    """
    rng = np.random.RandomState(seed)
    # Every attribute combination occurs (n_patients // 12 patients each, at least).
    combinations = list(itertools.product(["AFIB", "SB", "SR"], ["F", "M"], ["<60", ">=60"]))
    patients = [combinations[i % len(combinations)] for i in rng.permutation(n_patients)]
    rhythm, sex, age = (np.array(column) for column in zip(*patients))
    t = np.linspace(0, 4 * np.pi, length)
    frequency = {"AFIB": 5.0, "SB": 1.5, "SR": 3.0}
    signals, rows, groups = [], [], []
    for patient in range(n_patients):
        for _ in range(frames_per_patient):
            phase = rng.uniform(0, 2 * np.pi)
            base = np.sin(frequency[rhythm[patient]] * t + phase)
            harmonic = (0.6 if sex[patient] == "M" else 0.0) * np.sin(
                2 * frequency[rhythm[patient]] * t + phase
            )
            drift = (0.8 if age[patient] == ">=60" else -0.8) * np.cos(t / 4)
            leads = [
                (1 + 0.2 * lead) * (base + harmonic + drift) + 0.2 * rng.randn(length)
                for lead in range(n_leads)
            ]
            signals.append(leads)
            rows.append((rhythm[patient], sex[patient], age[patient]))
            groups.append(patient)
    X = np.asarray(signals, dtype=np.float32)
    y = pd.DataFrame(rows, columns=["rhythm", "sex", "age_group"])
    return X, y, np.asarray(groups)


def make_small_net(**kwargs):
    """A CROCSNet with a small CNN on single-lead 64-sample frames and 4 prototypes."""
    from sklearn_crocs.nn import ArrayDataset, CNNEncoder, CROCSLoss, CROCSNet

    return CROCSNet(
        module=CNNEncoder,
        module__in_channels=1,
        module__n_timepoints=64,
        module__embedding_dim=8,
        module__kernel_size=3,
        module__stride=1,
        criterion=CROCSLoss,
        criterion__combinations=np.array([[0, 0], [0, 1], [1, 0], [1, 1]]),
        criterion__embedding_dim=8,
        optimizer=torch.optim.Adam,
        dataset=ArrayDataset,
        verbose=0,
        **kwargs,
    )


@pytest.fixture(scope="session")
def synthetic():
    return make_synthetic_ecgs()


@pytest.fixture(scope="session")
def ludb_frames():
    """Lead II of the bundled LUDB records cut into 2500-sample frames, with attributes."""
    from sklearn_crocs.datasets import load_ludb

    ludb = load_ludb()
    lead = ludb.lead_names.index("II")
    signals = ludb.data[:, lead, :]
    n_frames = signals.shape[1] // 2500
    X = signals[:, : n_frames * 2500].reshape(-1, 1, 2500)
    X = (X - X.mean(axis=-1, keepdims=True)) / (X.std(axis=-1, keepdims=True) + 1e-6)
    attributes = ludb.attributes.loc[np.repeat(np.arange(len(signals)), n_frames)]
    attributes = attributes.reset_index(drop=True)
    age_group = np.where(attributes["age"] >= 60, ">=60", "<60")
    y = pd.DataFrame(
        {"rhythm": attributes["rhythm"], "sex": attributes["sex"], "age_group": age_group}
    )
    groups = np.repeat(np.asarray(ludb.groups), n_frames)
    return X.astype(np.float32), y, groups


@pytest.fixture(scope="session")
def shared_data():
    if not SHARED_DATA.is_dir():
        pytest.skip(f"the real ECG records are not available at {SHARED_DATA}")
    return SHARED_DATA


# ------------------------------------------------------------ bad-input table
# Tests of bad input carry @pytest.mark.bad_input(area, kind, error). With
# --bad-input-table=PATH, the passed cases are counted per (area, kind, error)
# and written to PATH as the table that the documentation's Reliability page
# includes (``make bad-input-table``). Tests that run several cases in one
# (the fuzz tests) report how many with record_property("bad_input_cases", n).
def pytest_addoption(parser):
    parser.addoption(
        "--bad-input-table",
        metavar="PATH",
        default=None,
        help="write the table of bad inputs tried by the passing bad_input tests to PATH",
    )


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "bad_input(area, kind, error): a test that feeds a class of bad input"
    )


# (area, kind, error) -> (passed cases, test names), filled where reports arrive
# (the xdist controller, or the only process).
_BAD_INPUTS = {}


def pytest_runtest_setup(item):
    for marker in item.iter_markers("bad_input"):
        item.user_properties.append(("bad_input", list(marker.args)))


def pytest_runtest_logreport(report):
    if report.when != "call" or not report.passed:
        return
    properties = dict(report.user_properties)
    if "bad_input" not in properties:
        return
    key = tuple(properties["bad_input"])
    cases, tests = _BAD_INPUTS.get(key, (0, set()))
    tests.add(report.nodeid.split("::")[-1].split("[")[0])
    _BAD_INPUTS[key] = (cases + int(properties.get("bad_input_cases", 1)), tests)


def pytest_sessionfinish(session):
    path = session.config.getoption("--bad-input-table")
    table = _BAD_INPUTS
    if path is None or not table or hasattr(session.config, "workerinput"):
        return
    rows = [("Where", "Bad input", "Error", "Cases", "Tests")]
    for (area, kind, error), (cases, tests) in sorted(table.items()):
        names = ", ".join(f"``{t}``" for t in sorted(tests))
        rows.append((area, kind, f"``{error}``", str(cases), names))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    rule = "  ".join("=" * w for w in widths)
    lines = [rule, "  ".join(c.ljust(w) for c, w in zip(rows[0], widths)).rstrip(), rule]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows[1:]]
    lines.append(rule)
    total = sum(cases for cases, _ in table.values())
    header = (
        f".. Generated by `make bad-input-table` from the tests marked bad_input: "
        f"{len(table)} classes, {total} cases. Do not edit.\n\n"
    )
    Path(path).write_text(header + "\n".join(lines) + "\n", encoding="utf-8")


BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(name):
    """Yield the script ``benchmarks/<name>.py`` imported as a module (a fixture's body)."""
    path = BENCHMARKS / f"{name}.py"
    if not path.is_file():
        pytest.skip("benchmarks/ is not available (installed package)")
    sys.path.insert(0, str(BENCHMARKS))  # for the scripts' own `from _utils import ...`
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    sys.path.remove(str(BENCHMARKS))


@pytest.fixture(scope="module")
def paper_tables():
    yield from load_benchmark("paper_tables")
