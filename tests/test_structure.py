"""The house rules: layers import only downward, nothing edits sys.path, and every file the
repository's text cites is in the repository."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Each layer and what it may import of the project (itself included).  The front door
#: (qcn.cli, qcn.run) stands on top and may import everything.
LAYERS: dict[str, set[str]] = {
    "qcn.core": {"qcn.core"},
    "reaction_point": {"qcn.core", "reaction_point"},
    "controller": {"qcn.core", "controller"},
    "simulator": {"qcn.core", "reaction_point", "simulator"},
    "topologies": {"qcn.core", "controller", "reaction_point", "topologies"},
}
PROJECT = ("qcn", "controller", "reaction_point", "simulator", "topologies")


def tracked(*patterns: str) -> list[Path]:
    out = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard",
         *patterns],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return [ROOT / line for line in out.splitlines() if (ROOT / line).is_file()]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


FRONT_DOOR = "the front door"


def layer_of(module: str) -> str:
    """The layer of a project module (its top-level package; qcn.core; or the front door)."""
    if module == "qcn.core" or module.startswith("qcn.core."):
        return "qcn.core"
    if module == "qcn" or module.startswith("qcn."):
        return FRONT_DOOR
    return module.split(".", maxsplit=1)[0]


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth (lazy imports too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return {m for m in found if m.split(".")[0] in PROJECT}


def upward_imports() -> list[str]:
    bad = []
    for path in tracked(*(f"{p}/*.py" for p in PROJECT)):
        me = module_name(path)
        layer = layer_of(me)
        if layer == FRONT_DOOR:
            continue
        bad += [f"{me} imports {m}" for m in imports_of(path) if layer_of(m) not in LAYERS[layer]]
    return sorted(bad)


def test_layers_import_only_downward() -> None:
    assert upward_imports() == []


def test_the_core_imports_nothing_of_the_layers_above() -> None:
    above = ("controller", "reaction_point", "simulator", "topologies", "qcn.cli", "qcn.run")
    for path in tracked("qcn/core/*.py"):
        for imported in imports_of(path):
            assert not imported.startswith(above), f"{module_name(path)} imports {imported}"


def test_the_front_door_is_the_only_one_above_everything() -> None:
    front = {module_name(p) for p in tracked("qcn/*.py") if p.parent == ROOT / "qcn"}
    assert front == {
        "qcn",
        "qcn.__main__",
        "qcn.cli",
        "qcn.run",
        "qcn.sweep",
        "qcn.compare",
        "qcn.schemes",
        "qcn.backends",
        "qcn.net",
    }


def test_only_the_backend_seam_imports_the_backends() -> None:
    """Every command runs its scenarios through qcn.backends (what a backend refuses is
    decided there too, by qcn.core.scenario.backend_refusal)."""
    offenders = [
        f"{module_name(path)} imports {imported}"
        for path in tracked("qcn/*.py")
        if path.parent == ROOT / "qcn" and path.name != "backends.py"
        for imported in imports_of(path)
        if imported.startswith(("simulator", "topologies"))
    ]
    assert offenders == []


def test_nothing_edits_the_import_path() -> None:
    offenders = []
    for path in tracked("*.py", "Makefile", "*.sh"):
        if path == Path(__file__).resolve():
            continue
        text = path.read_text()
        if re.search(r"sys\.path\.(insert|append|extend)|PYTHONPATH", text):
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


#: Text that cites a file of the repository: a path under one of its folders.
CITED = re.compile(
    r"(?<![\w./-])((?:docs|tests|bench|p4src|controller|reaction_point|topologies|simulator|"
    r"qcn|ptf_tests|scripts)/[\w./-]*\w\.(?:py|p4|md|toml|sh|txt))"
)


@pytest.mark.parametrize("pattern", ["*.py", "*.md", "*.p4", "*.toml", "Makefile", "*.sh"])
def test_every_cited_file_exists_and_nothing_points_outside(pattern: str) -> None:
    dangling, outside = [], []
    for path in tracked(pattern):
        if path == Path(__file__).resolve():
            continue
        text = path.read_text()
        rel = path.relative_to(ROOT)
        for cited in CITED.findall(text):
            if not (ROOT / cited).exists() and not any(c in cited for c in "*"):
                dangling.append(f"{rel}: {cited}")
        if re.search(r"\.\./shared|shared/(qcn-spec|bmv2-notes|seeds|style)", text):
            outside.append(str(rel))
    assert dangling == []
    assert outside == []
