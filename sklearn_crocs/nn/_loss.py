"""The CROCS objective: NCE-hard, NCE-soft and the prototype arrangement regulariser."""

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["CROCSLoss", "attribute_weight_table"]


def _as_combinations(combinations):
    combinations = np.asarray(combinations)
    if combinations.ndim != 2 or combinations.shape[0] == 0:
        raise ValueError(
            "combinations must be a non-empty 2-D array of shape "
            f"(n_prototypes, n_attributes); got shape {combinations.shape}."
        )
    return combinations


def _check_ordinal(ordinal, combinations):
    """``ordinal`` as a boolean mask over the attributes (all False for None)."""
    n_attributes = combinations.shape[1]
    if ordinal is None:
        return np.zeros(n_attributes, dtype=bool)
    ordinal = np.asarray(ordinal)
    if ordinal.dtype != bool or ordinal.shape != (n_attributes,):
        raise ValueError(
            f"ordinal must be None or {n_attributes} booleans, one per attribute; got {ordinal!r}."
        )
    if ordinal.any() and not np.issubdtype(combinations.dtype, np.number):
        raise ValueError(
            "ordinal attributes need numeric codes (their ranks) in combinations; "
            f"got dtype {combinations.dtype}."
        )
    return ordinal


def _mismatches(combinations, ordinal):
    """Summed attribute distances between combinations, shape (n, n).

    A nominal attribute counts 0 (equal) or 1 (different); an ordinal one
    the distance between the ranks, ``|rank_i - rank_j|``.
    """
    total = np.zeros((len(combinations), len(combinations)))
    for a, is_ordinal in enumerate(ordinal):
        column = combinations[:, a]
        if is_ordinal:
            total += np.abs(column[:, None].astype(float) - column[None, :])
        else:
            total += column[:, None] != column[None, :]
    return total


def _consistent(partial, combinations):
    """``mask[r, j]``: combination ``j`` has every known (not ``-1``) value of ``partial[r]``."""
    return ((partial[:, None, :] == combinations[None]) | (partial[:, None, :] < 0)).all(-1)


def attribute_weight_table(combinations, *, class_attribute=0, tau_w=1.0, ordinal=None):
    """Soft-assignment weights ``w[i, j]`` between attribute combinations.

    For an ECG with attribute combination ``A_i`` and a prototype with ``A_j``,
    ``q(A_i, A_j) = (number of equal attributes) / tau_w`` and (CROCS, Eq. 2)::

        w[i, j] = exp(q_ij) / sum_{l: class_l == class_i} exp(q_il)  if class_j == class_i
        w[i, j] = 0                                                   otherwise

    With ``ordinal``, an ordinal attribute (age groups, say) contributes
    ``1 - |rank_i - rank_j|`` instead of 1 or 0 to the count, so that a
    neighbouring age group weighs more than a distant one:
    ``q = (n_attributes - sum_a d_a(A_i, A_j)) / tau_w`` with ``d_a`` the 0/1
    mismatch of a nominal attribute and the rank distance of an ordinal one.

    The weights depend only on the two combinations, so the whole table is
    computed once per fit rather than per mini-batch.

    Read more in the :ref:`User Guide <method>`.

    Parameters
    ----------
    combinations : array-like of shape (n_prototypes, n_attributes)
        Attribute combination of each prototype (any comparable codes).
    class_attribute : int, default=0
        Column of ``combinations`` that holds the class attribute.
    tau_w : float, default=1.0
        Temperature of the weights. ``math.inf`` gives uniform weights over the
        prototypes of the same class.
    ordinal : array-like of bool of shape (n_attributes,), default=None
        Which attributes are ordinal; their codes in ``combinations`` are
        their ranks. None: every attribute is nominal.

    Returns
    -------
    weights : ndarray of shape (n_prototypes, n_prototypes), dtype float64
        Row ``i`` is the target distribution of an ECG whose attributes are
        ``combinations[i]``; each row sums to one.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_crocs.nn import attribute_weight_table
    >>> combos = np.array([[0, 0], [0, 1], [1, 0], [1, 1]])
    >>> attribute_weight_table(combos, tau_w=1.0).round(3)
    array([[0.731, 0.269, 0.   , 0.   ],
           [0.269, 0.731, 0.   , 0.   ],
           [0.   , 0.   , 0.731, 0.269],
           [0.   , 0.   , 0.269, 0.731]])

    With an ordinal second attribute of three ranks, rank 2 is further from
    rank 0 than rank 1 is:

    >>> ranks = np.array([[0, 0], [0, 1], [0, 2]])
    >>> attribute_weight_table(ranks, ordinal=[False, True])[0].round(3)
    array([0.665, 0.245, 0.09 ])
    """
    combinations = _as_combinations(combinations)
    if not tau_w > 0:
        raise ValueError(f"tau_w must be positive (or math.inf); got {tau_w!r}.")
    ordinal = _check_ordinal(ordinal, combinations)
    n_equal = combinations.shape[1] - _mismatches(combinations, ordinal)
    same_class = combinations[:, None, class_attribute] == combinations[None, :, class_attribute]
    q = np.zeros(n_equal.shape) if math.isinf(tau_w) else n_equal / tau_w
    q = np.where(same_class, q, -np.inf)
    q -= q.max(axis=1, keepdims=True)  # stable softmax; the diagonal is finite
    weights = np.exp(q)
    return weights / weights.sum(axis=1, keepdims=True)


