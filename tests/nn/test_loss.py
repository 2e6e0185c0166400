"""CROCSLoss against a naive per-sample, per-prototype implementation of the paper's equations."""

import itertools
import math

import numpy as np
import pytest
import torch

from sklearn_crocs.nn import CROCSLoss, attribute_weight_table

COMBINATIONS = np.array(list(itertools.product(range(3), range(2), range(4))))  # M = 24


def _distance(a, b, is_ordinal):
    """One attribute's mismatch: 0/1, or the rank distance of an ordinal attribute."""
    return abs(int(a) - int(b)) if is_ordinal else int(a != b)


def _naive_weights(combinations, class_attribute, tau_w, ordinal=None):
    """w_ij of Eq. 2, element by element."""
    ordinal = ordinal or [False] * len(combinations[0])
    m = len(combinations)
    w = np.zeros((m, m))
    for i in range(m):
        same = [
            j
            for j in range(m)
            if combinations[j][class_attribute] == combinations[i][class_attribute]
        ]
        q = {}
        for j in same:
            n_equal = sum(
                1 - _distance(a, b, o) for a, b, o in zip(combinations[i], combinations[j], ordinal)
            )
            q[j] = 0.0 if math.isinf(tau_w) else n_equal / tau_w
        denominator = sum(math.exp(q[l]) for l in same)  # noqa: E741
        for j in same:
            w[i, j] = math.exp(q[j]) / denominator
    return w


def _naive_loss(
    v,
    p,
    targets,
    combinations,
    *,
    tau_s,
    tau_w,
    beta,
    kind,
    class_attribute=0,
    reduction="sum",
    ordinal=None,
):
    """L_NCE + L_reg with explicit loops (float64 math, returned as a Python float)."""
    v = v.detach().double().numpy()
    p = p.detach().double().numpy()
    m = len(p)
    ordinal = ordinal or [False] * len(combinations[0])
    weights = (
        np.eye(m)
        if kind == "hard"
        else _naive_weights(combinations, class_attribute, tau_w, ordinal)
    )
    nce = 0.0
    for i in range(len(v)):
        s = [
            float(v[i] @ p[k]) / (np.linalg.norm(v[i]) * np.linalg.norm(p[k])) / tau_s
            for k in range(m)
        ]
        log_denominator = math.log(sum(math.exp(x) for x in s))
        for j in range(m):
            w = weights[targets[i], j]
            if w:
                nce -= w * (s[j] - log_denominator)
    nce /= len(v)
    reg, n_pairs = 0.0, 0
    if beta:
        for j in range(m):
            for k in range(m):
                if combinations[j][class_attribute] != combinations[k][class_attribute]:
                    continue
                pj = p[j] / np.linalg.norm(p[j])
                pk = p[k] / np.linalg.norm(p[k])
                hamming = sum(
                    _distance(a, b, o) for a, b, o in zip(combinations[j], combinations[k], ordinal)
                )
                reg += (np.linalg.norm(pj - pk) - beta * hamming) ** 2
                n_pairs += j != k
    if reduction == "mean" and n_pairs:
        reg /= n_pairs
    return nce, reg


CASES = [
    pytest.param({"kind": "hard", "tau_w": 1.0, "beta": 0.0}, id="nce-hard"),
    pytest.param({"kind": "soft", "tau_w": math.inf, "beta": 0.0}, id="nce-soft-tau_w-inf"),
    pytest.param({"kind": "soft", "tau_w": 1.0, "beta": 0.0}, id="nce-soft-tau_w-1"),
    pytest.param({"kind": "soft", "tau_w": 0.5, "beta": 0.2}, id="nce-soft+reg"),
    pytest.param({"kind": "hard", "tau_w": 1.0, "beta": 0.4}, id="nce-hard+reg"),
    pytest.param(
        {"kind": "soft", "tau_w": 1.0, "beta": 0.2, "reduction": "mean"}, id="nce-soft+mean-reg"
    ),
    # The third attribute (4 values) ordinal: rank distances in q and in the Hamming term.
    pytest.param(
        {"kind": "soft", "tau_w": 0.5, "beta": 0.2, "ordinal": [False, False, True]},
        id="nce-soft+reg-ordinal",
    ),
    pytest.param(
        {"kind": "hard", "tau_w": 1.0, "beta": 0.3, "ordinal": [False, True, True]},
        id="nce-hard+reg-ordinal",
    ),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", CASES)
def test_loss_matches_naive_loop(case, dtype):
    rng = np.random.RandomState(0)
    embedding_dim = 6
    v = torch.as_tensor(rng.randn(10, embedding_dim), dtype=dtype)
    p0 = rng.randn(len(COMBINATIONS), embedding_dim)
    targets = rng.randint(len(COMBINATIONS), size=10)
    criterion = CROCSLoss(
        COMBINATIONS,
        embedding_dim,
        tau_s=0.1,
        tau_w=case["tau_w"],
        beta=case["beta"],
        loss=case["kind"],
        reg_reduction=case.get("reduction", "sum"),
        prototype_init=torch.as_tensor(p0, dtype=dtype),
        ordinal=case.get("ordinal"),
    )
    assert criterion.prototypes.dtype == dtype
    nce, reg = criterion.loss_parts(v, torch.as_tensor(targets))
    expected_nce, expected_reg = _naive_loss(
        v,
        criterion.prototypes,
        targets,
        COMBINATIONS,
        tau_s=0.1,
        tau_w=case["tau_w"],
        beta=case["beta"],
        kind=case["kind"],
        reduction=case.get("reduction", "sum"),
        ordinal=case.get("ordinal"),
    )
    rtol = 1e-5 if dtype == torch.float32 else 1e-12
    assert nce.dtype == dtype and reg.dtype == dtype
    np.testing.assert_allclose(nce.item(), expected_nce, rtol=rtol)
    np.testing.assert_allclose(reg.item(), expected_reg, rtol=rtol, atol=rtol)
    total = criterion(v, torch.as_tensor(targets))
    np.testing.assert_allclose(total.item(), expected_nce + expected_reg, rtol=rtol)


def test_loss_with_other_class_attribute_and_two_attributes():
    combinations = np.array(list(itertools.product(range(2), range(3))))
    rng = np.random.RandomState(1)
    v = torch.as_tensor(rng.randn(7, 4))
    targets = rng.randint(len(combinations), size=7)
    criterion = CROCSLoss(
        combinations,
        4,
        class_attribute=1,
        tau_w=2.0,
        beta=0.3,
        prototype_init=torch.as_tensor(rng.randn(len(combinations), 4)),
    )
    nce, reg = criterion.loss_parts(v, torch.as_tensor(targets))
    expected = _naive_loss(
        v,
        criterion.prototypes,
        targets,
        combinations,
        tau_s=0.1,
        tau_w=2.0,
        beta=0.3,
        kind="soft",
        class_attribute=1,
    )
    np.testing.assert_allclose([nce.item(), reg.item()], expected, rtol=1e-12)


@pytest.mark.parametrize("tau_w", [0.3, 1.0, math.inf])
def test_weight_table_matches_naive(tau_w):
    table = attribute_weight_table(COMBINATIONS, class_attribute=0, tau_w=tau_w)
    np.testing.assert_allclose(table, _naive_weights(COMBINATIONS, 0, tau_w), rtol=1e-12)
    np.testing.assert_allclose(table.sum(axis=1), 1.0)
    other_class = COMBINATIONS[:, None, 0] != COMBINATIONS[None, :, 0]
    assert np.all(table[other_class] == 0)


@pytest.mark.parametrize("ordinal", [[False, True, False], [False, False, True], [True] * 3])
@pytest.mark.parametrize("tau_w", [0.5, math.inf])
def test_ordinal_weight_table_matches_naive(ordinal, tau_w):
    table = attribute_weight_table(COMBINATIONS, tau_w=tau_w, ordinal=ordinal)
    np.testing.assert_allclose(table, _naive_weights(COMBINATIONS, 0, tau_w, ordinal), rtol=1e-12)


def test_ordinal_weights_fall_with_rank_distance():
    # Same class and second attribute; the third (4 ranks) ordinal: from rank 0,
    # ranks 1, 2, 3 weigh less and less, where a nominal attribute weighs them alike.
    rows = [i for i, c in enumerate(COMBINATIONS) if c[0] == 0 and c[1] == 0]
    ordinal = attribute_weight_table(COMBINATIONS, ordinal=[False, False, True])[rows[0], rows]
    nominal = attribute_weight_table(COMBINATIONS)[rows[0], rows]
    assert np.all(np.diff(ordinal) < 0)
    np.testing.assert_allclose(nominal[1:], nominal[1])


def test_ordinal_must_be_one_boolean_per_attribute_with_numeric_codes():
    with pytest.raises(ValueError, match="3 booleans"):
        CROCSLoss(COMBINATIONS, 4, ordinal=[True])
    with pytest.raises(ValueError, match="numeric codes"):
        attribute_weight_table(np.array([["a", "x"], ["b", "y"]]), ordinal=[False, True])


def test_weight_table_prefers_more_shared_attributes():
    table = attribute_weight_table(COMBINATIONS, tau_w=1.0)
    # ECG (0, 0, 0): itself > (0, 0, 1) [one mismatch] > (0, 1, 1) [two mismatches].
    index = {tuple(c): i for i, c in enumerate(COMBINATIONS)}
    row = table[index[(0, 0, 0)]]
    assert row[index[(0, 0, 0)]] > row[index[(0, 0, 1)]] > row[index[(0, 1, 1)]] > 0


def test_weight_table_uniform_for_infinite_tau_w():
    table = attribute_weight_table(COMBINATIONS, tau_w=math.inf)
    nonzero = table[table > 0]
    np.testing.assert_allclose(nonzero, 1 / 8)  # 2 sexes x 4 ages per class


def test_tables_are_buffers_computed_once():
    criterion = CROCSLoss(COMBINATIONS, 4)
    buffers = dict(criterion.named_buffers())
    assert {"weights", "hamming", "same_class"} <= set(buffers)
    assert buffers["weights"].shape == (24, 24)
    assert [name for name, _ in criterion.named_parameters()] == ["prototypes"]
    # Forward passes index the stored table; they never rebuild it.
    before = criterion.weights.data_ptr()
    criterion(torch.randn(3, 4), torch.tensor([0, 5, 23]))
    assert criterion.weights.data_ptr() == before


def test_hard_loss_equals_cross_entropy_of_own_prototype():
    criterion = CROCSLoss(COMBINATIONS, 5, loss="hard", beta=0.0)
    v = torch.randn(8, 5)
    targets = torch.randint(24, (8,))
    expected = torch.nn.functional.cross_entropy(criterion.logits(v), targets)
    torch.testing.assert_close(criterion(v, targets), expected)


def test_beta_zero_turns_regulariser_off_and_reg_is_zero_at_target_arrangement():
    criterion = CROCSLoss(COMBINATIONS, 5, beta=0.0)
    assert criterion.regularization().item() == 0.0
    # Two prototypes of one class, one mismatch, placed exactly beta apart.
    combinations = np.array([[0, 0], [0, 1]])
    beta = 0.2
    angle = 2 * math.asin(beta / 2)  # chord length beta on the unit circle
    init = torch.tensor([[1.0, 0.0], [math.cos(angle), math.sin(angle)]], dtype=torch.float64)
    criterion = CROCSLoss(combinations, 2, beta=beta, prototype_init=init)
    assert criterion.regularization().item() == pytest.approx(0.0, abs=1e-12)


def test_log_softmax_is_stable_for_extreme_similarities():
    criterion = CROCSLoss(COMBINATIONS, 3, tau_s=1e-4, beta=0.0)
    v = torch.randn(4, 3) * 1e3
    loss = criterion(v, torch.tensor([0, 1, 2, 3]))
    assert torch.isfinite(loss)
    loss.backward()
    assert torch.isfinite(criterion.prototypes.grad).all()


@pytest.mark.parametrize("kind", ["soft", "hard"])
def test_gradcheck(kind):
    rng = np.random.RandomState(0)
    combinations = np.array(list(itertools.product(range(2), range(2), range(2))))
    criterion = CROCSLoss(
        combinations,
        4,
        loss=kind,
        tau_w=1.0,
        beta=0.2,
        prototype_init=torch.as_tensor(rng.randn(8, 4)),
    )
    v = torch.as_tensor(rng.randn(5, 4)).requires_grad_()
    p = criterion.prototypes.detach().clone().requires_grad_()
    targets = torch.as_tensor(rng.randint(8, size=5))

    def total_loss(v, p):
        return torch.func.functional_call(criterion, {"prototypes": p}, (v, targets))

    assert torch.autograd.gradcheck(total_loss, (v, p))


def test_gradient_reaches_prototypes():
    criterion = CROCSLoss(COMBINATIONS, 4)
    loss = criterion(torch.randn(6, 4), torch.randint(24, (6,)))
    loss.backward()
    assert criterion.prototypes.grad is not None
    assert criterion.prototypes.grad.abs().sum() > 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"loss": "medium"}, "loss must be 'soft' or 'hard'"),
        ({"tau_s": 0}, "tau_s must be positive"),
        ({"tau_w": -1.0}, "tau_w must be positive"),
        ({"beta": -0.1}, "beta must be non-negative"),
        ({"reg_reduction": "max"}, "reg_reduction must be 'sum' or 'mean'"),
        ({"prototype_init": np.zeros((2, 4))}, r"prototype_init must have shape \(24, 4\)"),
    ],
)
def test_invalid_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CROCSLoss(COMBINATIONS, 4, **kwargs)


def test_invalid_combinations():
    with pytest.raises(ValueError, match="non-empty 2-D array"):
        CROCSLoss(np.array([0, 1, 2]), 4)


# ------------------------------------------------------- missing attributes
def _consistent_rows(codes, combinations):
    """Prototypes whose combination has every known (not -1) value of ``codes``."""
    return [
        j
        for j, combination in enumerate(combinations)
        if all(c < 0 or c == value for c, value in zip(codes, combination))
    ]


def _naive_similarities(v_i, p, tau_s):
    """``s(v_i, p_k) = cos(v_i, p_k) / tau_s`` for every k, and ``log sum_k exp s``."""
    s = [float(v_i @ p_k) / (np.linalg.norm(v_i) * np.linalg.norm(p_k)) / tau_s for p_k in p]
    return s, math.log(sum(math.exp(x) for x in s))


def _naive_partial_nce(v, p, codes, combinations, *, tau_s, tau_w, kind):
    """L_NCE for ECGs with value codes ``codes`` (-1: missing), one ECG and prototype at a time.

    Soft: Eq. 2's weights averaged over every completion of the missing
    values (the unknown attributes summed out with equal prior). Hard:
    -log of the probability summed over the consistent prototypes.
    """
    v = v.detach().double().numpy()
    p = p.detach().double().numpy()
    weights = _naive_weights(combinations, 0, tau_w)
    nce = 0.0
    for i in range(len(v)):
        s, log_denominator = _naive_similarities(v[i], p, tau_s)
        consistent = _consistent_rows(codes[i], combinations)
        if kind == "hard":
            nce -= math.log(sum(math.exp(s[j] - log_denominator) for j in consistent))
            continue
        for j in range(len(p)):
            w = sum(weights[c, j] for c in consistent) / len(consistent)
            nce -= w * (s[j] - log_denominator)
    return nce / len(v)


