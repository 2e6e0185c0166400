"""scikit-learn's estimator checks for the baselines, with fast parameters."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_crocs import CROCSClusterer
from sklearn_crocs.baselines import (
    DTC,
    DTCR,
    IIC,
    DeepCluster,
    KMeansCROCS,
    KMeansEP,
    KMeansRaw,
    SeLA,
)

# The checks use tabular data with as few as one feature, so the CNN runs with
# kernels, strides and pools of 1 (as in tests/test_common.py). Everything is
# pinned here, so that changes of CROCSClusterer's defaults (which the
# baselines follow) do not change these runs.
FAST_CNN = {"channels": (4,), "kernel_size": 1, "stride": 1, "pool_size": 1}
FAST = {"encoder": "cnn", "encoder_params": FAST_CNN, "embedding_dim": 8, "max_epochs": 3,
        "lr": 1e-2, "batch_size": 32, "random_state": 0}  # fmt: skip


def _fast_estimators():
    yield DTC(**FAST, validation_fraction=None)
    yield KMeansRaw(n_clusters=3, n_init=2, random_state=0)
    yield KMeansCROCS(CROCSClusterer(**FAST, validation_fraction=None), n_init=2, random_state=0)
    # Early stopping on a patient-grouped validation split.
    yield KMeansEP(**FAST, n_init=2, validation_fraction=0.2, n_iter_no_change=1)
    yield DeepCluster(n_clusters=3, n_init=2, **FAST)
    # check_clustering needs the clusters of 3 blobs; IIC and SeLA cluster by
    # their head's argmax, so they need some epochs to use all 3 clusters (IIC
    # twice as many: its main head trains every other epoch).
    yield IIC(n_clusters=3, **{**FAST, "max_epochs": 40, "lr": 3e-3}, validation_fraction=None)
    yield SeLA(n_clusters=3, **{**FAST, "max_epochs": 30})
    yield DTCR(n_clusters=3, n_init=2, **FAST, validation_fraction=None)


def _expected_failed_checks(estimator):
    # DTC is no ClusterMixin (it predicts attribute values), so the check does not run.
    if isinstance(estimator, (KMeansCROCS, KMeansEP)):
        return {
            "check_clustering": (
                f"{type(estimator).__name__} is trained on the attributes y (CROCS's, or the "
                "class for KMeansEP); this check fits clusterers without y. Its clustering is "
                "tested with y, against the untrained model, in test_baselines.py."
            ),
        }
    return {}


@parametrize_with_checks(list(_fast_estimators()), expected_failed_checks=_expected_failed_checks)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
