"""Each baseline's loss (and label step), vectorised, against a naive per-sample loop."""

import itertools
import math

import numpy as np
import pandas as pd
import pytest
import torch

from sklearn_crocs.baselines import map_clusters
from sklearn_crocs.baselines._deepcluster import balanced_cross_entropy, reassign_empty_clusters
from sklearn_crocs.baselines._dtc import DTCLoss
from sklearn_crocs.baselines._dtcr import fake_copies, kmeans_loss, spectral_indicator
from sklearn_crocs.baselines._ep import PrototypeAutoencoder, PrototypeAutoencoderLoss
from sklearn_crocs.baselines._iic import IICLoss, iic_loss, perturb
from sklearn_crocs.baselines._sela import sinkhorn_knopp

COMBINATIONS = np.array(list(itertools.product([0, 1], [0, 1], [0, 1, 2])))


def test_dtc_loss_matches_naive_loop():
    rng = np.random.RandomState(0)
    tau_w, alpha = 0.7, 1.5
    prototypes = rng.randn(len(COMBINATIONS), 5)
    criterion = DTCLoss(COMBINATIONS, 5, tau_w=tau_w, alpha=alpha, prototype_init=prototypes)
    embeddings = rng.randn(9, 5)
    target = rng.randint(0, len(COMBINATIONS), 9)
    kl, reg = criterion.loss_parts(torch.tensor(embeddings), torch.tensor(target))

    total = 0.0
    for v, i in zip(embeddings, target):
        v = v / np.linalg.norm(v)
        q = []
        for p in prototypes:
            p = p / np.linalg.norm(p)
            q.append((1 + np.sum((v - p) ** 2) / alpha) ** (-(alpha + 1) / 2))
        p_i = np.array(q) / sum(q)
        same = [j for j in range(len(COMBINATIONS)) if COMBINATIONS[j, 0] == COMBINATIONS[i, 0]]
        n_equal = {j: np.sum(COMBINATIONS[i] == COMBINATIONS[j]) for j in same}
        w = {j: math.exp(n_equal[j] / tau_w) / sum(math.exp(n_equal[m] / tau_w) for m in same)
             for j in same}  # fmt: skip
        z = {j: math.exp(w[j]) / sum(math.exp(w[m]) for m in same) for j in same}
        total += sum(z[j] * math.log(z[j] / p_i[j]) for j in same)
    assert kl.item() == pytest.approx(total / len(target), rel=1e-10)
    assert reg.item() == 0.0


def test_dtc_target_is_uniform_over_the_class_for_infinite_tau_w():
    criterion = DTCLoss(COMBINATIONS, 4, tau_w=math.inf)
    table = criterion.target_table.numpy()
    assert np.allclose(table[0, :6], 1 / 6) and np.all(table[0, 6:] == 0)


def test_prototype_autoencoder_loss_matches_naive_loop():
    torch.manual_seed(0)
    encoder = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(2 * 7, 3))
    module = PrototypeAutoencoder(encoder, 2, 7, 3, n_prototypes=4, n_classes=2).double()
    x = torch.randn(5, 2, 7, dtype=torch.float64)
    target = torch.tensor([0, 1, 1, 0, 1])
    loss = PrototypeAutoencoderLoss(0.5, 2.0, 3.0)(module(x), target)

    codes = encoder(x).detach().numpy()
    recon = module.decoder(encoder(x)).detach().numpy().reshape(5, 2, 7)
    protos = module.prototypes.detach().numpy()
    weight, bias = module.head.weight.detach().numpy(), module.head.bias.detach().numpy()
    d = [[float(np.sum((c - p) ** 2)) for p in protos] for c in codes]
    ce = 0.0
    for i in range(5):
        logits = [sum(weight[k, j] * d[i][j] for j in range(4)) + bias[k] for k in range(2)]
        ce -= logits[target[i]] - math.log(sum(math.exp(v) for v in logits))
    squared_error = sum(
        (recon[i, c, t] - x[i, c, t].item()) ** 2
        for i in range(5)
        for c in range(2)
        for t in range(7)
    )
    r1 = sum(min(d[i][j] for i in range(5)) for j in range(4)) / 4
    r2 = sum(min(d[i][j] for j in range(4)) for i in range(5)) / 5
    expected = ce / 5 + 0.5 * squared_error / 70 + 2.0 * r1 + 3.0 * r2
    assert loss.item() == pytest.approx(expected, rel=1e-10)