# 1, 1, 2, 1 and 1 missing; the last row misses the class (a record with no diagnosis).
PARTIAL = np.array([[1, -1, 2], [0, 1, -1], [2, -1, -1], [0, -1, 3], [-1, 1, 2]])


@pytest.mark.parametrize("n_missing", [0, 1, 2, "mixed"])
@pytest.mark.parametrize(("kind", "tau_w"), [("soft", 1.0), ("soft", 0.5), ("hard", 1.0)])
def test_partial_loss_matches_naive_loop(kind, tau_w, n_missing):
    rng = np.random.RandomState(0)
    combinations = COMBINATIONS
    rows = {0: [], 1: [0, 1, 3, 4], 2: [2], "mixed": [0, 1, 2, 3, 4]}[n_missing]
    # Targets: full combinations, then rows of PARTIAL with n_missing values missing.
    full = rng.randint(len(combinations), size=6 if n_missing in (0, "mixed") else 0)
    partial = rng.choice(rows, size=6) if rows else np.array([], dtype=int)
    targets = np.concatenate([full, len(combinations) + partial]).astype(np.int64)
    codes = np.vstack([combinations, PARTIAL])[targets]
    v = torch.as_tensor(rng.randn(len(targets), 5))
    criterion = CROCSLoss(
        combinations,
        5,
        tau_w=tau_w,
        beta=0.0,
        loss=kind,
        prototype_init=torch.as_tensor(rng.randn(len(combinations), 5)),
        partial_combinations=PARTIAL,
    )
    nce, _ = criterion.loss_parts(v, torch.as_tensor(targets))
    expected = _naive_partial_nce(
        v, criterion.prototypes, codes, combinations, tau_s=0.1, tau_w=tau_w, kind=kind
    )
    np.testing.assert_allclose(nce.item(), expected, rtol=1e-12)


