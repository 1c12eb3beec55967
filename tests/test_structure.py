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
        "qcn.tune",
        "qcn.compare",
        "qcn.schemes",
        "qcn.backends",
        "qcn.net",
        "qcn.options",
        "qcn.live",
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


# -- one topology unit (docs/topology.md) -------------------------------------------------------

#: A switch port written as a literal: an interface (s2-eth1) or a port reference (s2:1).
PORT_LITERAL = re.compile(r"\bs\d+(-eth\d+|:\d+)\b")
TOPOLOGY_UNIT = ROOT / "qcn" / "core" / "topology.py"


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes (module, class and function doc; attribute docs)."""
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for stmt in body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                out.add(id(stmt.value))
    return out


def port_literals(path: Path) -> list[str]:
    """Code (not docs or comments) in ``path`` that names a switch port literally, or binds
    a ``*_PORT`` name to a switch port number."""
    tree = ast.parse(path.read_text())
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docs
            and PORT_LITERAL.search(node.value)
        ):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            value = node.value.value
            for target in node.targets:
                name = target.id if isinstance(target, ast.Name) else ""
                if (
                    name.endswith("_PORT")
                    and not name.startswith("MAX_")
                    and isinstance(value, int)
                    and 0 < value < 512
                ):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name} = {value}")
    return found


def test_no_port_literal_outside_the_topology_unit() -> None:
    """A network's ports are the topology's (qcn/core/topology.py): no backend, experiment
    or command writes one down (the issue's HOTSPOT_PORT, s2-eth1, ...)."""
    offenders = [
        hit
        for path in tracked(*(f"{p}/*.py" for p in PROJECT), "bench/*.py")
        if path != TOPOLOGY_UNIT
        for hit in port_literals(path)
    ]
    assert offenders == []


def test_no_backend_picks_a_topology_by_name() -> None:
    """Backends and experiments read the topology's facts; none branches on which topology
    it is (``network.topology == "multihop"``)."""
    offenders = []
    for path in tracked("topologies/*.py", "simulator/*.py", "qcn/*.py", "controller/*.py"):
        if path.parent == ROOT / "qcn" / "core":
            continue  # the topology unit and the scenario's side of it
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                names = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
                if "topology" in names and any(
                    isinstance(c, ast.Constant) and isinstance(c.value, str) for c in ast.walk(node)
                ):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []
