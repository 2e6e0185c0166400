"""scikit-learn's estimator checks, run with fast parameters."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_crocs import CROCSClusterer

# The checks use tabular data with as few as one feature, so the CNN runs with
# kernels, strides and pools of 1; everything else is the real code path.
FAST_CNN = {"channels": (4,), "kernel_size": 1, "stride": 1, "pool_size": 1}


def _fast_estimators():
    yield CROCSClusterer(
        encoder="cnn",
        encoder_params=FAST_CNN,
        embedding_dim=8,
        max_epochs=3,
        lr=1e-2,
        validation_fraction=None,
        random_state=0,
    )
    # The other code paths: TP CROCS prototypes, NCE-hard, early stopping on a
    # validation split, and the ResNet encoder.
    yield CROCSClusterer(
        encoder="cnn",
        encoder_params=FAST_CNN,
        embedding_dim=8,
        loss="hard",
        prototypes="mean",
        max_epochs=3,
        validation_fraction=0.2,
        n_iter_no_change=1,
        random_state=0,
    )
    yield CROCSClusterer(
        encoder="resnet",
        encoder_params={"channels": (4, 8), "stem_kernel_size": 1, "kernel_size": 1},
        embedding_dim=8,
        max_epochs=2,
        validation_fraction=None,
        random_state=0,
    )


def _expected_failed_checks(estimator):
    return {
        "check_clustering": (
            "CROCS learns prototypes of attribute combinations and needs the "
            "attributes y in fit; this check fits clusterers without y."
        ),
    }


@parametrize_with_checks(list(_fast_estimators()), expected_failed_checks=_expected_failed_checks)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