def _naive_posterior_nce(v, p, codes, combinations, *, tau_s, tau_w):
    """L_NCE (soft) with a missing class completed by the class posterior, one ECG at a time:
    the mean weight row of each class's consistent combinations, weighted by P(c | v_i)
    over the consistent classes."""
    v = v.detach().double().numpy()
    p = p.detach().double().numpy()
    weights = _naive_weights(combinations, 0, tau_w)
    classes = sorted(set(combinations[:, 0]))
    nce = 0.0
    for i in range(len(v)):
        s, log_denominator = _naive_similarities(v[i], p, tau_s)
        softmax = [math.exp(x - log_denominator) for x in s]
        consistent = _consistent_rows(codes[i], combinations)
        if codes[i][0] >= 0:
            w = [sum(weights[c, j] for c in consistent) / len(consistent) for j in range(len(p))]
        else:
            posterior, rows = {}, {}
            for c in classes:
                members = [k for k in consistent if combinations[k, 0] == c]
                if members:
                    posterior[c] = sum(softmax[k] for k in range(len(p)) if combinations[k, 0] == c)
                    rows[c] = [sum(weights[k, j] for k in members) / len(members)
                               for j in range(len(p))]  # fmt: skip
            total = sum(posterior.values())
            w = [sum(posterior[c] / total * rows[c][j] for c in rows) for j in range(len(p))]
        nce -= sum(w[j] * (s[j] - log_denominator) for j in range(len(p)))
    return nce / len(v)


@pytest.mark.parametrize("tau_w", [0.5, 1.0])
def test_posterior_class_completion_matches_naive_loop(tau_w):
    rng = np.random.RandomState(1)
    targets = np.concatenate(
        [rng.randint(len(COMBINATIONS), size=4), len(COMBINATIONS) + np.array([4, 4, 0, 2])]
    ).astype(np.int64)
    v = torch.as_tensor(rng.randn(len(targets), 5))
    kwargs = {"tau_w": tau_w, "beta": 0.0, "partial_combinations": PARTIAL,
              "prototype_init": torch.as_tensor(rng.randn(len(COMBINATIONS), 5))}  # fmt: skip
    posterior = CROCSLoss(COMBINATIONS, 5, missing_class="posterior", **kwargs)
    nce, _ = posterior.loss_parts(v, torch.as_tensor(targets))
    codes = np.vstack([COMBINATIONS, PARTIAL])[targets]
    expected = _naive_posterior_nce(
        v, posterior.prototypes, codes, COMBINATIONS, tau_s=0.1, tau_w=tau_w
    )
    np.testing.assert_allclose(nce.item(), expected, rtol=1e-12)
    # Targets whose class is known (PARTIAL rows 0-3) weigh as with the uniform completion.
    uniform = CROCSLoss(COMBINATIONS, 5, **kwargs)
    known = torch.as_tensor([3, 17, len(COMBINATIONS), len(COMBINATIONS) + 3])
    np.testing.assert_allclose(
        posterior.loss_parts(v[:4], known)[0].item(),
        uniform.loss_parts(v[:4], known)[0].item(), rtol=1e-12,
    )


