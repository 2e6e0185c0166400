"""scikit-learn's estimator checks, run with fast parameters."""

from sklearn.utils.estimator_checks import parametrize_with_checks
from skorch.callbacks import LRScheduler

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


class _LRScheduler(LRScheduler):
    """skorch's LRScheduler with a repr free of memory addresses, which would vary the test ids."""

    def __repr__(self):
        return f"LRScheduler(policy={self.policy!r}, **{self.kwargs})"


# Extra skorch callbacks: the checks that parameters survive fit unchanged,
# cloning, pickling and refitting cover them too.
WITH_CALLBACKS = CROCSClusterer(
    encoder="cnn",
    encoder_params=FAST_CNN,
    embedding_dim=8,
    max_epochs=2,
    validation_fraction=None,
    random_state=0,
    callbacks=[("lr", _LRScheduler(policy="StepLR", step_size=1, gamma=0.5))],
)


@parametrize_with_checks(
    [*_fast_estimators(), WITH_CALLBACKS], expected_failed_checks=_expected_failed_checks
)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
