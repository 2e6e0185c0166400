"""The engine of the package's neural estimators.

- :mod:`~sklearn_crocs._engine._neural`: what every neural estimator shares
  (signal checks, device, validation split, pretrained encoder, skorch net);
- :mod:`~sklearn_crocs._engine._base`: the prototype clusterer that
  ``CROCSClusterer`` and ``DTC`` share (fit, predict, transform);
- :mod:`~sklearn_crocs._engine._rates`, :mod:`~sklearn_crocs._engine._nets`:
  the components that ``CROCSClusterer`` builds from its parameters (the
  signals' rates; the ensemble of nets and their placement);
- :mod:`~sklearn_crocs._engine._prototypes`: the fitted prototypes.
"""
