"""The compiled event core, qcn.simulator._core (simulator/_core.cpp; docs/simulator.md).

Everything else about the project is in pyproject.toml.  The core is an optional
extension: a machine without a C++ compiler or Python's headers still installs the project,
and the simulator says in one line that it runs its Python engine
(``qcn.simulator.compiled.CORE_MISSING``).
"""

import hashlib
import os
import warnings
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

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

# An editable install warns that a folder named like the package, in the working directory,
# may be imported before it: here that folder, qcn/, is the package (docs/layout.md).
warnings.filterwarnings("ignore", message="Editable installation")


class BuildPy(build_py):
    """The wheel leaves out the PTF test cases (ptf_tests/test_*.py): like tests/, they run
    from a checkout (docs/layout.md); the runner and its helpers ship."""

    def find_package_modules(self, package: str, package_dir: str) -> list[tuple[str, str, str]]:
        modules: list[tuple[str, str, str]] = super().find_package_modules(package, package_dir)
        if package == "qcn.ptf_tests":
            modules = [m for m in modules if not m[1].startswith("test_")]
        return modules


setup(ext_modules=ext_modules, cmdclass={"build_py": BuildPy})
