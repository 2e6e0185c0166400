"""
=================================================
Prototype maps and the dendrogram of prototypes
=================================================

Two views of what CROCS learns:

* the **prototype map** (the paper's Figures 3 and 4): prototypes and ECG
  embeddings projected to two dimensions, colour = rhythm, marker = sex,
  size = age group; drawn for the three variants of the loss that the
  paper's Figure 3 compares;
* the **dendrogram** (the paper's Appendix G): hierarchical clustering of
  the prototypes, and of their features, over the prototypes-by-features
  matrix.
"""

# %%
# Data
# ----
# The bundled LUDB records with the paper's Chapman protocol, split by
# patient as in :ref:`sphx_glr_auto_examples_plot_01_quickstart_clustering.py`.
import math

import matplotlib.pyplot as plt
import pandas as pd

from sklearn_crocs import CROCSClusterer
from sklearn_crocs.datasets import load_ludb_instances
from sklearn_crocs.plotting import PrototypeDendrogramDisplay, PrototypeDisplay

data = load_ludb_instances(random_state=0)
X_train, y_train, groups_train = data.X_train, data.y_train, data.groups_train
X_test, y_test = data.X_test, data.y_test

# %%
# Three variants of the loss
# --------------------------
# As in the paper's Figure 3: NCE-soft with uniform attraction
# (:math:`\tau_w = \infty`), with modulated attraction (:math:`\tau_w = 1`),
# and the full loss with the arrangement regulariser (:math:`\beta = 0.2`).
# The same seed and data for all three; no early stopping, so that they
# train for the same number of epochs.
variants = {
    r"NCE-soft, $\tau_w=\infty$": {"tau_w": math.inf, "beta": 0.0},
    r"NCE-soft, $\tau_w=1$": {"tau_w": 1.0, "beta": 0.0},
    r"NCE-soft + $\mathcal{L}_{reg}$ ($\beta=0.2$)": {"tau_w": 1.0, "beta": 0.2},
}
models = {
    name: CROCSClusterer(
        encoder="cnn",
        embedding_dim=32,
        lr=1e-3,
        max_epochs=60,
        validation_fraction=None,
        random_state=0,
        **params,
    ).fit(X_train, y_train)
    for name, params in variants.items()
}

# %%
# Prototypes of each variant
# --------------------------
# Each panel projects one model's 32 prototypes with PCA. With the
# regulariser, prototypes of one rhythm keep distances proportional to the
# number of attributes in which they differ.
fig, axes = plt.subplots(1, 3, figsize=(17, 5), layout="constrained")
for ax, (name, model) in zip(axes, models.items()):
    display = PrototypeDisplay.from_estimator(model, ax=ax)
    ax.set_title(name)
    if ax is not axes[-1]:
        ax.get_legend().remove()

# %%
# Prototypes and held-out embeddings
# ----------------------------------
# The full model's prototypes (large, black edge) among the embeddings of the
# held-out patients' ECGs (small), coloured by their true rhythm. Pass
# ``projection="umap"`` to use UMAP instead of PCA when ``umap-learn`` is
# installed.
model = models[r"NCE-soft + $\mathcal{L}_{reg}$ ($\beta=0.2$)"]
display = PrototypeDisplay.from_estimator(model, X_test, y_test)

# %%
# The mean training embeddings (TP CROCS prototypes) of the same model, with
# the training embeddings:
display = PrototypeDisplay.from_estimator(model, X_train, y_train, kind="mean")

# %%
# Hierarchical clustering of the prototypes
# -----------------------------------------
# Rows: the 32 prototypes, ordered by average-linkage clustering (left
# dendrogram) and labelled with their combination, coloured by rhythm.
# Columns: the 32 features, ordered by their own clustering (top). In the
# paper (Appendix G) prototypes group first by class, then by the other
# attributes.
display = PrototypeDendrogramDisplay.from_estimator(model)

# %%
# The leaves of the row dendrogram, top to bottom, are available to inspect
# which prototypes were merged first:
leaves = model.prototype_attributes_[display.row_order_]
pd.DataFrame(leaves, columns=model.attribute_names_).head(8)
