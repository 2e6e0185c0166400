"""
=================================================
Prototype maps and the dendrogram of prototypes
=================================================

Two views of what CROCS learns:

* the **prototype map** (the paper's Figures 3 and 4): prototypes and ECG
  embeddings projected to two dimensions, colour = class, marker = sex,
  size = age group; drawn for the three variants of the loss that the
  paper's Figure 3 compares;
* the **dendrogram** (the paper's Appendix G): hierarchical clustering of
  the prototypes, and of their features, over the prototypes-by-features
  matrix.
"""

# %%
# Data
# ----
# 5-s 12-lead frames of the bundled PTB-XL sample, split by patient as in
# :ref:`sphx_glr_auto_examples_plot_01_quickstart_clustering.py`.
import math

import matplotlib.pyplot as plt

from sklearn_crocs import CROCSClusterer
from sklearn_crocs.datasets import load_ptbxl_sample_frames
from sklearn_crocs.plotting import PrototypeDendrogramDisplay, PrototypeDisplay

data = load_ptbxl_sample_frames(random_state=0)
X_train, y_train = data.X_train, data.y_train
X_test, y_test = data.X_test, data.y_test

# %%
# Three variants of the loss
# --------------------------
# As in the paper's Figure 3: NCE-soft with uniform attraction
# (:math:`\tau_w = \infty`), with modulated attraction (:math:`\tau_w = 1`),
# and the full loss with the arrangement regulariser (:math:`\beta = 0.2`).
# The same seed, data and number of epochs for all three: 20, half the
# default, to keep this page quick.
variants = {
    r"$\tau_w=\infty$": {"tau_w": math.inf, "beta": 0.0},
    r"$\tau_w=1$": {"tau_w": 1.0, "beta": 0.0},
    r"$\tau_w=1$, $\beta=0.2$": {"tau_w": 1.0, "beta": 0.2},
}
models = {
    name: CROCSClusterer(max_epochs=20, random_state=0, **params).fit(
        X_train, y_train
    )
    for name, params in variants.items()
}

# %%
# Prototypes of each variant
# --------------------------
# Each panel projects one model's 16 prototypes with PCA; all three
# separate the classes. With uniform attraction (:math:`\tau_w = \infty`)
# every ECG of a class pulls all of that class's prototypes alike, so
# nothing places a prototype by sex or age: where each one ends up within
# its class is left to chance. With :math:`\tau_w = 1` a prototype is pulled
# hardest by the ECGs that share its attributes, and the regulariser
# (:math:`\beta = 0.2`) keeps the prototypes of a class at distances that
# grow with the number of attributes in which they differ.
fig, axes = plt.subplots(2, 2, figsize=(7, 6.4), layout="constrained")
for ax, (name, model) in zip(axes.flat, models.items()):
    display = PrototypeDisplay.from_estimator(model, ax=ax)
    ax.set_title(f"NCE-soft, {name}", fontsize="medium")
    legend = ax.get_legend()
    legend.remove()
axes[1, 1].legend(
    legend.legend_handles,
    [text.get_text() for text in legend.get_texts()],
    title=legend.get_title().get_text(),
    loc="center",
)
axes[1, 1].set_axis_off()

# %%
# Prototypes and held-out embeddings
# ----------------------------------
# The full model's prototypes (large, black edge) among the embeddings of
# the held-out patients' ECGs (small), coloured by their true class. Pass
# ``projection="umap"`` to use UMAP instead of PCA when ``umap-learn`` is
# installed.
model = models[r"$\tau_w=1$, $\beta=0.2$"]
display = PrototypeDisplay.from_estimator(model, X_test, y_test)

# %%
# The mean training embeddings (TP CROCS prototypes) of the same model,
# with the training embeddings:
display = PrototypeDisplay.from_estimator(model, X_train, y_train, prototypes="mean")

# %%
# Hierarchical clustering of the prototypes
# -----------------------------------------
# Rows: the 16 prototypes, ordered by average-linkage clustering (left
# dendrogram) and labelled with their combination, coloured by class.
# Columns: the 256 features (128 per net), ordered by their own clustering
# (top). In the paper (Appendix G) prototypes group first by class, then by
# the other attributes.
display = PrototypeDendrogramDisplay.from_estimator(model)

# %%
# The leaves of the row dendrogram, top to bottom, show which prototypes
# were merged first:
model.prototype_attributes_.iloc[display.row_order_].head(8)

# sphinx_gallery_thumbnail_number = 2
