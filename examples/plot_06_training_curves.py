"""
=====================================================
Training curves: the contrastive term and regulariser
=====================================================

CROCS minimises the sum of a contrastive term (NCE-soft) and the
arrangement regulariser.
:class:`~sklearn_crocs.plotting.TrainingCurveDisplay` draws both, and their
sum, per epoch from the fitted estimator's history (``net_.history``), for
the training data and for the patients held out for early stopping, and
marks the epoch whose model was kept.
"""

# %%
# Data
# ----
# 5-s 12-lead frames of the bundled PTB-XL sample (see
# :ref:`sphx_glr_auto_examples_plot_01_quickstart_clustering.py`); only the
# training patients are needed here.
import matplotlib.pyplot as plt
import pandas as pd

from sklearn_crocs import CROCSClusterer
from sklearn_crocs.datasets import load_ptbxl_sample_frames
from sklearn_crocs.plotting import TrainingCurveDisplay

data = load_ptbxl_sample_frames(random_state=0)
X_train, y_train, groups_train = data.X_train, data.y_train, data.groups_train

# %%
# Early stopping on held-out patients
# -----------------------------------
# ``validation_fraction=0.25`` holds out a quarter of the training patients
# (``groups``); training stops when their contrastive loss has not improved
# for ``n_iter_no_change`` epochs, and the encoder and prototypes of the
# best epoch are kept. ``verbose=1`` would print the same numbers per epoch.
# The regulariser is the paper's: ``beta=0.2``, summed over pairs as in
# Eq. 3 (the defaults turn it off, see the user guide's :ref:`defaults`
# page).
model = CROCSClusterer(
    beta=0.2,
    reg_reduction="sum",
    validation_fraction=0.25,
    n_iter_no_change=8,
    random_state=0,
)
model.fit(X_train, y_train, groups=groups_train)
print(f"stopped after {model.n_iter_} epochs")

# %%
# The three curves
# ----------------
# The regulariser is summed over all pairs of prototypes of the same class,
# so it starts large and dominates the total loss in the first epochs; the
# contrastive term is what early stopping watches. The regulariser depends
# on the prototypes only, so its two curves differ only in when they are
# taken: the training value is the mean over the epoch's batches, while the
# prototypes still move, the validation value that of the epoch's end.
display = TrainingCurveDisplay.from_estimator(model)

# %%
# A logarithmic scale shows the regulariser's decay better.
display = TrainingCurveDisplay.from_estimator(
    model, parts=("nce", "reg"), yscale="log"
)

# %%
# The same history as a table
# ---------------------------
# ``net_.history`` is skorch's :class:`~skorch.history.History`; any key can
# be read for all epochs at once.
history = model.net_.history
keys = ("epoch", "train_nce", "valid_nce", "train_reg")
pd.DataFrame({key: history[:, key] for key in keys}).tail()

# %%
# Without the regulariser
# -----------------------
# ``beta=0`` turns the regulariser off (its curve stays at zero). Drawn on
# shared axes, the contrastive terms of both models can be compared
# directly.
no_reg = CROCSClusterer(
    beta=0.0, validation_fraction=0.25, n_iter_no_change=8, random_state=0
).fit(X_train, y_train, groups=groups_train)

fig, axes = plt.subplots(
    1, 2, figsize=(7, 3), sharey=True, layout="constrained"
)
for ax, (name, fitted) in zip(axes, [("β=0.2", model), ("β=0", no_reg)]):
    TrainingCurveDisplay.from_estimator(fitted, parts=("nce",), ax=[ax])
    ax.set_title(f"Contrastive term, {name}", fontsize="medium")
