"""The ``sklearn-crocs`` command: CROCS on ECG records, without Python.

``sklearn-crocs fit``, ``predict``, ``search``, ``score`` and ``evaluate`` read a
folder of WFDB records (e.g. PhysioNet/CinC challenge or LUDB folders) and EDF/EDF+ files,
an EDF file, a ``.npy``/``.npz`` array with ``--sampling-rate``, or the
bundled data (``bundled:ptbxl-sample``, ``bundled:ludb``). Each record is
read at its own rate, conditioned whole to the working rate
(:class:`~sklearn_crocs.preprocessing.SignalConditioner`, the estimator's
``working_rate`` by default), cut into frames
(:func:`~sklearn_crocs.preprocessing.make_frames`), and a
:class:`~sklearn_crocs.CROCSClusterer` is trained, applied or queried. The
model folder holds the estimator's safe file and the reading settings
(``settings.json``), so that ``predict`` and ``search`` prepare new records
exactly as ``fit`` did, whatever their rate. Without a subcommand the command
runs the main job (:mod:`sklearn_crocs.cli._job`).

The parser is in :mod:`~sklearn_crocs.cli._parser`, the commands in
:mod:`~sklearn_crocs.cli._commands` (``evaluate`` in
:mod:`~sklearn_crocs.cli._evaluate`) and the reading of records in
:mod:`~sklearn_crocs.cli._records`. This package is the command line, not a
Python API: its one name, ``main``, is the entry point.

Exit status: 0 on success, 2 for a malformed command line, 1 for any other
error (unreadable data, existing output, invalid query), reported on one line
of standard error; ``--debug`` shows the traceback instead. Record contents
and patient attributes are never printed: standard output and error carry
counts, record names, file problems and the model's categories; predicted
attributes go only to the ``--out`` file.
"""

from ._parser import main

__all__ = ["main"]