@pytest.mark.parametrize("tau_w", [0.5, 1.0, math.inf])
def test_partial_weights_are_eq2_with_q_over_the_known_attributes(tau_w):
    # Summing out an unknown attribute equals counting only the known ones in q,
    # because every combination has a prototype.
    float64 = torch.ones(len(COMBINATIONS), 3, dtype=torch.float64)  # float64 tables
    criterion = CROCSLoss(
        COMBINATIONS, 3, tau_w=tau_w, prototype_init=float64, partial_combinations=PARTIAL
    )
    table = criterion.weights[len(COMBINATIONS) :].numpy()
    for row, codes in zip(table, PARTIAL):
        known = codes >= 0
        q = 0.0 if math.isinf(tau_w) else (COMBINATIONS[:, known] == codes[known]).sum(1) / tau_w
        # An unknown class is summed out too: the mean of each class's row (the grid
        # gives every class as many consistent combinations).
        classes = [codes[0]] if codes[0] >= 0 else np.unique(COMBINATIONS[:, 0])
        expected = [np.where(COMBINATIONS[:, 0] == c, np.exp(q), 0.0) for c in classes]
        expected = np.mean([e / e.sum() for e in expected], axis=0)
        np.testing.assert_allclose(row, expected, rtol=1e-12)
    np.testing.assert_array_equal(
        criterion.weights[: len(COMBINATIONS)].numpy(),
        attribute_weight_table(COMBINATIONS, tau_w=tau_w),
    )


@pytest.mark.parametrize("kind", ["soft", "hard"])
def test_loss_of_known_targets_is_unchanged_by_partial_rows(kind):
    rng = np.random.RandomState(3)
    init = torch.as_tensor(rng.randn(len(COMBINATIONS), 4), dtype=torch.float32)
    v = torch.as_tensor(rng.randn(9, 4), dtype=torch.float32)
    targets = torch.as_tensor(rng.randint(len(COMBINATIONS), size=9))
    plain = CROCSLoss(COMBINATIONS, 4, loss=kind, beta=0.2, prototype_init=init)
    assert plain.consistent is None and plain.weights.shape == (24, 24)
    # The computation before missing attributes existed, term by term.
    logits = plain.logits(v)
    before = torch.nn.functional.cross_entropy(
        logits, targets if kind == "hard" else plain.weights[targets]
    )
    assert torch.equal(plain.loss_parts(v, targets)[0], before)
    extended = CROCSLoss(
        COMBINATIONS, 4, loss=kind, beta=0.2, prototype_init=init, partial_combinations=PARTIAL
    )
    torch.testing.assert_close(extended(v, targets), plain(v, targets), rtol=1e-6, atol=0)


def test_partial_hard_loss_gradcheck():
    rng = np.random.RandomState(0)
    criterion = CROCSLoss(
        COMBINATIONS,
        4,
        loss="hard",
        beta=0.2,
        prototype_init=torch.as_tensor(rng.randn(24, 4)),
        partial_combinations=PARTIAL,
    )
    v = torch.as_tensor(rng.randn(5, 4)).requires_grad_()
    p = criterion.prototypes.detach().clone().requires_grad_()
    targets = torch.tensor([0, 24, 25, 26, 27])

    def total_loss(v, p):
        return torch.func.functional_call(criterion, {"prototypes": p}, (v, targets))

    assert torch.autograd.gradcheck(total_loss, (v, p))


@pytest.mark.parametrize(
    ("partial", "message"),
    [
        (np.array([[0, 0]]), r"must have shape \(n_partial, 3\)"),
        (np.array([[0, 5, -1]]), "no combination agrees with"),
    ],
)
def test_invalid_partial_combinations(partial, message):
    with pytest.raises(ValueError, match=message):
        CROCSLoss(COMBINATIONS, 4, partial_combinations=partial)


