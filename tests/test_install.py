"""What `pip install .` puts into site-packages: the project under its one name, ``qcn``
(docs/layout.md).  The checkout's layer folders (controller/, simulator/, ...) stay where
the design card puts them; the distribution names them qcn.controller, qcn.simulator, ...
and claims no generic top-level name a user's own module could collide with."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.test_structure import FOLDERS, ROOT, installed_path, tracked


def test_the_wheel_installs_one_top_level_package(tmp_path: Path) -> None:
    # The tracked files only, so that the build writes nothing into the checkout.
    source = tmp_path / "checkout"
    for path in tracked("*"):
        to = source / path.relative_to(ROOT)
        to.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, to)
    # (Without the compiled core: its build is make venv's, and took most of this minute.)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "-q",
         "-w", str(tmp_path / "wheel")],
        capture_output=True, text=True, check=False, env={**os.environ, "QCN_BUILD_CORE": "0"},
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "wheel").glob("qcn_p4-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"qcn"}
    # Every module and data file of the package is in it, each layer's under qcn/ (its
    # typing stub too), but for the PTF test cases: they run from a checkout.
    package = tracked("qcn/*", *(f"{d}/*.py*" for d in FOLDERS))
    wanted = {str(installed_path(p)) for p in package}
    test_cases = {n for n in wanted if n.startswith("qcn/ptf_tests/test_")}
    assert len(test_cases) == len(tracked("ptf_tests/test_*.py")) > 0
    assert sorted(wanted - test_cases - set(names)) == []
    assert [n for n in names if n.startswith("qcn/ptf_tests/test_")] == []
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "qcn = qcn.cli.main:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
