"""The CROCS paper's hyperparameters as CROCSClusterer parameters, per dataset."""

__all__ = ["paper_params"]

# Transcribed from Kiyasseh, Zhu & Clifton (NeurIPS 2021); where each value
# is stated is in paper_params's docstring and in tests/test_paper.py.
_SHARED = {
    "tau_s": 0.1,
    "tau_w": 1.0,
    "beta": 0.2,
    "loss": "soft",
    "reg_reduction": "sum",
    "prototypes": "learned",
    "ordinal": None,
    "augment": None,
    "lr_schedule": "constant",
    "ensemble_size": 1,  # the paper trains one network
}
_DATASETS = {
    "chapman": {
        "encoder": "cnn",
        "encoder_params": {
            "channels": (4, 16, 32),
            "kernel_size": 7,
            "stride": 3,
            "pool_size": 2,
            "dropout": 0.1,
            "output_relu": True,
        },
        "embedding_dim": 128,
        "batch_size": 256,
        "lr": 1e-4,
        "working_rate": 250.0,
    },
    "ptbxl": {
        "encoder": "resnet",
        "encoder_params": {
            "channels": (64, 128, 256, 512),
            "stem_kernel_size": 7,
            "kernel_size": 3,
        },
        "embedding_dim": 256,
        "batch_size": 128,
        "lr": 1e-5,
        "working_rate": 500.0,
    },
}


def paper_params(dataset):
    """The CROCS paper's :class:`CROCSClusterer` parameters for Chapman or PTB-XL.

    ``CROCSClusterer(**paper_params("ptbxl"))`` is the paper's CP CROCS as
    its text and tables state it, where the estimator's defaults were
    chosen on the bundled PTB-XL sample instead (see :ref:`defaults`). The
    function sits next to :class:`CROCSClusterer` because these are that
    estimator's parameters (the loaders in :mod:`sklearn_crocs.datasets`
    give data, not models); the baselines take the shared training
    parameters (encoder, embedding size, learning rate, batch size) too.

    Read more in the :ref:`User Guide <paper_settings>`.

    Parameters
    ----------
    dataset : {"chapman", "ptbxl"}
        The paper's dataset.

    Returns
    -------
    params : dict
        A new dict on each call, keyword arguments of :class:`CROCSClusterer`:

        - ``tau_s=0.1``, ``tau_w=1.0``, ``beta=0.2`` (Sec. 5,
          "Hyperparameters");
        - ``loss="soft"`` with ``reg_reduction="sum"``: the objective
          NCE-soft + L_reg, with L_reg a sum over prototype pairs (Eq. 3);
        - ``prototypes="learned"``: CP CROCS, the paper's method;
        - ``ordinal=None``: every attribute nominal, as the indicators of
          Eq. 2 and the Hamming distance of Eq. 3 treat them;
        - ``augment=None``: whole 2500-sample frames, no augmentation
          (Appendix A names none);
        - ``lr_schedule="constant"``: Adam at a fixed learning rate (the
          paper names no schedule);
        - ``ensemble_size=1``: one network, as the paper trains;
        - Chapman: ``encoder="cnn"`` with the layers of Table 5 (spelled
          out in ``encoder_params``), ``embedding_dim=128``,
          ``batch_size=256``, ``lr=1e-4`` (Sec. 5, Table 6), and
          ``working_rate=250.0`` (Appendix A.1: frames downsampled to
          250 Hz);
        - PTB-XL: ``encoder="resnet"`` at ResNet18's widths with one basic
          block per stage (``encoder_params``: channels 64 to 512, stem
          kernel 7, block kernel 3, ResNet18's, in 1-D; Appendix B),
          ``embedding_dim=256``, ``batch_size=128``, ``lr=1e-5`` (Sec. 5,
          Table 6), ``working_rate=500.0`` (Appendix A.1).

        The optimiser is Adam, as the paper's (Table 6).

    Notes
    -----
    What the paper does not state keeps the estimator's defaults:
    ``max_epochs`` (no epoch count is given for CROCS),
    ``validation_fraction`` (whether it stopped early is not said), the
    weight and prototype initialisation. What belongs to the data is left
    to it: the frames (2500 samples; on Chapman each lead of a frame is an
    instance, Table 5's one input channel, see
    :func:`~sklearn_crocs.preprocessing.leads_as_instances`), their
    normalisation (Chapman to [0, 1], PTB-XL standardised:
    :func:`~sklearn_crocs.preprocessing.normalize_frames`) and the age
    quartiles (bin age first, or add ``continuous={"age": 4}`` for a
    column named ``"age"``). ``working_rate`` is used only when
    ``sampling_rate`` is given.

    With ``lr=1e-5`` and no augmentation, a few hundred patients and the
    default 40 epochs train far less than the paper's 22,670 frames did;
    :ref:`reproducing` reports both configurations on the bundled data.

    Examples
    --------
    >>> from sklearn_crocs import CROCSClusterer, paper_params
    >>> params = paper_params("ptbxl")
    >>> params["embedding_dim"], params["batch_size"], params["lr"]
    (256, 128, 1e-05)
    >>> model = CROCSClusterer(**params)
    >>> model.tau_w, model.beta, model.reg_reduction
    (1.0, 0.2, 'sum')
    >>> paper_params("chapman")["encoder"]
    'cnn'
    """
    if dataset not in _DATASETS:
        raise ValueError(
            f"dataset must be one of {sorted(_DATASETS)} (the paper's datasets); got {dataset!r}."
        )
    own = _DATASETS[dataset]
    return {**_SHARED, **own, "encoder_params": dict(own["encoder_params"])}