# ---------------------------------------------------------- unlabelled ECGs
def _naive_pseudo_label_terms(v, p, combinations, *, tau_s, threshold):
    """-log P(c_i | v_i) of each ECG whose top class probability exceeds ``threshold``, else 0.

    P(c | v) is the softmax over prototypes summed over the prototypes of class c.
    """
    v = v.detach().double().numpy()
    p = p.detach().double().numpy()
    terms = []
    for i in range(len(v)):
        s = [
            float(v[i] @ p[k]) / (np.linalg.norm(v[i]) * np.linalg.norm(p[k])) / tau_s
            for k in range(len(p))
        ]
        denominator = sum(math.exp(x) for x in s)
        p_class = {}
        for k, combination in enumerate(combinations):
            p_class[combination[0]] = (
                p_class.get(combination[0], 0.0) + math.exp(s[k]) / denominator
            )
        top = max(p_class.values())
        terms.append(-math.log(top) if top > threshold else 0.0)
    return terms


@pytest.mark.parametrize(("weight", "threshold"), [(0.0, 0.5), (1.0, 0.5), (0.3, 0.9), (1.0, 0.0)])
@pytest.mark.parametrize(("kind", "tau_w"), [("soft", 0.5), ("hard", 1.0)])
def test_unlabelled_loss_matches_naive_loop(kind, tau_w, weight, threshold):
    rng = np.random.RandomState(1)
    # Full combinations, partly known ones (rows of PARTIAL) and unlabelled ECGs (-1), mixed.
    targets = np.array([3, -1, 24, 7, -1, 26, 0, -1, -1, 20, -1, -1])
    v = torch.as_tensor(rng.randn(len(targets), 5))
    criterion = CROCSLoss(
        COMBINATIONS,
        5,
        tau_w=tau_w,
        beta=0.0,
        loss=kind,
        prototype_init=torch.as_tensor(rng.randn(len(COMBINATIONS), 5)),
        partial_combinations=PARTIAL,
        unlabelled_weight=weight,
        unlabelled_threshold=threshold,
    )
    nce, _ = criterion.loss_parts(v, torch.as_tensor(targets))
    labelled = targets >= 0
    codes = np.vstack([COMBINATIONS, PARTIAL])[targets[labelled]]
    labelled_sum = labelled.sum() * _naive_partial_nce(
        v[labelled], criterion.prototypes, codes, COMBINATIONS, tau_s=0.1, tau_w=tau_w, kind=kind
    )
    terms = _naive_pseudo_label_terms(
        v[~labelled], criterion.prototypes, COMBINATIONS, tau_s=0.1, threshold=threshold
    )
    if threshold == 0.5:  # the case is only a test if some ECGs are confident and some not
        assert 0 < sum(t > 0 for t in terms) < len(terms)
    expected = (labelled_sum + weight * sum(terms)) / len(targets)
    np.testing.assert_allclose(nce.item(), expected, rtol=1e-12)


def test_pseudo_labels_pull_confident_ecgs_only():
    rng = np.random.RandomState(2)
    init = torch.as_tensor(rng.randn(len(COMBINATIONS), 4))
    criterion = CROCSLoss(COMBINATIONS, 4, beta=0.0, prototype_init=init, unlabelled_threshold=0.7)
    v = torch.as_tensor(rng.randn(8, 4)).requires_grad_()
    targets = torch.full((8,), -1)
    criterion(v, targets).backward()
    log_pc = criterion.class_log_proba(criterion.logits(v.detach()))
    confident = log_pc.max(dim=1).values > math.log(0.7)
    assert 0 < confident.sum() < 8
    # No gradient for the others; a step raises the confident ones' top class probability.
    assert torch.equal(v.grad[~confident], torch.zeros_like(v.grad[~confident]))
    stepped = criterion.class_log_proba(criterion.logits(v.detach() - 0.5 * v.grad * 8))
    assert (stepped.max(dim=1).values[confident] > log_pc.max(dim=1).values[confident]).all()
    np.testing.assert_allclose(log_pc.exp().sum(dim=1).detach().numpy(), 1.0, rtol=1e-12)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"unlabelled_weight": -1}, "unlabelled_weight must be non-negative"),
        ({"unlabelled_threshold": 1.0}, r"unlabelled_threshold must be in \[0, 1\)"),
    ],
)
def test_invalid_unlabelled_parameters(params, message):
    with pytest.raises(ValueError, match=message):
        CROCSLoss(COMBINATIONS, 4, **params)
