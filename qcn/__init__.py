"""qcn-p4: IEEE 802.1Qau Quantized Congestion Notification on P4/BMv2.

One namespace, from the bottom up: the shared core (:mod:`qcn.core`: parameters, the
congestion point's reference model, the frame layouts, scenarios); the layers on it, whose
sources sit at the top of the checkout where the design card puts them and which this
package names (:mod:`qcn.controller`, :mod:`qcn.reaction_point`, :mod:`qcn.simulator`,
:mod:`qcn.topologies`, :mod:`qcn.ptf_tests`; docs/layout.md says why); and two front doors
on top: the ``qcn`` command (:mod:`qcn.cli`) and the Python API (:mod:`qcn.api`), whose
names this package gives (``qcn.run``, ``qcn.Network``: docs/python.md).  The data plane is
``p4src/``.

The API's names are imported on first use (:func:`__getattr__`): importing ``qcn``, or any
layer's ``qcn.core``, brings nothing of the commands with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

API = ("run", "Result", "Figures", "Network", "sweep", "tune", "Study", "compare", "QcnError")
"""The names of :mod:`qcn.api` that ``qcn`` gives (``qcn.run``), in the order
docs/python.md lists them."""

if TYPE_CHECKING:  # (what a type checker reads: the names' own types)
    from qcn.api import Figures as Figures
    from qcn.api import Network as Network
    from qcn.api import QcnError as QcnError
    from qcn.api import Result as Result
    from qcn.api import Study as Study
    from qcn.api import compare as compare
    from qcn.api import run as run
    from qcn.api import sweep as sweep
    from qcn.api import tune as tune


def __getattr__(name: str) -> Any:
    """One of :data:`API`, imported from :mod:`qcn.api` when first asked for."""
    if name == "__version__":  # (pyproject.toml's: its one source)
        from qcn.core.provenance import package_version  # noqa: PLC0415

        return package_version()
    if name in API:
        import qcn.api as api  # noqa: PLC0415, PLR0402 - on first use: `import qcn` stays light

        return getattr(api, name)
    raise AttributeError(f"module 'qcn' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *API])