def _check_partial(partial, combinations):
    partial = np.asarray(partial)
    if partial.ndim != 2 or partial.shape[1] != combinations.shape[1]:
        raise ValueError(
            f"partial_combinations must have shape (n_partial, {combinations.shape[1]}); "
            f"got shape {partial.shape}."
        )
    if not _consistent(partial, combinations).any(axis=1).all():
        raise ValueError("partial_combinations has rows that no combination agrees with.")
    return partial


class CROCSLoss(nn.Module):
    """CROCS contrastive loss that owns the clinical prototypes.

    The prototypes are an :class:`torch.nn.Parameter` of shape
    ``(n_prototypes, embedding_dim)``, one per attribute combination, so that
    a skorch net using this module as its criterion optimises them together
    with the encoder. With ``s(v, p) = cos(v, p) / tau_s`` and ``B`` the batch
    size, the loss is

    - ``loss="hard"``: ``-1/B sum_i log softmax_k s(v_i, p_k)`` at the prototype
      of the ECG's own combination (NCE-hard, Eq. 1);
    - ``loss="soft"``: ``-1/B sum_i sum_j w_ij log softmax_j s(v_i, p_j)`` with
      the weights of :func:`attribute_weight_table` (NCE-soft, Eq. 2);

    plus, when ``beta > 0``, the arrangement regulariser over ordered pairs of
    prototypes of the same class (Eq. 3)::

        L_reg = sum_{j, k: class_j == class_k} (||p_j - p_k|| - beta * Hamming(A_j, A_k))^2

    (with ``ordinal`` attributes, the Hamming distance counts their rank
    distance instead of 0 or 1, as in the weights) with L2-normalised
    prototypes, or with ``reg_reduction="mean"`` its mean
    over the ordered pairs ``j != k`` (the paper's text calls the term a
    mean-squared error; Eq. 3 writes the sum). Log-softmax is evaluated
    stably in the dtype of the inputs (float32 or float64).

    An ECG whose attributes are only partly known (``partial_combinations``)
    is assigned to the set ``C_i`` of prototypes consistent with its known
    attributes: the hard loss is ``-log sum_{j in C_i} softmax_j s(v_i, p_j)``
    and the soft weights are the mean of the weight rows of the combinations
    in ``C_i`` (Eq. 2 with the unknown attributes summed out; as all
    combinations have a prototype, this is Eq. 2 with ``q`` counting the
    known attributes only). The regulariser depends on the prototypes alone,
    so missing attributes do not change it.

    An unlabelled ECG (target ``-1``) has no attributes to be pulled to. Its
    class probabilities ``P(c | v_i)`` are the softmax probabilities summed
    over the prototypes of each class; where the largest exceeds
    ``unlabelled_threshold``, that class becomes its pseudo-label and it adds
    ``-unlabelled_weight * log P(c_i | v_i)`` (self-training on confident
    pseudo-labels, as in Lee 2013 and FixMatch; the choice of ``c_i`` carries
    no gradient). Each ECG's term is divided by the whole batch size ``B``,
    so a batch without unlabelled ECGs gives the loss above unchanged.

    Read more in the :ref:`User Guide <method>`.

    Parameters
    ----------
    combinations : array-like of shape (n_prototypes, n_attributes)
        Attribute combination (integer codes or any comparable values) of each
        prototype. Targets passed to :meth:`forward` index its rows.
    embedding_dim : int
        Dimension of the embeddings and prototypes.
    class_attribute : int, default=0
        Column of ``combinations`` that holds the class attribute.
    tau_s : float, default=0.1
        Temperature of the cosine similarity.
    tau_w : float, default=1.0
        Temperature of the soft weights; ``math.inf`` for uniform same-class
        weights. Ignored for ``loss="hard"``.
    beta : float, default=0.2
        Desired distance per attribute mismatch in the regulariser; ``0``
        disables the regulariser.
    loss : {"soft", "hard"}, default="soft"
        Assignment of ECGs to prototypes.
    reg_reduction : {"sum", "mean"}, default="sum"
        Sum (Eq. 3) or mean of the regulariser's terms over the ordered
        same-class pairs. With 16 prototypes of 2 classes the sum has 112
        terms, so at initialisation it is about 30 times the NCE term.
    prototype_init : array-like of shape (n_prototypes, embedding_dim), default=None
        Initial prototypes. By default, unit vectors in uniformly random
        directions drawn with torch's current random state (only directions
        matter to the loss, and unit length keeps Adam's steps meaningful
        relative to the prototypes' size). A floating-point
        ``prototype_init`` also sets the dtype of the parameter and buffers
        (e.g. float64 for gradient checks); otherwise torch's default dtype.
    partial_combinations : array-like of shape (n_partial, n_attributes), default=None
        Attribute combinations with missing values, coded ``-1`` (the codes
        of ``combinations`` must then be non-negative integers). Target
        ``n_prototypes + r`` stands for an ECG with the known attributes of
        row ``r``; the class may be unknown too (see ``missing_class``).
    ordinal : array-like of bool of shape (n_attributes,), default=None
        Which attributes are ordinal (codes are ranks): their rank distance
        replaces the 0/1 mismatch in the soft weights and in the
        regulariser's Hamming distance. None: every attribute is nominal.
    unlabelled_weight : float, default=1.0
        Weight of the pseudo-label term of unlabelled ECGs (target ``-1``).
    unlabelled_threshold : float, default=0.99
        Class probability above which an unlabelled ECG gets a pseudo-label.
    missing_class : {"uniform", "posterior"}, default="uniform"
        Soft weights of a target whose class is unknown (a row of
        ``partial_combinations`` with the class ``-1``): ``"uniform"``, the mean
        of the consistent combinations' rows, every class alike;
        ``"posterior"``, the mean rows of each class's consistent combinations
        weighted by the ECG's class probability ``P(c | v_i)`` (normalised
        over the consistent classes, without gradient): an EM-style soft
        completion of the class. Ignored for ``loss="hard"``, whose sum over
        the consistent prototypes needs no weights.

    Attributes
    ----------
    prototypes : torch.nn.Parameter of shape (n_prototypes, embedding_dim)
        The learnable clinical prototypes (used after L2 normalisation).
    weights : torch.Tensor of shape (n_prototypes + n_partial, n_prototypes)
        Buffer with the soft-assignment table (identity for ``loss="hard"``),
        one row per target; the rows of ``partial_combinations`` follow those
        of ``combinations``.
    consistent : torch.Tensor of shape (n_prototypes + n_partial, n_prototypes) or None
        Boolean buffer of the prototypes consistent with each target, for
        the hard loss with ``partial_combinations``; None otherwise.
    hamming : torch.Tensor of shape (n_prototypes, n_prototypes)
        Buffer with ``beta`` times the Hamming distances between combinations
        (rank distances for ordinal attributes).
    same_class : torch.Tensor of shape (n_prototypes, n_prototypes)
        Boolean buffer, True where two prototypes share the class attribute.
    class_members : torch.Tensor of shape (n_classes, n_prototypes)
        Boolean buffer, True where a prototype belongs to a class.

    Examples
    --------
    >>> import torch
    >>> from sklearn_crocs.nn import CROCSLoss
    >>> _ = torch.manual_seed(0)
    >>> combos = [[0, 0], [0, 1], [1, 0], [1, 1]]
    >>> criterion = CROCSLoss(combos, embedding_dim=8)
    >>> embeddings = torch.randn(5, 8)
    >>> targets = torch.tensor([0, 1, 2, 3, 0])
    >>> loss = criterion(embeddings, targets)
    >>> loss.shape, bool(loss > 0)
    (torch.Size([]), True)
    >>> nce, reg = criterion.loss_parts(embeddings, targets)
    >>> torch.allclose(nce + reg, loss)
    True

    Target 4 is an ECG of class 1 whose second attribute is unknown: its
    weight is spread evenly over the two prototypes of class 1.

    >>> partial = CROCSLoss(combos, embedding_dim=8, partial_combinations=[[1, -1]])
    >>> partial.weights[4].tolist()
    [0.0, 0.0, 0.5, 0.5]
    >>> bool(partial(embeddings[:2], torch.tensor([4, 0])) > 0)
    True

    Target -1 is an unlabelled ECG: it counts in the batch size, and adds a
    term only once its class is confident (here, it is not):

    >>> nce_labelled, _ = criterion.loss_parts(embeddings[:1], torch.tensor([0]))
    >>> nce_mixed, _ = criterion.loss_parts(embeddings[:2], torch.tensor([0, -1]))
    >>> bool(torch.allclose(nce_mixed, nce_labelled / 2))
    True
    """

    def __init__(
        self,
        combinations,
        embedding_dim,
        *,
        class_attribute=0,
        tau_s=0.1,
        tau_w=1.0,
        beta=0.2,
        loss="soft",
        reg_reduction="sum",
        prototype_init=None,
        partial_combinations=None,
        ordinal=None,
        unlabelled_weight=1.0,
        unlabelled_threshold=0.99,
        missing_class="uniform",
    ):
        super().__init__()
        combinations = _as_combinations(combinations)
        ordinal = _check_ordinal(ordinal, combinations)
        if loss not in ("soft", "hard"):
            raise ValueError(f"loss must be 'soft' or 'hard'; got {loss!r}.")
        if reg_reduction not in ("sum", "mean"):
            raise ValueError(f"reg_reduction must be 'sum' or 'mean'; got {reg_reduction!r}.")
        if not tau_s > 0:
            raise ValueError(f"tau_s must be positive; got {tau_s!r}.")
        if beta < 0:
            raise ValueError(f"beta must be non-negative; got {beta!r}.")
        if not unlabelled_weight >= 0:
            raise ValueError(f"unlabelled_weight must be non-negative; got {unlabelled_weight!r}.")
        if missing_class not in ("uniform", "posterior"):
            raise ValueError(
                f"missing_class must be 'uniform' or 'posterior'; got {missing_class!r}."
            )
        if not 0 <= unlabelled_threshold < 1:
            raise ValueError(
                f"unlabelled_threshold must be in [0, 1); got {unlabelled_threshold!r}."
            )
        n_prototypes = combinations.shape[0]
        self.tau_s = float(tau_s)
        self.beta = float(beta)
        self.loss = loss
        self.reg_reduction = reg_reduction
        self.unlabelled_weight = float(unlabelled_weight)
        self.unlabelled_threshold = float(unlabelled_threshold)

        if prototype_init is None:
            init = F.normalize(torch.randn(n_prototypes, embedding_dim), dim=1)
        else:
            init = torch.as_tensor(prototype_init)
            if not init.is_floating_point():
                init = init.to(torch.get_default_dtype())
            if init.shape != (n_prototypes, embedding_dim):
                raise ValueError(
                    f"prototype_init must have shape ({n_prototypes}, "
                    f"{embedding_dim}); got {tuple(init.shape)}."
                )
        self.prototypes = nn.Parameter(init.clone())

        if loss == "hard":
            weights = np.eye(n_prototypes)
        else:
            weights = attribute_weight_table(
                combinations, class_attribute=class_attribute, tau_w=tau_w, ordinal=ordinal
            )
        consistent = None
        classes = combinations[:, class_attribute]
        class_members = np.unique(classes)[:, None] == classes[None, :]
        # Targets whose class is unknown, weighted by the class posterior: the row of
        # each in ``completions`` (-1: none), the mean weight row of each class's
        # consistent combinations, and which classes are consistent.
        completion_row = np.full(n_prototypes, -1)
        completions = np.zeros((0, len(class_members), n_prototypes))
        if partial_combinations is not None:
            partial = _check_partial(partial_combinations, combinations)
            consistent = _consistent(partial, combinations)
            if missing_class == "posterior" and loss == "soft":
                no_class = np.flatnonzero(partial[:, class_attribute] < 0)
                rows = np.full(len(partial), -1)
                rows[no_class] = np.arange(len(no_class))
                completion_row = np.concatenate([completion_row, rows])
                each = consistent[no_class, None, :] & class_members[None]  # (r, C, P)
                sizes = each.sum(axis=2, keepdims=True)
                completions = each @ weights / np.maximum(sizes, 1)
            # Summing out the unknown attributes: mean of the consistent rows.
            weights = np.vstack(
                [weights, consistent @ weights / consistent.sum(axis=1, keepdims=True)]
            )
            consistent = np.vstack([np.eye(n_prototypes, dtype=bool), consistent])
        mismatches = _mismatches(combinations, ordinal)
        same_class = (
            combinations[:, None, class_attribute] == combinations[None, :, class_attribute]
        )
        dtype = init.dtype
        self.register_buffer("weights", torch.as_tensor(weights, dtype=dtype))
        self.register_buffer(
            "consistent",
            torch.as_tensor(consistent) if consistent is not None and loss == "hard" else None,
        )
        self.register_buffer("hamming", torch.as_tensor(self.beta * mismatches, dtype=dtype))
        self.register_buffer("same_class", torch.as_tensor(same_class))
        self.register_buffer("class_members", torch.as_tensor(class_members))
        self.register_buffer("completion_row", torch.as_tensor(completion_row, dtype=torch.long))
        self.register_buffer("completions", torch.as_tensor(completions, dtype=dtype))
        # Pairs j < k of the same class: the regulariser sums over ordered pairs,
        # which is twice the sum over these, and the diagonal contributes zero.
        j, k = np.nonzero(np.triu(same_class, k=1))
        self.register_buffer("_pair_j", torch.as_tensor(j, dtype=torch.long))
        self.register_buffer("_pair_k", torch.as_tensor(k, dtype=torch.long))

    @property
    def n_prototypes(self):
        """Number of prototypes."""
        return self.prototypes.shape[0]

    def logits(self, embeddings):
        """Scaled cosine similarities ``s(v_i, p_j)``, shape (n_samples, n_prototypes)."""
        v = F.normalize(embeddings, dim=1)
        p = F.normalize(self.prototypes.to(v.dtype), dim=1)
        return v @ p.T / self.tau_s

    def regularization(self):
        """Arrangement regulariser ``L_reg`` (zero when ``beta == 0``)."""
        if self.beta == 0 or self._pair_j.numel() == 0:
            return self.prototypes.new_zeros(())
        p = F.normalize(self.prototypes, dim=1)
        distance = torch.linalg.vector_norm(p[self._pair_j] - p[self._pair_k], dim=1)
        target = self.hamming[self._pair_j, self._pair_k].to(p.dtype)
        squares = (distance - target) ** 2
        # Each unordered pair stands for the two ordered ones: same mean, twice the sum.
        return squares.mean() if self.reg_reduction == "mean" else 2.0 * squares.sum()

    def loss_parts(self, embeddings, target):
        """Return ``(nce, reg)``, the two terms of the total loss.

        ``nce`` includes the pseudo-label term of unlabelled ECGs (target ``-1``).
        """
        logits = self.logits(embeddings)
        unlabelled = target < 0
        if unlabelled.any():
            # Sums over the batch divided by its size: the mean when all are labelled.
            labelled = ~unlabelled
            nce = self._nce(logits[labelled], target[labelled]) * labelled.sum()
            nce = nce + self.unlabelled_weight * self._pseudo_label_loss(logits[unlabelled])
            nce = nce / len(target)
        else:
            nce = self._nce(logits, target)
        return nce, self.regularization().to(nce.dtype)

    def _nce(self, logits, target):
        """Mean NCE term over ECGs with known (or partly known) attributes."""
        if len(target) == 0:
            return logits.new_zeros(())
        if self.loss == "hard" and self.consistent is not None:
            # -log of the probability summed over the consistent prototypes; for
            # a fully known ECG, the one term is its own prototype's.
            log_p = F.log_softmax(logits, dim=1).masked_fill(~self.consistent[target], -math.inf)
            return -torch.logsumexp(log_p, dim=1).mean()
        if self.loss == "hard":
            return F.cross_entropy(logits, target)
        weights = self.weights[target].to(logits.dtype)
        if len(self.completions):
            rows = self.completion_row[target]
            unknown = rows >= 0
            if unknown.any():
                # The class's completions weighted by the model's class posterior among the
                # consistent classes (detached: an E step, not a target to move).
                mixtures = self.completions[rows[unknown]].to(logits.dtype)  # (b, C, P)
                with torch.no_grad():
                    posterior = self.class_log_proba(logits[unknown]).exp()
                    posterior = posterior * (mixtures.sum(dim=2) > 0)
                    posterior = posterior / posterior.sum(dim=1, keepdim=True)
                weights = weights.clone()
                weights[unknown] = torch.einsum("bc,bcp->bp", posterior, mixtures)
        return F.cross_entropy(logits, weights)

    def class_log_proba(self, logits):
        """``log P(c | v_i)``, the softmax summed over each class's prototypes, (n, n_classes)."""
        log_p = F.log_softmax(logits, dim=1)
        return torch.logsumexp(log_p[:, None, :].masked_fill(~self.class_members, -math.inf), 2)

    def _pseudo_label_loss(self, logits):
        """Summed ``-log P(c_i | v_i)`` over the ECGs whose top class is confident."""
        log_pc = self.class_log_proba(logits)
        top, pseudo_label = log_pc.detach().max(dim=1)
        confident = top.exp() > self.unlabelled_threshold
        return -log_pc[confident, pseudo_label[confident]].sum()

    def forward(self, embeddings, target, return_parts=False):
        """Total loss for a batch.

        Parameters
        ----------
        embeddings : torch.Tensor of shape (batch_size, embedding_dim)
            Encoder outputs (normalised inside).
        target : torch.Tensor of shape (batch_size,), dtype long
            Row of ``combinations`` that holds each ECG's attributes,
            ``n_prototypes + r`` for row ``r`` of ``partial_combinations``,
            or ``-1`` for an unlabelled ECG.
        return_parts : bool, default=False
            Return the two parts, as :meth:`loss_parts` does, instead of
            their sum. (:class:`~sklearn_crocs.nn.CROCSNet` asks for them
            here, not through :meth:`loss_parts`: a ``DistributedDataParallel``
            wrapper syncs the prototypes' gradients only through ``forward``.)

        Returns
        -------
        loss : torch.Tensor or tuple of two torch.Tensor
            Scalar ``L_NCE + L_reg``, or ``(L_NCE, L_reg)``.
        """
        nce, reg = self.loss_parts(embeddings, target)
        return (nce, reg) if return_parts else nce + reg
