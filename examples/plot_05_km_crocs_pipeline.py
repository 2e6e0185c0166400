"""
===================================================
KM CROCS: k-means on CROCS embeddings in a Pipeline
===================================================

The paper compares clustering by nearest clinical prototype (CP CROCS) with
k-means on the raw signals (KM raw) and k-means on the embeddings that
CROCS learns (KM CROCS). Because :class:`~sklearn_crocs.CROCSClusterer` is
a transformer whose ``transform`` returns the embeddings, KM CROCS is a
plain scikit-learn :class:`~sklearn.pipeline.Pipeline`.

k-means clusters carry no attributes, so they are compared with the true
attributes through the adjusted mutual information (AMI), which does not
need cluster numbers to match class names.
"""

# %%
# Data
# ----
# 5-s 12-lead frames of the bundled PTB-XL sample (see
# :ref:`sphx_glr_auto_examples_plot_01_quickstart_clustering.py`).
import matplotlib.pyplot as plt
import pandas as pd
from sklearn.cluster import KMeans
from sklearn.frozen import FrozenEstimator
from sklearn.metrics import adjusted_mutual_info_score
from sklearn.pipeline import make_pipeline

from sklearn_crocs import CROCSClusterer
from sklearn_crocs.datasets import load_ptbxl_sample_frames

data = load_ptbxl_sample_frames(random_state=0)
X_train, y_train = data.X_train, data.y_train
X_test, y_test = data.X_test, data.y_test
n_classes = y_train["class"].nunique()

# %%
# KM CROCS as a pipeline
# ----------------------
# ``fit`` passes ``y`` on to every step: CROCSClusterer learns from the
# attributes, KMeans ignores them. Step parameters such as the patients go
# by step name. As in the paper, k is the number of classes.
km_crocs = make_pipeline(
    CROCSClusterer(random_state=0),
    KMeans(n_clusters=n_classes, n_init=10, random_state=0),
)
km_crocs.fit(X_train, y_train, crocsclusterer__groups=data.groups_train)
clusters = km_crocs.predict(X_test)  # cluster numbers, not attributes
pd.crosstab(
    y_test["class"], clusters, rownames=["class"], colnames=["cluster"]
)

# %%
# The baselines
# -------------
# KM raw clusters the raw signals (12 x 500 values each). CP CROCS assigns
# each ECG the class of its nearest learned prototype; the fitted CROCS
# step of the pipeline provides it, so nothing is trained twice.
km_raw = KMeans(n_clusters=n_classes, n_init=10, random_state=0)
km_raw.fit(X_train.reshape(len(X_train), -1))
crocs = km_crocs[0]

assignments = {
    "KM raw": km_raw.predict(X_test.reshape(len(X_test), -1)),
    "KM CROCS": clusters,
    "CP CROCS": crocs.predict(X_test)["class"],
}
scores = pd.Series(
    {
        name: adjusted_mutual_info_score(y_test["class"], assigned)
        for name, assigned in assignments.items()
    },
    name="AMI (class), held-out patients",
)
scores.round(3)

# %%
# More clusters, same embeddings
# ------------------------------
# To try other values of k without training CROCS again, freeze the fitted
# step: :class:`~sklearn.frozen.FrozenEstimator` makes the pipeline's
# ``fit`` skip it. Here k runs up to the number of attribute combinations
# (16), and the AMI is measured against each attribute and the full
# combination.
combination = y_test.astype(str).agg(", ".join, axis=1)
rows = {}
for k in (2, 4, 8, 16):
    pipeline = make_pipeline(
        FrozenEstimator(crocs), KMeans(n_clusters=k, n_init=10, random_state=0)
    ).fit(X_train)
    assigned = pipeline.predict(X_test)
    rows[k] = {
        **{a: adjusted_mutual_info_score(y_test[a], assigned) for a in y_test},
        "combination": adjusted_mutual_info_score(combination, assigned),
    }
ami_by_k = pd.DataFrame(rows).T.rename_axis("k")

fig, ax = plt.subplots(figsize=(7, 3.8), layout="constrained")
# (No green or red: in these pages they mean match and no match.)
colors = ["tab:blue", "tab:orange", "tab:purple", "tab:brown"]
ami_by_k.plot(ax=ax, marker="o", color=colors)
ax.set_xscale("log", base=2)
ax.set_xticks(list(rows), [str(k) for k in rows])
ax.set_ylabel("AMI on held-out patients")
ax.set_title("KM CROCS: AMI with each attribute by number of clusters")
ami_by_k.round(3)
