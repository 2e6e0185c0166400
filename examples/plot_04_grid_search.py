"""
===============================================================
Grid search over tau_w and beta with patient-grouped folds
===============================================================

:class:`~sklearn_crocs.CROCSClusterer` is a scikit-learn estimator, so its
hyperparameters are tuned with
:class:`~sklearn.model_selection.GridSearchCV`. Two things matter for ECGs:

* folds are split **by patient**
  (:class:`~sklearn.model_selection.GroupKFold` with ``groups``), or a model
  could score well by recognising patients seen in training;
* the scores handle several attribute columns: the AMI scorer
  (:func:`~sklearn_crocs.metrics.make_ami_scorer`) for clustering and the
  precision-at-K scorer
  (:func:`~sklearn_crocs.metrics.make_precision_at_k_scorer`) for
  retrieval, both usable in one multi-metric search.

The grid crosses the two parameters the paper studies: the temperature of
the soft assignment, :math:`\\tau_w` (uniform attraction for
:math:`\\tau_w = \\infty`), and the regulariser's :math:`\\beta` (off for 0).
"""

# %%
# Data
# ----
# 5-s 12-lead frames of the bundled PTB-XL sample (see
# :ref:`sphx_glr_auto_examples_plot_01_quickstart_clustering.py`). The
# search runs on the training patients; the test patients stay out of it.
import math
import sys

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.model_selection import GridSearchCV, GroupKFold

from sklearn_crocs import CROCSClusterer
from sklearn_crocs.datasets import load_ptbxl_sample_frames
from sklearn_crocs.metrics import (
    evaluate_prototypes,
    make_ami_scorer,
    make_precision_at_k_scorer,
)

data = load_ptbxl_sample_frames(random_state=0)
X_train, y_train, groups_train = data.X_train, data.y_train, data.groups_train
X_test, y_test = data.X_test, data.y_test
n_patients = len(np.unique(groups_train))
print(f"{n_patients} training patients, {len(X_train)} frames")

# %%
# The search
# ----------
# Four candidates, three patient-grouped folds, two scorers: the AMI of the
# assigned class and the precision at 10 with at least two matching
# attributes. ``refit="ami"`` picks the final model by the AMI. Each fit
# trains for 10 epochs, a quarter of the default, short enough for this
# page; a real search trains as long as the final model.
#
# ``groups`` goes to the splitter, so that both frames of a patient fall in
# the same fold. (To also let the estimator's own early-stopping split see
# the patients, enable scikit-learn's metadata routing and call
# ``CROCSClusterer(...).set_fit_request(groups=True)``.)
search = GridSearchCV(
    CROCSClusterer(max_epochs=10, random_state=0),
    param_grid={"tau_w": [0.5, math.inf], "beta": [0.0, 0.2]},
    scoring={
        "ami": make_ami_scorer(attribute="class"),
        "p_at_10": make_precision_at_k_scorer(k=10, min_matches=2),
    },
    refit="ami",
    cv=GroupKFold(n_splits=3),
)
search.fit(X_train, y_train, groups=groups_train)
print("best parameters:", search.best_params_)

# %%
# Cross-validated scores
# ----------------------
results = pd.DataFrame(search.cv_results_)
columns = ["param_tau_w", "param_beta", "mean_test_ami", "std_test_ami"]
columns += ["mean_test_p_at_10", "std_test_p_at_10", "mean_fit_time"]
results[columns].round(3)

# %%
# One heat map per scorer: rows :math:`\tau_w`, columns :math:`\beta`.
fig, axes = plt.subplots(1, 2, figsize=(7, 3), layout="constrained")
scorers = [("ami", "AMI (class)"), ("p_at_10", "P@10, >=2 attributes")]
for ax, (scorer, label) in zip(axes, scorers):
    table = results.pivot_table(
        index="param_tau_w", columns="param_beta", values=f"mean_test_{scorer}"
    )
    values = table.to_numpy()
    image = ax.imshow(values, cmap="viridis")
    ax.set_xticks(range(table.shape[1]), [f"β={b:g}" for b in table.columns])
    ax.set_yticks(range(table.shape[0]), [f"τw={t:g}" for t in table.index])
    middle = (values.min() + values.max()) / 2
    for (i, j), value in np.ndenumerate(values):
        color = "black" if value > middle else "white"
        ax.text(j, i, f"{value:.3f}", ha="center", va="center", color=color)
    ax.set_title(f"mean {label}, 3 folds", fontsize="medium")
    fig.colorbar(image, ax=ax, shrink=0.8)

# %%
# The refitted model on the test patients
# ---------------------------------------
# ``best_estimator_`` was refitted on all training patients with the best
# parameters; the held-out test patients give the final numbers.
best = search.best_estimator_
result = evaluate_prototypes(best, X_test, y_test, file=sys.stdout)
