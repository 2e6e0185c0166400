"""precision_at_k (Eq. 5), matchable_queries and retrieval_report on hand-worked examples."""

import itertools
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_crocs._search import top_k
from sklearn_crocs.metrics import (
    chance_precision_at_k,
    matchable_queries,
    precision_at_k,
    retrieval_report,
)

# Six held-out ECGs with (class, sex, age) ...
Y = pd.DataFrame(
    [
        ("MI", "F", "old"),
        ("MI", "M", "young"),
        ("NORM", "F", "young"),
        ("NORM", "M", "old"),
        ("MI", "F", "young"),
        ("NORM", "F", "old"),
    ],
    columns=["class", "sex", "age"],
)
# ... three queries: one with an exact match among them, one without, and one
# with a class value ("HYP") that no held-out ECG has ...
QUERIES = [("MI", "F", "old"), ("NORM", "M", "young"), ("HYP", "M", "young")]
# ... and the three ECGs each query retrieved, nearest first. Attributes shared
# with the query, by rank: q0: 1, 1, 3; q1: 0, 2, 2; q2: 0, 1, 2.
INDICES = [[2, 1, 0], [0, 3, 2], [5, 4, 1]]

# P@K worked out by hand: (k, min_matches) -> fraction of queries hit.
EXPECTED = {
    (1, 1): 1 / 3,  # only q0's first ECG shares an attribute
    (2, 1): 1.0,
    (3, 1): 1.0,
    (1, 2): 0.0,
    (2, 2): 1 / 3,  # q1's second ECG shares class and sex
    (3, 2): 1.0,
    # Exact matches: only q0 has one among the held-out ECGs, found at rank 3;
    # q1 and q2 cannot be matched and count as misses (Eq. 5 as written).
    (1, 3): 0.0,
    (2, 3): 0.0,
    (3, 3): 1 / 3,
}


@pytest.mark.parametrize(("k", "min_matches"), list(EXPECTED))
def test_precision_at_k_hand_worked(k, min_matches):
    result = precision_at_k(Y, INDICES, QUERIES, k=k, min_matches=min_matches)
    assert result == pytest.approx(EXPECTED[k, min_matches])


def test_queries_without_possible_match():
    assert matchable_queries(Y, QUERIES).tolist() == [True, False, False]
    assert matchable_queries(Y, QUERIES, min_matches=2).tolist() == [True, True, True]
    # "zero" (default, Eq. 5 as written) averages over all three; "exclude" over
    # q0 only, and says how many it left out.
    assert precision_at_k(Y, INDICES, QUERIES, k=3) == pytest.approx(1 / 3)
    with pytest.warns(UserWarning, match="excluded 2 of 3 queries that no item in y_true"):
        assert precision_at_k(Y, INDICES, QUERIES, k=3, no_match="exclude") == 1.0
    # When every query is matchable the rules agree, and nothing is excluded.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for k in (1, 2, 3):
            assert precision_at_k(Y, INDICES, QUERIES, k=k, min_matches=1) == precision_at_k(
                Y, INDICES, QUERIES, k=k, min_matches=1, no_match="exclude"
            )


def test_no_matchable_query_is_undefined():
    with (
        pytest.warns(UndefinedMetricWarning, match="no_match='zero'"),
        pytest.warns(UserWarning, match="excluded 2 of 2"),
    ):
        result = precision_at_k(Y, [[0], [1]], QUERIES[1:], min_matches=3, no_match="exclude")
    assert np.isnan(result)
    assert precision_at_k(Y, [[0], [1]], QUERIES[1:], no_match="zero") == 0.0


def test_defaults_all_columns_and_exact_match():
    assert precision_at_k(Y, INDICES, QUERIES) == EXPECTED[3, 3]
    assert precision_at_k(Y, np.asarray(INDICES)[:, :2], QUERIES) == EXPECTED[2, 3]


