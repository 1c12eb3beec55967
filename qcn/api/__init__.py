"""The Python API: what the ``qcn`` command line does, from code (a notebook, a script).

:func:`run` makes the run ``qcn run`` makes and returns its :class:`Result` (its summary,
its tables as pandas DataFrames, its plots as matplotlib figures); :class:`Network` is a
network as ``qcn net show`` and ``qcn net draw`` see it; :func:`sweep`, :func:`tune` (its
:class:`Study`) and :func:`compare` are ``qcn sweep``, ``qcn tune`` and ``qcn compare``.
Each calls the functions its command calls, with the command's defaults, and a user's
mistake raises :class:`QcnError` with the line the command prints.  ``qcn`` names them
all (``qcn.run``), imported on first use (docs/python.md).

Like :mod:`qcn.cli`, this is a front door: it may import every layer, and no layer imports
it.
"""

from qcn.api.network import Network
from qcn.api.runs import Figures, Result, run
from qcn.api.studies import Study, compare, sweep, tune
from qcn.core.errors import QcnError

__all__ = [
    "Figures",
    "Network",
    "QcnError",
    "Result",
    "Study",
    "compare",
    "run",
    "sweep",
    "tune",
]
