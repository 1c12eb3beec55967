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

from tests.test_structure import LINKED, ROOT, tracked


def test_the_wheel_installs_one_top_level_package(tmp_path: Path) -> None:
    # The tracked files only, copied as git has them (the namespace's links stay links), so
    # that the build writes nothing into the checkout.
    source = tmp_path / "checkout"
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in listed:
        if not (ROOT / name).is_symlink() and not (ROOT / name).exists():
            continue  # (deleted, not yet committed)
        to = source / name
        to.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, to, follow_symlinks=False)
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
    # Every module of every layer is in it, under the namespace.
    for layer in LINKED:
        for path in tracked(f"{layer}/*.py"):
            assert f"qcn/{path.relative_to(ROOT)}" in names, path
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "qcn = qcn.cli.main:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