def test_column_order_dtypes_and_layouts():
    # DataFrame queries are matched by column name; categorical and mixed-type values work.
    queries = pd.DataFrame(QUERIES, columns=["class", "sex", "age"])[["age", "class", "sex"]]
    categorical = Y.astype({"age": pd.CategoricalDtype(["young", "old"], ordered=True)})
    for k, m in EXPECTED:
        assert precision_at_k(categorical, INDICES, queries, k=k, min_matches=m) == pytest.approx(
            EXPECTED[k, m]
        )
    numeric = Y.assign(sex=(Y["sex"] == "M").astype(int))
    numeric_queries = [(c, int(s == "M"), a) for c, s, a in QUERIES]
    assert precision_at_k(numeric, INDICES, numeric_queries, k=2, min_matches=2) == pytest.approx(
        1 / 3
    )
    # Positional y_true with DataFrame queries (such as query_attributes_) takes their names.
    named = pd.DataFrame(QUERIES, columns=["class", "sex", "age"])
    assert precision_at_k(Y.to_numpy(), INDICES, named, k=2, min_matches=2) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match=r"y_true has 2 attribute\(s\) but query_attributes has 3"):
        precision_at_k(Y.to_numpy()[:, :2], INDICES, queries)
    # A single attribute as 1-D arrays.
    assert precision_at_k(["a", "b", "a"], [[1, 0], [0, 2]], [["a"], ["b"]], k=1) == 0.0


def test_ties_in_distance_go_to_the_lower_index():
    # The query is at distance sqrt(2) from ECGs 0 and 1, a tie; ECG 2 is nearest.
    query = np.array([[1.0, 0.0]], dtype=np.float32)
    embeddings = np.array([[0, 1], [0, -1], [1, 0], [-1, 0]], dtype=np.float32)
    distances, indices = top_k(query, embeddings, 2)
    assert indices.tolist() == [[2, 0]]
    assert distances[0, 1] == pytest.approx(np.sqrt(2))
    # Only ECG 1 has the query's attribute, and it loses the tie: P@2 = 0,
    # and 1 once the tied ECGs swap places.
    assert precision_at_k(["b", "a", "b", "a"], indices, [["a"]]) == 0.0
    swapped = top_k(query, embeddings[[1, 0, 2, 3]], 2)[1]
    assert swapped.tolist() == [[2, 0]]
    assert precision_at_k(["a", "b", "b", "a"], swapped, [["a"]]) == 1.0


def _eq5_loops(y, indices, queries, k, m, no_match):
    """Eq. 5 as written, with explicit loops."""
    scores = []
    for j, query in enumerate(queries):
        if no_match == "exclude" and not any(
            sum(a == b for a, b in zip(row, query)) >= m for row in y
        ):
            continue
        relevant = sum(sum(a == b for a, b in zip(y[i], query)) >= m for i in indices[j][:k])
        scores.append(1.0 if relevant >= 1 else 0.0)
    return sum(scores) / len(scores)


@pytest.mark.parametrize("seed", range(3))
def test_precision_at_k_against_loops(seed):
    rng = np.random.RandomState(seed)
    y = [
        tuple(row)
        for row in np.column_stack(
            [
                rng.choice(["a", "b", "c"], 40),
                rng.choice(["F", "M"], 40),
                rng.choice([1, 2, 3, 4], 40),
            ]
        ).astype(object)
    ]
    y = [(c, s, int(a)) for c, s, a in y]
    queries = [(c, s, a) for c in "abcd" for s in "FM" for a in (1, 4)]
    indices = np.array([rng.permutation(40)[:10] for _ in queries])
    for k in (1, 5, 10):
        for m in (1, 2, 3):
            for no_match in ("exclude", "zero"):
                assert precision_at_k(
                    y, indices, queries, k=k, min_matches=m, no_match=no_match
                ) == pytest.approx(_eq5_loops(y, indices, queries, k, m, no_match))


