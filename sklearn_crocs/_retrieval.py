"""PrototypeRetriever: search an ECG database by attribute combination or by example."""

import os
import time
from collections.abc import Mapping
from numbers import Integral

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, MetaEstimatorMixin, _fit_context, clone
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import Pipeline
from sklearn.utils import deprecated
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ._ann import INDEX_PARAMS, FaissIndex
from ._display import DocLinkMixin
from ._engine._batches import embed_rows
from ._persistence._retriever import load_retriever, save_retriever
from ._search import half_squared_norms, top_k
from ._utils import (
    _atomic_path,
    _crocs_step,
    _length_groups,
    _n_rows,
    _python_value,
    _with_longer_signals,
)

__all__ = ["PrototypeRetriever"]

# Squared norms of float32-normalised embeddings differ from 1 by rounding
# (about 1e-7); within this spread the rows count as unit vectors, whose
# products alone rank them by distance.
_UNIT_NORM_SPREAD = 2.0**-20


class PrototypeRetriever(DocLinkMixin, MetaEstimatorMixin, BaseEstimator):
    """Retrieve the ECGs of a database that best match attribute combinations.

    The retrieval setting of CROCS (Kiyasseh, Zhu & Clifton, NeurIPS 2021):
    the ECGs of a database, typically unlabelled, are embedded once by a
    fitted :class:`~sklearn_crocs.CROCSClusterer`; :meth:`query` translates
    attribute combinations ("AFIB, female, over 70") into prototypes and
    returns the database ECGs nearest to them (``query()``: every prototype,
    the paper's setting), and :meth:`kneighbors` does the same for example
    ECGs, as scikit-learn's ``kneighbors`` does for points.

    Read more in the :ref:`User Guide <retrieval>`.

    Parameters
    ----------
    estimator : CROCSClusterer or Pipeline ending in one
        Gives the embeddings (``transform``) and the prototypes
        (``get_prototypes``). ``fit(X, y)`` fits a clone of it; ``fit(X)``
        uses it as it is, so it must be fitted already (plain, or wrapped in
        :class:`sklearn.frozen.FrozenEstimator`).
    n_neighbors : int, default=10
        Number of ECGs retrieved per query by default (the paper's K).
    prototypes : {"learned", "mean"}, default="learned"
        Prototypes that :meth:`query` translates attribute combinations
        into, as ``CROCSClusterer(prototypes=...)``: the learned clinical
        prototypes (CP CROCS), one for every combination, or the mean
        training embedding of each combination (TP CROCS), which exists only
        for combinations with training ECGs.
    partial : {"mean", "min"}, default="mean"
        How a query that leaves attributes unspecified (``{"sex": "F"}``, any
        class and age) is searched: by the prototypes of every combination
        that matches it. ``"mean"``: an ECG's distance to the query is its
        distance to their mean direction (the L2-normalised mean prototype);
        ``"min"``: its distance to the nearest of them. See
        :ref:`partial_queries` for what each measured.
    batch_size : int, default=1024
        ECGs embedded at a time: ``fit`` reads the database (and
        :meth:`kneighbors` its query ECGs) in slices of this many rows, so
        that a :func:`numpy.load` memmap is never loaded whole (see Notes).
    verbose : int, default=0
        ``0`` is silent; ``1`` shows a progress bar of the embedding (tqdm,
        on stderr) and the time taken to build a FAISS index.
    index : {"exact", "ivf_flat", "ivf_pq", "hnsw"}, default="exact"
        How the database is searched. ``"exact"``: every embedding, in
        blocks (see Notes). The others build a FAISS index in ``fit`` (the
        ``faiss`` extra: ``pip install 'sklearn-crocs[faiss]'``) and search
        only part of the database: an inverted file of ``nlist`` cells of
        which ``nprobe`` are searched, holding the embeddings
        (``"ivf_flat"``) or product-quantised codes of ``m * nbits / 8``
        bytes each (``"ivf_pq"``), or an HNSW graph (``"hnsw"``). The
        neighbours found are re-ranked by their exact distances;
        :meth:`recall` measures how many of the exact ones they are.
        ``"ivf_pq"`` warns (``UserWarning``) on fewer than 9,984 ECGs,
        too few to train its product quantiser. See
        :ref:`approximate_search`.
    index_params : dict, default=None
        Parameters of the FAISS index: ``nlist`` (default ``4 sqrt(n)``) and
        ``nprobe`` (16) for the IVF indexes, with ``m`` (a divisor of the
        embedding size, default a quarter of it) and ``nbits`` (8 with 10,000
        ECGs or more) for ``"ivf_pq"``; ``M`` (32), ``ef_construction`` (40)
        and ``ef_search`` (64) for ``"hnsw"``. Ignored for ``"exact"``.
    embeddings_path : str or path-like, default=None
        Keep the database embeddings on disk: ``fit`` writes them to this
        ``.npy`` file batch by batch (replacing the file) and ``embeddings_``
        is a read-only memory map of it, which searches read block by block
        and FAISS indexes add block by block. Memory then does not grow with
        the database (a FAISS index holds its own vectors or codes). The
        file is written under a temporary name and renamed when complete,
        so an interrupted fit leaves the previous file as it was; a
        symbolic link there is refused, never written through. It
        describes the indexed ECGs, which may be patient data: it is left
        in place for the caller to keep or delete. Not saved by
        :meth:`save`: set it again after :meth:`load`. ``None``: in memory.
    longer_signals : {"auto", "average", "error"}, default="auto"
        What ``fit`` and :meth:`kneighbors` do with ECGs longer than the
        estimator's training frames, such as whole 10-s records for a model
        fitted on 5-s frames. ``"average"`` embeds each as the normalised mean
        of its frames' embeddings, so that records (a list when their lengths
        differ) are searched one row each; ``"error"`` refuses them; ``"auto"``
        averages for a model fitted with ``sampling_rate`` and otherwise keeps
        the model's own ``longer_signals``: without a rate, a longer ECG may be
        one at a higher rate. The estimator is neither changed nor refitted;
        ECGs of the training length are embedded as they are. See :ref:`retrieval`.

    Attributes
    ----------
    estimator_ : estimator
        The estimator used: a fitted clone of ``estimator`` when ``fit`` was
        given ``y``, else ``estimator`` itself (not a copy).
    embeddings_ : ndarray of shape (`n_samples_fit_`, embedding_dim), dtype float32
        Unit-norm embeddings of the indexed database (a read-only memory map
        of ``embeddings_path`` when it is set).
    n_samples_fit_ : int
        Number of ECGs in the database.
    prototypes_ : ndarray of shape (n_prototypes, embedding_dim)
        The query prototypes (learned or mean, see ``prototypes``), unit norm.
    query_attributes_ : pandas.DataFrame of shape (n_prototypes, n_attributes)
        Attribute values of each row of ``prototypes_``, with the attribute
        names as columns: row ``i`` names row ``i`` of ``query()``.
    prototype_attributes_ : ndarray of shape (n_prototypes, n_attributes)
        The same values as an array (``query_attributes_.to_numpy()``).

        .. deprecated:: 0.1
           Use ``query_attributes_``, the one table of the queries' values;
           ``prototype_attributes_`` will be removed in 0.3.
    attribute_names_ : list of str
        Names of the attributes.
    n_features_in_ : int
        Number of values per ECG seen by the estimator in fit.

    See Also
    --------
    CROCSClusterer.get_prototypes : The learned and mean prototypes.
    sklearn.neighbors.NearestNeighbors : General nearest-neighbour search.
    sklearn_crocs.metrics.precision_at_k : Precision of the retrieved ECGs.

    Notes
    -----
    Memory is bounded by two policies, one per stage. Embedding: the
    retriever passes the estimator ``batch_size`` ECGs at a time, from the
    database in ``fit`` and from the query ECGs in :meth:`kneighbors` (with
    ``embeddings_path``, each slice goes straight to the file). Search: the
    exact search reads the embeddings in blocks of 65,536 rows and compares
    each block with the queries in groups small enough that their scores
    stay within scikit-learn's ``working_memory``
    (:func:`sklearn.config_context`, 1 GiB by default), keeping each
    query's best rows so far; the retriever does not slice queries itself.

    For each block, one float32 matrix product scores the block against
    the queries and each query's best rows are selected. Neighbours are
    chosen by these float32 scores (rows whose distances to a query differ
    by less than float32 rounding may trade places at the
    ``n_neighbors``-th position); the distances returned are then computed
    directly, in float64, for the neighbours found. Equal distances are
    ordered by increasing database index, so results are deterministic.

    Examples
    --------
    >>> import numpy as np
    >>> import pandas as pd
    >>> from sklearn.frozen import FrozenEstimator
    >>> from sklearn_crocs import CROCSClusterer, PrototypeRetriever
    >>> rng = np.random.RandomState(0)
    >>> y = pd.DataFrame({"rhythm": rng.choice(["AFIB", "SR"], 60),
    ...                   "sex": rng.choice(["F", "M"], 60)})
    >>> freq = np.where(y["rhythm"] == "SR", 1.0, 2.5)[:, None]
    >>> X = np.sin(freq * np.linspace(0, 20, 500)) + 0.3 * rng.randn(60, 500)
    >>> model = CROCSClusterer(embedding_dim=8, max_epochs=3, lr=1e-3,
    ...                        validation_fraction=None, random_state=0).fit(X, y)
    >>> database = rng.randn(30, 500)  # unlabelled ECGs
    >>> retriever = PrototypeRetriever(FrozenEstimator(model), n_neighbors=3).fit(database)
    >>> distances, indices = retriever.query()  # one row per prototype
    >>> indices.shape
    (4, 3)
    >>> retriever.query_attributes_
      rhythm sex
    0   AFIB   F
    1   AFIB   M
    2     SR   F
    3     SR   M
    >>> retriever.query({"rhythm": "SR", "sex": "M"}, n_neighbors=5)[1].shape
    (1, 5)
    >>> retriever.query({"rhythm": ["SR", "AFIB"], "sex": ["F", "M"]},
    ...                 return_distance=False).shape  # two queries
    (2, 3)
    >>> retriever.query({"sex": "F"}, n_neighbors=5)[1].shape  # any rhythm
    (1, 5)
    >>> retriever.kneighbors(database[:2], n_neighbors=1)[1].ravel()  # query by example
    array([0, 1])
    >>> records = [rng.randn(1000), rng.randn(750)]  # whole records, longer than the frames
    >>> PrototypeRetriever(FrozenEstimator(model), longer_signals="average"  # model: no rate
    ...                    ).fit(records).n_samples_fit_  # one row per record
    2
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit", "transform"])],
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "prototypes": [StrOptions({"learned", "mean"})],
        "partial": [StrOptions({"mean", "min"})],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "verbose": ["verbose"],
        "index": [StrOptions({"exact", *INDEX_PARAMS})],
        "index_params": [dict, None],
        "embeddings_path": [str, os.PathLike, None],
        "longer_signals": [StrOptions({"auto", "average", "error"})],
    }

    def __init__(
        self,
        estimator,
        *,
        n_neighbors=10,
        prototypes="learned",
        partial="mean",
        batch_size=1024,
        verbose=0,
        index="exact",
        index_params=None,
        embeddings_path=None,
        longer_signals="auto",
    ):
        self.estimator = estimator
        self.n_neighbors = n_neighbors
        self.prototypes = prototypes
        self.partial = partial
        self.batch_size = batch_size
        self.verbose = verbose
        self.index = index
        self.index_params = index_params
        self.embeddings_path = embeddings_path
        self.longer_signals = longer_signals

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y=None, groups=None, *, sampling_rate=None):
        """Index a database of ECGs, fitting the estimator first if ``y`` is given.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_timepoints) or (n_samples, n_leads, n_timepoints)
            The ECGs to search, for example a :func:`numpy.load` memmap; read
            ``batch_size`` rows at a time. Whole records longer than the
            model's frames (a list when their lengths differ) are indexed one
            row each (see ``longer_signals``).
        y : array-like of shape (n_samples,) or (n_samples, n_attributes), or DataFrame, \