def test_balanced_cross_entropy_matches_naive_loop():
    rng = np.random.RandomState(0)
    logits = rng.randn(8, 3)
    labels = np.array([0, 0, 0, 0, 0, 1, 2, 2])
    counts = np.bincount(labels, minlength=3)
    loss = balanced_cross_entropy(
        torch.tensor(logits), torch.tensor(labels), torch.tensor(counts)
    ).item()
    numerator = denominator = 0.0
    for row, label in zip(logits, labels):
        ce = -(row[label] - math.log(sum(math.exp(v) for v in row)))
        numerator += ce / counts[label]
        denominator += 1 / counts[label]
    assert loss == pytest.approx(numerator / denominator, rel=1e-10)


def test_reassign_empty_clusters_fills_them_from_one_cluster_each():
    rng = np.random.RandomState(0)
    features = rng.randn(30, 4)
    labels = np.repeat([0, 3], 15)  # clusters 1, 2 and 4 are empty
    centroids = np.stack([features[labels == k].mean(0) if k in (0, 3) else np.zeros(4)
                          for k in range(5)])  # fmt: skip
    new = reassign_empty_clusters(features, labels, centroids, np.random.default_rng(0))
    assert np.all(np.bincount(new, minlength=5) > 0)
    # Only moves: ECGs either keep their cluster or move to a formerly empty one.
    moved = new != labels
    assert set(new[moved]) <= {1, 2, 4}
    unchanged = reassign_empty_clusters(features, new, centroids, np.random.default_rng(0))
    assert np.array_equal(unchanged, new)


def test_iic_loss_matches_naive_loop():
    rng = np.random.RandomState(0)
    p = torch.softmax(torch.tensor(rng.randn(6, 3)), 1)
    q = torch.softmax(torch.tensor(rng.randn(6, 3)), 1)
    loss = iic_loss(p, q).item()
    joint = np.zeros((3, 3))
    for i in range(6):
        for a in range(3):
            for b in range(3):
                joint[a, b] += p[i, a].item() * q[i, b].item() / 6
    joint = np.maximum((joint + joint.T) / 2, np.finfo(np.float32).eps)
    mi = sum(
        joint[a, b] * math.log(joint[a, b] / (joint[a].sum() * joint[:, b].sum()))
        for a in range(3)
        for b in range(3)
    )
    assert loss == pytest.approx(-mi, rel=1e-10)


def test_iic_loss_is_lowest_for_confident_balanced_agreeing_clusters():
    one_hot = torch.eye(3)[[0, 1, 2] * 4]
    # Both views in the same confident, balanced clusters: I = log 3 (the most).
    assert iic_loss(one_hot, one_hot).item() == pytest.approx(-math.log(3), abs=1e-4)
    unrelated = torch.eye(3)[[0] * 4 + [1] * 4 + [2] * 4]
    assert iic_loss(one_hot, unrelated).item() > -0.5 * math.log(3)


@pytest.mark.parametrize("kind", ["noise", "scale", "shift"])
def test_perturbations(kind):
    torch.manual_seed(0)
    x = torch.randn(4, 2, 50)
    out = perturb(x, kind, 0.2)
    assert out.shape == x.shape and not torch.equal(out, x)
    if kind == "shift":  # each ECG is a circular shift of itself, all leads alike
        for original, shifted in zip(x, out):
            assert any(torch.equal(torch.roll(original, s, -1), shifted) for s in range(-10, 11))
    assert torch.equal(perturb(x, kind, 0.0), x)


def test_sinkhorn_knopp_matches_naive_loop():
    rng = np.random.RandomState(0)
    probs = rng.dirichlet(np.ones(3), size=7)
    lam = 2.0
    q = sinkhorn_knopp(torch.log(torch.tensor(probs)), lam).numpy()

    naive = [[probs[i, k] ** lam for k in range(3)] for i in range(7)]
    for _ in range(1000):
        for k in range(3):  # every cluster gets 1/K of the mass
            column = sum(naive[i][k] for i in range(7))
            for i in range(7):
                naive[i][k] /= column * 3
        for i in range(7):  # every ECG gets 1/N
            row = sum(naive[i])
            naive[i] = [v / (row * 7) for v in naive[i]]
    assert np.allclose(q, naive, atol=1e-9)
    assert np.allclose(q.sum(1), 1 / 7) and np.allclose(q.sum(0), 1 / 3, atol=1e-6)


def test_sinkhorn_knopp_spreads_labels_the_network_puts_in_one_cluster():
    probs = np.random.RandomState(0).dirichlet([20, 1, 1], size=30)
    assert np.all(probs.argmax(1) == 0)
    q = sinkhorn_knopp(torch.log(torch.tensor(probs)), 25.0)
    assert np.bincount(q.argmax(1).numpy(), minlength=3).min() >= 5