def test_retrieval_report_layout_and_values():
    other = [[0, 1, 2], [3, 2, 0], [1, 4, 5]]
    report = retrieval_report(Y, {"A": (QUERIES, INDICES), "B": (QUERIES, other)}, k=(1, 2, 3))
    assert report.index.tolist() == ["A", "B"]
    assert report.columns.names == ["K", "# matches"]
    assert report.columns.tolist() == [(k, m) for k in (1, 2, 3) for m in (">=1", ">=2", "=3")]
    for (k, label), value in report.loc["A"].items():
        m = 3 if label == "=3" else int(label[2:])
        assert value == round(100 * EXPECTED[k, m], 1)
    for (k, label), value in report.loc["B"].items():
        m = 3 if label == "=3" else int(label[2:])
        assert value == round(100 * precision_at_k(Y, other, QUERIES, k=k, min_matches=m), 1)
    raw = retrieval_report(Y, (QUERIES, INDICES), k=2, min_matches=2, percent=False, decimals=None)
    assert raw.index.tolist() == ["model"]
    assert raw.columns.tolist() == [(2, ">=2")]
    assert raw.iloc[0, 0] == pytest.approx(1 / 3)
    zero = retrieval_report(Y, (QUERIES, INDICES), k=3, no_match="zero", decimals=None)
    assert zero[(3, "=3")].iloc[0] == pytest.approx(100 / 3)


def test_bad_input():
    with pytest.raises(ValueError, match=r"k=4 but only 3 item\(s\) were retrieved per query"):
        precision_at_k(Y, INDICES, QUERIES, k=4)
    with pytest.raises(ValueError, match="min_matches=4 exceeds the number of attributes, 3"):
        precision_at_k(Y, INDICES, QUERIES, min_matches=4)
    with pytest.raises(ValueError, match=r"indices must lie in \[0, 6\)"):
        precision_at_k(Y, [[0, 6, 1]] * 3, QUERIES)
    with pytest.raises(ValueError, match=r"indices has 2 row\(s\) but there are 3 queries"):
        precision_at_k(Y, INDICES[:2], QUERIES)
    with pytest.raises(ValueError, match="indices must be an integer array"):
        precision_at_k(Y, np.asarray(INDICES, dtype=float), QUERIES)
    with pytest.raises(ValueError, match=r"query_attributes has 2 attribute\(s\) but 3 names"):
        precision_at_k(Y, INDICES, [q[:2] for q in QUERIES])
    with pytest.raises(ValueError, match=r"y_true has attributes \['class', 'sex', 'age'\]"):
        precision_at_k(Y, INDICES, pd.DataFrame(QUERIES, columns=["class", "sex", "age_group"]))
    with pytest.raises(InvalidParameterError, match="no_match"):
        precision_at_k(Y, INDICES, QUERIES, no_match="ignore")
    with pytest.raises(InvalidParameterError, match="k"):
        precision_at_k(Y, INDICES, QUERIES, k=0)
    with pytest.raises(ValueError, match="neighbors is empty"):
        retrieval_report(Y, {})
    with pytest.raises(ValueError, match=r"neighbors\['A'\] must be a tuple"):
        retrieval_report(Y, {"A": INDICES})


def test_chance_precision_is_the_mean_over_every_possible_retrieval():
    # Every set of k ECGs, in one order, is equally likely under random retrieval;
    # the order within the k does not change P@K.
    for k in (1, 2, 3):
        for m in (1, 2, 3):
            subsets = np.array(list(itertools.combinations(range(len(Y)), k)))
            exhaustive = np.mean(
                [precision_at_k(Y, np.tile(s, (len(QUERIES), 1)), QUERIES, min_matches=m)
                 for s in subsets]
            )  # fmt: skip
            assert chance_precision_at_k(Y, QUERIES, k=k, min_matches=m) == pytest.approx(exhaustive)
    assert chance_precision_at_k(Y, QUERIES, k=6, min_matches=3) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match=r"k=7 exceeds the 6 item\(s\) of y_true"):
        chance_precision_at_k(Y, QUERIES, k=7)