default=None
            Attributes of ``X``: a clone of ``estimator`` is fitted on
            ``(X, y)`` and then ``X`` is indexed. ``None``: ``estimator`` must
            be fitted already and ``X`` is only indexed.
        groups : array-like of shape (n_samples,), default=None
            Patient of each ECG, passed to the estimator's ``fit`` with ``y``
            (for a Pipeline, to its last step); ignored without ``y``.
        sampling_rate : float, default=None
            Rate of ``X`` in Hz when it differs from the ``sampling_rate`` of
            the fitted estimator, which brings ``X`` to its rate (passed to its
            ``transform``); without ``y`` only.

        Returns
        -------
        self : PrototypeRetriever
            The fitted retriever.
        """
        crocs = _crocs_step(self.estimator)
        if y is None:
            estimator = self.estimator
            try:
                check_is_fitted(estimator)
            except NotFittedError as exc:
                raise NotFittedError(
                    f"{type(self).__name__}.fit(X) without y indexes X with an already "
                    f"fitted estimator, but this {type(crocs).__name__} is not fitted. "
                    "Fit it first (and optionally wrap it in sklearn.frozen.FrozenEstimator), "
                    "or pass y to fit a clone of it on (X, y)."
                ) from exc
        else:
            estimator = clone(self.estimator)
            params = {}
            if groups is not None:
                last = estimator.steps[-1][0] if isinstance(estimator, Pipeline) else None
                params["groups" if last is None else f"{last}__groups"] = groups
            estimator.fit(X, y, **params)
            crocs = _crocs_step(estimator)
        self.estimator_ = estimator
        if sampling_rate is not None and y is not None:
            raise ValueError(
                "sampling_rate is for indexing X with a fitted estimator; with y, X trains a "
                "clone of the estimator: declare its rate there, as "
                "CROCSClusterer(sampling_rate=...)."
            )
        embeddings = self._embed(
            X, name="X", path=self.embeddings_path, sampling_rate=sampling_rate
        )
        self._set_fitted(estimator, embeddings)
        return self

    def _set_fitted(self, estimator, embeddings):
        """Set the fitted state for a fitted ``estimator`` and the database ``embeddings``."""
        crocs = _crocs_step(estimator)
        self.estimator_ = estimator
        self._set_embeddings(embeddings)
        self.prototypes_, attributes = crocs.get_prototypes(self.prototypes)
        self.attribute_names_ = list(crocs.attribute_names_)
        self.query_attributes_ = pd.DataFrame(
            {n: attributes[:, i] for i, n in enumerate(self.attribute_names_)}
        )
        # The combination number of each query prototype, in increasing order.
        self._query_combinations = crocs.attribute_codec_.encode(self.query_attributes_)
        self.n_features_in_ = estimator.n_features_in_

    @deprecated(
        "PrototypeRetriever.prototype_attributes_ is deprecated and will be removed in 0.3: "
        "use query_attributes_ (a DataFrame with the attribute names as columns; "
        "query_attributes_.to_numpy() is this array)."
    )
    @property
    def prototype_attributes_(self):
        return self.query_attributes_.to_numpy()

    def save(self, path, *, include_embeddings=False, overwrite=False):
        """Write the retriever to a file that runs no code when loaded.

        The estimator is saved as by :meth:`CROCSClusterer.save`, with its
        wrapping (:class:`~sklearn.frozen.FrozenEstimator`, a
        :class:`~sklearn.pipeline.Pipeline` of
        :class:`~sklearn_crocs.preprocessing.FrameNormalizer` steps ending in the
        clusterer). The database embeddings are written only when asked:
        they describe the indexed ECGs, which may be patient data.

        Parameters
        ----------
        path : str or path-like
            File to write. A model file already there is replaced
            atomically; any other file is refused.
        include_embeddings : bool, default=False
            Also write ``embeddings_``, so that the loaded retriever searches
            without the database. Without them, index the database again with
            ``PrototypeRetriever.load(path).fit(X_database)``.
        overwrite : bool, default=False
            Replace ``path`` even if it is not a model file of this package.
            A symbolic link at ``path`` is refused either way: no file is
            written through a link or in place of one.

        Returns
        -------
        self : PrototypeRetriever
            The retriever, unchanged.

        Examples
        --------
        >>> import os, tempfile
        >>> import numpy as np
        >>> from sklearn_crocs import CROCSClusterer, PrototypeRetriever
        >>> rng = np.random.RandomState(0)
        >>> X, y = rng.randn(40, 400), np.repeat(["A", "B"], 20)
        >>> model = CROCSClusterer(embedding_dim=8, max_epochs=2,
        ...                        validation_fraction=None, random_state=0).fit(X, y)
        >>> retriever = PrototypeRetriever(model, n_neighbors=3).fit(X)
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     path = os.path.join(folder, "retriever.safetensors")
        ...     _ = retriever.save(path)
        ...     loaded = PrototypeRetriever.load(path).fit(X)  # index the database again
        >>> np.array_equal(loaded.query()[1], retriever.query()[1])
        True
        """
        check_is_fitted(self)
        save_retriever(self, path, include_embeddings=include_embeddings, overwrite=overwrite)
        return self

    @classmethod
    def load(cls, path, *, device=None, encoder=None, sha256=None):
        """Read a retriever written by :meth:`save`.

        Nothing in the file is executed or imported; the checks of
        :meth:`CROCSClusterer.load` apply.

        Parameters
        ----------
        path : str or path-like
            A file written by :meth:`save`.
        device : str or torch.device, default=None
            Device of the loaded estimator, as in :meth:`CROCSClusterer.load`.
        encoder : nn.Module subclass, default=None
            The encoder class of a model fitted with a custom one.
        sha256 : str, default=None
            The expected SHA-256 of the whole file, as in
            :meth:`CROCSClusterer.load`.

        Returns
        -------
        retriever : PrototypeRetriever
            Fitted if the file holds the embeddings; otherwise its
            ``estimator`` is the fitted model and ``fit(X_database)`` indexes
            a database with it.

        Examples
        --------
        >>> import os, tempfile
        >>> import numpy as np
        >>> from sklearn_crocs import CROCSClusterer, PrototypeRetriever
        >>> rng = np.random.RandomState(0)
        >>> X, y = rng.randn(40, 400), np.repeat(["A", "B"], 20)
        >>> model = CROCSClusterer(embedding_dim=8, max_epochs=2,
        ...                        validation_fraction=None, random_state=0).fit(X, y)
        >>> retriever = PrototypeRetriever(model, n_neighbors=3).fit(X)
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     path = os.path.join(folder, "retriever.safetensors")
        ...     _ = retriever.save(path, include_embeddings=True)
        ...     loaded = PrototypeRetriever.load(path)
        >>> loaded.query(return_distance=False).shape  # a row per prototype, A and B
        (2, 3)
        """
        retriever, embeddings = load_retriever(
            cls, path, device=device, encoder=encoder, sha256=sha256
        )
        if embeddings is not None:
            retriever._set_fitted(retriever.estimator, embeddings)
        return retriever

    def _set_embeddings(self, embeddings):
        """Index ``embeddings``, the unit-norm rows that kneighbors searches."""
        self.embeddings_ = embeddings
        self.n_samples_fit_ = len(embeddings)
        # Every search adds these to its products: computed once, not per search.
        # Unit rows (all but all-zero embeddings) need none: one pass fewer.
        norms = half_squared_norms(embeddings)
        same = len(norms) and np.ptp(norms) <= _UNIT_NORM_SPREAD
        self._half_sq_norms = float(norms[0]) if same else norms
        self._faiss = None
        if self.index != "exact":
            start_time = time.perf_counter()
            self._faiss = FaissIndex(embeddings, self.index, self.index_params)
            if self.verbose:
                print(
                    f"Built the FAISS index {self._faiss.description} of {len(embeddings)} "
                    f"embeddings ({time.perf_counter() - start_time:.1f} s)"
                )

    def _top_k(self, vectors, k, *, exact=False):
        """Nearest database rows of ``vectors``: by the FAISS index unless exact."""
        if exact or self._faiss is None:
            return top_k(vectors, self.embeddings_, k, half_sq_norms=self._half_sq_norms)
        distances, indices = self._faiss.search(vectors, self.embeddings_, k)
        short = (indices < 0).any(axis=1)
        if short.any():  # fewer than k rows in the probed cells: those queries searched exactly
            distances[short], indices[short] = self._top_k(vectors[short], k, exact=True)
        return distances, indices

    def _embed(self, X, *, name, path=None, sampling_rate=None):
        """Unit-norm float32 embeddings of X, computed ``batch_size`` rows at a time.

        With ``path``, they are written to that ``.npy`` file as they come and
        returned as a read-only memory map of it.
        """
        if _length_groups(X) is not None:  # records of different lengths: kept a list
            X = list(X)
        elif not hasattr(X, "shape") and not hasattr(X, "iloc"):
            X = np.asarray(X)
        if not isinstance(X, list) and len(getattr(X, "shape", (0, 0))) < 2:
            raise ValueError(
                f"{name} must have shape (n_samples, n_timepoints) or (n_samples, n_leads, "
                f"n_timepoints); got shape {getattr(X, 'shape', None)}. Reshape a single "
                "ECG with X[None]."
            )
        n_samples = _n_rows(X)
        if n_samples == 0:
            raise ValueError(f"{name} holds no ECG (shape {np.shape(X)}); pass at least one.")
        # Passed only when given: a Pipeline's transform takes no parameters by default.
        rate = {} if sampling_rate is None else {"sampling_rate": sampling_rate}
        estimator = _with_longer_signals(self.estimator_, self.longer_signals)
        batches = {"batch_size": self.batch_size, "verbose": self.verbose}
        if path is None:
            return embed_rows(estimator, X, n_samples, rate, **batches)
        # Written under a temporary name: the previous file survives an interrupted fit.
        with _atomic_path(path, replace=True) as tmp:  # each fit rewrites it
            embeddings = embed_rows(estimator, X, n_samples, rate, path=tmp, **batches)
            embeddings.flush()
            del embeddings  # closed before the rename (required on Windows)
        return np.load(path, mmap_mode="r")

    def _attribute_queries(self, attributes):
        """Attribute queries as a DataFrame with a column per attribute (NaN: any value)."""
        names = self.attribute_names_
        if isinstance(attributes, pd.Series):
            attributes = attributes.to_dict()
        if isinstance(attributes, Mapping):
            several = [not isinstance(v, str) and np.ndim(v) > 0 for v in attributes.values()]
            frame = pd.DataFrame(dict(attributes), index=None if any(several) else [0])
        elif isinstance(attributes, pd.DataFrame):
            frame = attributes.reset_index(drop=True)
        elif isinstance(attributes, list) and all(isinstance(q, Mapping) for q in attributes):
            frame = pd.DataFrame([dict(q) for q in attributes])
        else:
            raise TypeError(
                "attributes must be a dict keyed by attribute name (scalar values: one "
                "query; lists: several), a list of such dicts or a DataFrame with the "
                f"attribute names {names} as columns; got {type(attributes).__name__}. "
                "Search by example ECGs with kneighbors(X)."
            )
        frame.columns = [str(c) for c in frame.columns]
        if frame.columns.duplicated().any():
            twice = sorted(set(frame.columns[frame.columns.duplicated()]))
            raise ValueError(
                f"attributes names the attribute(s) {twice} more than once; give each "
                "attribute one column."
            )
        extra = [c for c in frame.columns if c not in names]
        if extra:
            raise ValueError(
                f"Attribute queries name attributes {extra} that are not among {names}."
            )
        if len(frame) == 0:
            raise ValueError("attributes holds no attribute combination; pass at least one.")
        # An attribute a query leaves out (or gives as None/NaN) may take any value.
        frame = frame.reindex(columns=names)
        unspecified = frame.isna().all(axis=1).to_numpy()
        if unspecified.any():
            raise ValueError(
                f"Attribute queries {np.flatnonzero(unspecified).tolist()} specify no "
                f"attribute of {names}; give at least one value per query."
            )
        return frame

    def _query_rows(self, frame):
        """Boolean matrix: the rows of ``prototypes_`` that match each query of ``frame``."""
        codec = _crocs_step(self.estimator_).attribute_codec_
        wanted = codec.codes(frame, allow_missing=True)  # clear error for unknown values
        available = codec.combinations[self._query_combinations]
        matches = ((wanted[:, None, :] == available) | (wanted[:, None, :] < 0)).all(axis=2)
        unmatched = ~matches.any(axis=1)
        if unmatched.any():
            described = "; ".join(
                str(tuple(None if pd.isna(v) else _python_value(v) for v in row))
                for row in frame.to_numpy()[unmatched][:10]
            )
            raise ValueError(
                f"No training ECG has the attribute combination(s) {described} of "
                f"{self.attribute_names_} (None: any value), so prototypes='mean' (TP CROCS) has "
                "no prototype for them. Use prototypes='learned' (CP CROCS), which has one for "
                "every combination."
            )
        return matches

    def _search(self, matches, n_neighbors, exact):
        """Nearest database ECGs of the queries whose prototypes are the rows ``matches``."""
        single = matches.sum(axis=1) == 1
        if self.partial == "mean" or single.all():
            vectors = self.prototypes_[matches.argmax(axis=1)]
            for q in np.flatnonzero(~single):
                mean = self.prototypes_[matches[q]].astype(np.float64).mean(axis=0)
                vectors[q] = mean / np.linalg.norm(mean)
            return self._top_k(vectors, n_neighbors, exact=exact)
        # partial="min": each prototype's nearest ECGs hold the query's nearest ones.
        used = np.flatnonzero(matches.any(axis=0))
        found = self._top_k(self.prototypes_[used], n_neighbors, exact=exact)
        distances = np.empty((len(matches), n_neighbors))
        indices = np.empty((len(matches), n_neighbors), dtype=found[1].dtype)
        for q, row in enumerate(matches[:, used]):
            d, i = found[0][row].ravel(), found[1][row].ravel()
            order = np.lexsort((i, d))  # by distance, then index
            d, i = d[order], i[order]
            first = np.sort(np.unique(i, return_index=True)[1])[:n_neighbors]
            distances[q], indices[q] = d[first], i[first]
        return distances, indices

    def kneighbors(self, X=None, n_neighbors=None, return_distance=True, *, sampling_rate=None):
        """Find the database ECGs nearest to each example ECG (query by example).

        As :meth:`sklearn.neighbors.NearestNeighbors.kneighbors`, with the
        ECGs embedded by the estimator. Attribute combinations and the
        prototypes are searched with :meth:`query`.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_timepoints) or (n_queries, n_leads, n_timepoints), \
