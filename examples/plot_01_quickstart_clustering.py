"""
======================================================
Quickstart: cluster ECGs by diagnosis, sex and age
======================================================

Fit a :class:`~sklearn_crocs.CROCSClusterer` on real 12-lead ECGs that ship
with the package, give held-out ECGs the attributes of their nearest
clinical prototype, and score that as in the paper's Table 1.

The data are the 500 PTB-XL records of
:func:`~sklearn_crocs.datasets.load_ptbxl_sample` cut into 5-s frames, as
the paper does for PTB-XL. The attributes are the diagnostic class (NORM,
or ABN for any abnormality), sex and age quartile: 2 x 2 x 4 = 16
combinations, each with its prototype. The patients are split 60:40, so
that no patient is on both sides.
"""

# %%
# The data
# --------
# :func:`~sklearn_crocs.datasets.load_ptbxl_sample_frames` returns the
# frames of the training and of the test patients with their attributes;
# the age quartiles are fitted on the training patients only.
import sys

import matplotlib.pyplot as plt
from sklearn.metrics import ConfusionMatrixDisplay

from sklearn_crocs import CROCSClusterer
from sklearn_crocs.datasets import load_ptbxl_sample_frames
from sklearn_crocs.metrics import attribute_ami_score, evaluate_prototypes
from sklearn_crocs.plotting import PrototypeDisplay

data = load_ptbxl_sample_frames(random_state=0)
X_train, y_train = data.X_train, data.y_train
X_test, y_test = data.X_test, data.y_test
print(f"training frames: {X_train.shape}, test frames: {X_test.shape}")
y_train.head()

# %%
# Fit the estimator
# -----------------
# The defaults are the ones measured on this sample (see the user guide's
# :ref:`defaults` page): two ResNet encoders whose 128-dimensional
# embeddings are joined (256 values, ``n_features_out_``), 40 epochs.
# ``groups`` (the patient of each frame) is only needed for early stopping
# on held-out patients, which the defaults leave off.
model = CROCSClusterer(random_state=0)
model.fit(X_train, y_train, groups=data.groups_train)
print(f"{model.n_iter_} epochs, {len(model.prototypes_)} prototypes")

# %%
# One prototype per combination of class, sex and age group, with the number
# of training frames that have it (a DataFrame, as ``y_train`` is one):
prototypes = model.prototype_attributes_
prototypes.assign(n_training_frames=model.prototype_counts_).head(8)

# %%
# Assign attributes to held-out ECGs
# ----------------------------------
# :meth:`~sklearn_crocs.CROCSClusterer.predict` returns the attributes of the
# nearest prototype, in the layout of ``y`` (here a DataFrame).
predicted = model.predict(X_test)
predicted.head()

# %%
# Rows are the true values of the held-out ECGs, columns the values of their
# nearest prototype: most ECGs get their own class; the age group is read
# much less well (a quarter right would be chance).
fig, axes = plt.subplots(1, 2, figsize=(7, 3.4), layout="constrained")
for ax, (i, attribute) in zip(axes, [(0, "class"), (2, "age")]):
    ConfusionMatrixDisplay.from_predictions(
        y_test[attribute],
        predicted[attribute],
        labels=list(model.categories_[i]),
        ax=ax,
        cmap="Blues",
        colorbar=False,
    )
    ax.set_title(f"{attribute} (held-out patients)")

# %%
# Accuracy flatters a model that predicts the most frequent value everywhere.
# The adjusted mutual information is about 0 for such a model (or a random
# one) and 1 for a perfect one, whatever the balance of the values.
attribute_ami_score(y_test, predicted).round(3)

# %%
# The prototype map
# -----------------
# :class:`~sklearn_crocs.plotting.PrototypeDisplay` projects the prototypes
# (large, black edge) and the embeddings of the held-out ECGs (small) to two
# dimensions: colour is the class, marker the sex, size the age group.
display = PrototypeDisplay.from_estimator(model, X_test, y_test)

# %%
# Both tables of the paper
# ------------------------
# :func:`~sklearn_crocs.metrics.evaluate_prototypes` scores the learned
# prototypes (CP CROCS) and the mean training embeddings (TP CROCS) on the
# held-out patients: accuracy and AMI per attribute (Table 1) and the
# precision at K by number of matched attributes (Table 2).
result = evaluate_prototypes(model, X_test, y_test, file=sys.stdout)

# %%
# The same model on the paper's full databases is the subject of
# :ref:`sphx_glr_auto_examples_plot_07_ptbxl_chapman_workflow.py`.

# sphinx_gallery_thumbnail_number = 2
