"""The compiled event core, simulator._core (simulator/_core.cpp; docs/simulator.md).

Everything else about the project is in pyproject.toml.  The core is an optional
extension: a machine without a C++ compiler or Python's headers still installs the project,
and the simulator says in one line that it runs its Python engine
(``simulator.compiled.CORE_MISSING``).
"""

from setuptools import setup

try:
    from pybind11.setup_helpers import Pybind11Extension
except ImportError:  # (only without build isolation: pip installs pybind11 for the build)
    print("setup.py: pybind11 is not installed: the simulator's compiled core is not built")
    ext_modules = []
else:
    ext_modules = [
        Pybind11Extension(
            "simulator._core",
            ["simulator/_core.cpp"],
            cxx_std=17,
            # The same floats as Python's: no fused multiply-add, no fast-math.
            extra_compile_args=["-O3", "-ffp-contract=off", "-fno-fast-math"],
            optional=True,
        )
    ]

setup(ext_modules=ext_modules)