def test_kmeans_loss_matches_naive_loop():
    rng = np.random.RandomState(0)
    h = rng.randn(6, 4)
    f = np.linalg.qr(rng.randn(6, 2))[0]
    loss = kmeans_loss(torch.tensor(h), torch.tensor(f)).item()
    gram = [[float(h[i] @ h[j]) for j in range(6)] for i in range(6)]
    trace = sum(gram[i][i] for i in range(6))
    projected = sum(f[i, c] * f[j, c] * gram[i][j] for c in range(2) for i in range(6)
                    for j in range(6))  # fmt: skip
    assert loss == pytest.approx(trace - projected, rel=1e-10)


def test_kmeans_loss_relaxation_bounds_the_within_cluster_sum_of_squares():
    rng = np.random.RandomState(0)
    labels = np.repeat([0, 1, 2], 4)
    h = torch.tensor(rng.randn(3, 5)[labels] + 0.1 * rng.randn(12, 5))
    indicator = np.zeros((12, 3))
    indicator[np.arange(12), labels] = 1
    indicator /= np.sqrt(indicator.sum(0))  # the normalised cluster indicator
    within = sum(((h[labels == k] - h[labels == k].mean(0)) ** 2).sum().item() for k in range(3))
    assert kmeans_loss(h, torch.tensor(indicator)).item() == pytest.approx(within)
    relaxed = kmeans_loss(h, spectral_indicator(h, 3)).item()
    assert 0 <= relaxed <= within + 1e-9


def test_fake_copies_match_naive_loop():
    x = torch.randn(3, 2, 20)
    torch.manual_seed(1)
    fake = fake_copies(x, 0.25)
    torch.manual_seed(1)  # the same draws, applied one time point at a time
    chosen = torch.rand(3, 20).argsort(dim=1)[:, :5]
    order = torch.rand(3, 5).argsort(dim=1)
    naive = x.clone()
    for b in range(3):
        for k in range(5):
            naive[b, :, chosen[b, k]] = x[b, :, chosen[b, order[b, k]]]
    assert torch.equal(fake, naive)
    assert torch.equal(fake.sort(-1).values, x.sort(-1).values)  # the same values


def test_map_clusters_matches_naive_loop():
    rng = np.random.RandomState(0)
    y = pd.DataFrame({"a": rng.choice(["x", "y"], 40), "b": rng.choice([1, 2], 40)})
    labels = rng.randint(0, 5, 40)
    labels[labels == 4] = 3  # cluster 4 is empty
    mapping = map_clusters(labels, y, n_clusters=5)
    rows = [tuple(r) for r in y.itertuples(index=False)]
    overall = max(set(rows), key=lambda r: (rows.count(r), -rows.index(r)))
    for cluster in range(5):
        members = [r for r, c in zip(rows, labels) if c == cluster]
        # most frequent; ties to the combination met first in y
        expected = max(set(members), key=lambda r: (members.count(r), -rows.index(r))) \
            if members else overall  # fmt: skip
        assert tuple(mapping.iloc[cluster]) == expected
    assert list(mapping.dtypes) == list(y.dtypes)


def test_map_clusters_hungarian_matches_brute_force():
    rng = np.random.RandomState(1)
    y = rng.choice(["p", "q", "r"], 30)
    labels = rng.randint(0, 3, 30)
    mapping = map_clusters(labels, y, method="hungarian")["attribute_0"].tolist()
    assert sorted(mapping) == ["p", "q", "r"]

    def matched(names):
        return sum(y[i] == names[labels[i]] for i in range(30))

    best = max(matched(p) for p in itertools.permutations(["p", "q", "r"]))
    assert matched(mapping) == best


@pytest.mark.parametrize(
    ("labels", "message"),
    [([0, 1], "one cluster per row"), ([0, -1, 1], "non-negative"), ([0.5, 1, 1], "integer")],
)
def test_map_clusters_rejects_bad_labels(labels, message):
    with pytest.raises(ValueError, match=message):
        map_clusters(labels, ["a", "b", "a"])


def test_iic_training_loss_is_the_trained_heads_sub_head_mean_offset_to_be_non_negative():
    # Two sub-heads per head: the main head's agree perfectly (loss 0), the
    # over-clustering head's are uniform (no information: loss log 6).
    main = torch.eye(3)[[0, 1, 2] * 4][:, None].expand(-1, 2, -1)
    over = torch.full((12, 2, 6), 1 / 6)
    criterion = IICLoss()
    assert criterion((main, main, over, over), None).item() == pytest.approx(0.0, abs=1e-4)
    criterion.head = 1
    assert criterion((main, main, over, over), None).item() == pytest.approx(math.log(6))
    # The validation loss is the main head's, whichever head trains.
    assert criterion.eval()((main, main, over, over), None).item() == pytest.approx(0, abs=1e-4)