default=None
            The query ECGs, embedded ``batch_size`` at a time. ``None``: the
            neighbours of each database ECG, which is not counted as its own
            neighbour (as in scikit-learn).
        n_neighbors : int, default=None
            Number of ECGs per query; ``None`` uses ``self.n_neighbors``.
        return_distance : bool, default=True
            Whether to return the distances too.
        sampling_rate : float, default=None
            Rate in Hz of ``X`` when it differs from the estimator's
            ``sampling_rate``; the ECGs are brought to the model's rate.

        Returns
        -------
        distances : ndarray of shape (n_queries, n_neighbors), dtype float64
            Euclidean distances between the unit-norm query and database
            embeddings, increasing along each row. Only returned if
            ``return_distance=True``.
        indices : ndarray of shape (n_queries, n_neighbors)
            Rows of the database (``X`` in ``fit``), nearest first; equal
            distances are ordered by increasing index.
        """
        check_is_fitted(self)
        n_neighbors = self._check_n_neighbors(n_neighbors, extra=X is None)
        distances, indices = self._signal_neighbors(X, n_neighbors, False, sampling_rate)
        return (distances, indices) if return_distance else indices

    def query(self, attributes=None, n_neighbors=None, return_distance=True):
        """Find the database ECGs nearest to attribute combinations.

        Each combination is translated into its prototype (see
        ``prototypes``); a partial one, which leaves attributes unspecified,
        into the prototypes of every combination that matches it (see
        ``partial``).

        Parameters
        ----------
        attributes : dict, list of dict or DataFrame, default=None
            The attribute combinations: a dict keyed by attribute name
            (scalar values: one query; lists: one query per position), a
            list of such dicts with scalar values, or a DataFrame with
            attribute names as columns. An attribute left out, or given as
            None or NaN, may take any value: ``{"sex": "F"}`` searches for
            every combination with ``sex="F"``. ``None``: every prototype,
            in the order of ``query_attributes_`` (the paper's retrieval
            setting).
        n_neighbors : int, default=None
            Number of ECGs per query; ``None`` uses ``self.n_neighbors``.
        return_distance : bool, default=True
            Whether to return the distances too.

        Returns
        -------
        distances : ndarray of shape (n_queries, n_neighbors), dtype float64
            Euclidean distances between the unit-norm prototype and database
            embeddings, increasing along each row (for a partial query with
            ``partial="min"``, the distance to the nearest matching
            prototype). Only returned if ``return_distance=True``.
        indices : ndarray of shape (n_queries, n_neighbors)
            Rows of the database (``X`` in ``fit``), nearest first; equal
            distances are ordered by increasing index.

        Examples
        --------
        >>> import numpy as np
        >>> import pandas as pd
        >>> from sklearn_crocs import CROCSClusterer, PrototypeRetriever
        >>> rng = np.random.RandomState(0)
        >>> X = rng.randn(40, 400)
        >>> y = pd.DataFrame({"rhythm": np.repeat(["AFIB", "SR"], 20),
        ...                   "sex": np.tile(["F", "M"], 20)})
        >>> model = CROCSClusterer(embedding_dim=8, max_epochs=2,
        ...                        validation_fraction=None, random_state=0).fit(X, y)
        >>> retriever = PrototypeRetriever(model, n_neighbors=3).fit(X)
        >>> retriever.query(return_distance=False).shape  # every prototype
        (4, 3)
        >>> queries = pd.DataFrame({"rhythm": ["SR", None], "sex": ["F", "M"]})
        >>> retriever.query(queries, return_distance=False).shape  # None: any rhythm
        (2, 3)
        """
        check_is_fitted(self)
        n_neighbors = self._check_n_neighbors(n_neighbors)
        distances, indices = self._attribute_neighbors(attributes, n_neighbors, False)
        return (distances, indices) if return_distance else indices

    def _check_n_neighbors(self, n_neighbors, extra=False):
        """``n_neighbors``, or the default, checked against the database (``extra``: + self)."""
        if n_neighbors is None:
            n_neighbors = self.n_neighbors
        elif not isinstance(n_neighbors, Integral) or isinstance(n_neighbors, bool):
            raise TypeError(f"n_neighbors must be an integer; got {n_neighbors!r}.")
        elif n_neighbors <= 0:
            raise ValueError(f"Expected n_neighbors > 0. Got {n_neighbors}")
        if n_neighbors + extra > self.n_samples_fit_:
            raise ValueError(
                f"Expected n_neighbors {'<' if extra else '<='} n_samples_fit, but "
                f"n_neighbors = {n_neighbors}, n_samples_fit = {self.n_samples_fit_}"
            )
        return n_neighbors

    def _signal_neighbors(self, X, n_neighbors, exact, sampling_rate=None):
        """kneighbors(X) without checks: by the FAISS index unless ``exact``."""
        if X is None:  # each database ECG, itself left out
            distances, indices = self._top_k(self.embeddings_, n_neighbors + 1, exact=exact)
            keep = indices != np.arange(len(indices))[:, None]
            keep[keep.all(axis=1), -1] = False  # itself not found (duplicates): drop the last
            shape = (len(indices), n_neighbors)
            return distances[keep].reshape(shape), indices[keep].reshape(shape)
        if isinstance(X, pd.DataFrame):
            attributes = set(map(str, X.columns)) <= set(self.attribute_names_)
        elif isinstance(X, (Mapping, pd.Series, tuple)) or (
            isinstance(X, list) and any(isinstance(x, (Mapping, tuple, str)) for x in X)
        ):
            attributes = True
        else:
            first = X[0] if _length_groups(X) is not None else X  # a ragged list's dtype
            dtype = first.dtype if hasattr(first, "dtype") else np.asarray(first).dtype
            attributes = dtype.kind in "OUS"
        if attributes:
            raise TypeError(
                "kneighbors takes ECG signals, an array of shape (n_queries, n_timepoints) or "
                f"(n_queries, n_leads, n_timepoints); got {type(X).__name__}. Search by "
                "attribute combinations with query(), for example query({'sex': 'F'}) or "
                "query(DataFrame); query() searches with every prototype."
            )
        vectors = self._embed(X, name="X", sampling_rate=sampling_rate)
        return self._top_k(vectors, n_neighbors, exact=exact)

    def _attribute_neighbors(self, attributes, n_neighbors, exact):
        """query(attributes) without checks: by the FAISS index unless ``exact``."""
        if attributes is None:
            return self._top_k(self.prototypes_, n_neighbors, exact=exact)
        matches = self._query_rows(self._attribute_queries(attributes))
        return self._search(matches, n_neighbors, exact)

    def recall(self, attributes=None, n_neighbors=None, *, X=None):
        """Fraction of the exact nearest ECGs that the search finds (recall@K).

        The approximate search (``index`` other than ``"exact"``) against an
        exact search of the same embeddings, for the same queries: the mean
        over queries of the share of the exact ``n_neighbors`` nearest ECGs
        among those returned. Always 1.0 with ``index="exact"``.

        Parameters
        ----------
        attributes : dict, list of dict or DataFrame, default=None
            Attribute queries, as in :meth:`query`; ``None``: every
            prototype.
        n_neighbors : int, default=None
            K; ``None`` uses ``self.n_neighbors``.
        X : array-like of shape (n_queries, n_timepoints) or (n_queries, n_leads, n_timepoints), \
default=None
            Example ECGs, as in :meth:`kneighbors`, measured instead of
            attribute queries.

        Returns
        -------
        recall : float
            Between 0 and 1.
        """
        check_is_fitted(self)
        if X is not None and attributes is not None:
            raise ValueError("Pass attributes or X to recall, not both.")
        n_neighbors = self._check_n_neighbors(n_neighbors)
        if X is None:
            found = self._attribute_neighbors(attributes, n_neighbors, exact=False)[1]
            truth = self._attribute_neighbors(attributes, n_neighbors, exact=True)[1]
        else:
            vectors = self._embed(X, name="X")
            found = self._top_k(vectors, n_neighbors, exact=False)[1]
            truth = self._top_k(vectors, n_neighbors, exact=True)[1]
        hits = [len(np.intersect1d(a, b)) for a, b in zip(found, truth)]
        return float(np.sum(hits) / truth.size)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        tags.target_tags.required = False
        tags.target_tags.multi_output = True
        return tags
