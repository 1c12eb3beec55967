"""The compiled event core, qcn.simulator._core (simulator/_core.cpp; docs/simulator.md).

Everything else about the project is in pyproject.toml.  The core is an optional
extension: a machine without a C++ compiler or Python's headers still installs the project,
and the simulator says in one line that it runs its Python engine
(``qcn.simulator.compiled.CORE_MISSING``).
"""

import hashlib
import os
from pathlib import Path

from setuptools import setup

CORE_SOURCE = "simulator/_core.cpp"
CORE_SHA256 = hashlib.sha256(Path(CORE_SOURCE).read_bytes()).hexdigest()

BUILD_CORE = os.environ.get("QCN_BUILD_CORE", "1") != "0"
"""QCN_BUILD_CORE=0 leaves the core out (the wheel test, which checks the package's names
and not the compiler's work: it saved most of that test's minute)."""

try:
    from pybind11.setup_helpers import Pybind11Extension
except ImportError:  # (only without build isolation: pip installs pybind11 for the build)
    print("setup.py: pybind11 is not installed: the simulator's compiled core is not built")
    ext_modules = []
else:
    ext_modules = [
        Pybind11Extension(
            "qcn.simulator._core",
            [CORE_SOURCE],
            cxx_std=17,
            # The source it was built from, so a stale build is known for one (compiled.py).
            define_macros=[("QCN_CORE_SOURCE_SHA256", CORE_SHA256)],
            # The same floats as Python's: no fused multiply-add, no fast-math.
            extra_compile_args=["-O3", "-ffp-contract=off", "-fno-fast-math"],
            optional=True,
        )
    ]
    if not BUILD_CORE:
        print("setup.py: QCN_BUILD_CORE=0: the simulator's compiled core is not built")
        ext_modules = []

setup(ext_modules=ext_modules)
