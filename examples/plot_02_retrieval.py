"""
==============================================
Retrieve ECGs by attribute combination
==============================================

The retrieval setting of CROCS: every clinical prototype is a query for an
attribute combination (class, sex, age group), and the ECGs of a database
nearest to it are retrieved. Here a model is fitted on the training
patients of the bundled PTB-XL sample, and the database is the ECGs of the
held-out patients, as if they were unlabelled; their true attributes are
used only to score and colour the results.

The figures reproduce the paper's Figure 5: the distances between one query
and every database ECG, by class, and the six nearest ECGs with a green
border where their class matches the query's and a red one where it does
not.
"""

# %%
# Data and model
# --------------
# 5-s 12-lead frames of the PTB-XL sample, split by patient, with the
# estimator's defaults (see
# :ref:`sphx_glr_auto_examples_plot_01_quickstart_clustering.py`).
from sklearn_crocs import CROCSClusterer, PrototypeRetriever
from sklearn_crocs.datasets import load_ptbxl_sample_frames
from sklearn_crocs.metrics import chance_precision_at_k, retrieval_report
from sklearn_crocs.plotting import RetrievalDisplay

data = load_ptbxl_sample_frames(random_state=0)
X_db, y_db = data.X_test, data.y_test  # the held-out patients' ECGs
model = CROCSClusterer(random_state=0).fit(
    data.X_train, data.y_train, groups=data.groups_train
)

# %%
# Index the database
# ------------------
# :class:`~sklearn_crocs.PrototypeRetriever` embeds the database once. With
# an already fitted model, ``fit(X)`` only indexes ``X`` (no labels needed).
retriever = PrototypeRetriever(model, n_neighbors=10).fit(X_db)
n_queries = len(retriever.query_attributes_)
print(f"{retriever.n_samples_fit_} ECGs indexed, {n_queries} queries")

# %%
# Query with every prototype
# --------------------------
# ``query()`` without attributes uses every prototype; row ``i`` of the
# result belongs to row ``i`` of ``query_attributes_``.
distances, indices = retriever.query()
retriever.query_attributes_.assign(
    nearest=[list(row[:3]) for row in indices],
    distance=distances[:, 0].round(3),
).head()

# %%
# Query with attribute combinations
# ---------------------------------
# A dict keyed by attribute name (lists of values give several queries) or a
# DataFrame with the attribute names as columns. Here: women of the youngest
# age group with a normal ECG. The true attributes of the five ECGs
# retrieved show what came back. (``kneighbors(X)`` searches by example
# ECGs instead.)
ages = data.age_encoder.labels_
query = {"class": "NORM", "sex": "F", "age": ages[0]}
distances, indices = retriever.query(query, n_neighbors=5)
y_db.iloc[indices[0]].assign(distance=distances[0].round(3))

# %%
# How good is the retrieval?
# --------------------------
# The paper's Table 2: the precision at K, the fraction of queries for
# which at least one of the K retrieved ECGs matches the query on at least
# ``m`` attributes (">=1", ">=2") or on all three ("=3"), for the learned
# prototypes (CP CROCS) and the mean training embeddings (TP CROCS).
learned = PrototypeRetriever(model, prototypes="learned").fit(X_db)
mean = PrototypeRetriever(model, prototypes="mean").fit(X_db)
queries = learned.query_attributes_
report = retrieval_report(
    y_db,
    {
        "CP CROCS": (queries, learned.query(n_neighbors=10)[1]),
        "TP CROCS": (queries, mean.query(n_neighbors=10)[1]),
    },
    k=(1, 5, 10),
)
report

# %%
# Retrieving K ECGs at random would match all three attributes this often
# (in %):
{
    k: round(100 * chance_precision_at_k(y_db, queries, k=k, min_matches=3), 1)
    for k in (1, 5, 10)
}

# %%
# Distances and retrieved ECGs for one query
# ------------------------------------------
# :class:`~sklearn_crocs.plotting.RetrievalDisplay` takes the fitted
# retriever and its database. The histogram shows how far each held-out ECG
# is from the query, by true class; the dashed line is the distance of the
# sixth nearest ECG. Below, lead II of the six nearest ECGs, framed green
# when their class is the query's.
lead_ii = data.lead_names.index("II")
display = RetrievalDisplay.from_estimator(
    retriever, X_db, y_db, query=query, lead=lead_ii, sampling_rate=data.fs
)

# %%
# A query of the other class: men of the oldest age group with an abnormal
# ECG. ``density=True`` scales each class's histogram to unit area, to
# compare their shapes.
display = RetrievalDisplay.from_estimator(
    retriever,
    X_db,
    y_db,
    query={"class": "ABN", "sex": "M", "age": ages[-1]},
    lead=lead_ii,
    sampling_rate=data.fs,
    density=True,
)

# %%
# The same figure for the TP CROCS query of that combination (the mean
# training embedding) is ``RetrievalDisplay.from_estimator(mean, X_db,
# y_db, query=...)``.

# sphinx_gallery_thumbnail_number = 2
