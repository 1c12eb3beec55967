"""The house rules: layers import only downward, nothing edits sys.path, and every file the
repository's text cites is in the repository."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from bench import import_costs

ROOT = Path(__file__).resolve().parent.parent

# The layers' folders and where their files sit in the package: one definition, shared with
# the import-cost bench (bench/import_costs.py).
FOLDERS = import_costs.LAYER_FOLDERS
installed_path = import_costs.installed_path
module_name = import_costs.module_of

#: Each layer and what it may import of the project (itself included), from the bottom up.
#: The front doors (qcn.cli, qcn.api) stand on top and may import everything; nothing
#: imports them but ``qcn`` itself, which names the API's on first use (its __getattr__).
LAYERS: dict[str, set[str]] = {
    "qcn": {"qcn.api", "qcn.core"},
    "qcn.core": {"qcn.core"},
    "qcn.reaction_point": {"qcn.core", "qcn.reaction_point"},
    "qcn.controller": {"qcn.core", "qcn.controller"},
    "qcn.simulator": {"qcn.core", "qcn.reaction_point", "qcn.simulator"},
    "qcn.topologies": {"qcn.core", "qcn.controller", "qcn.reaction_point", "qcn.topologies"},
    "qcn.wireshark": {"qcn.core", "qcn.wireshark"},
    # The lab: runs and studies of them, below the front doors (what they share with bench/
    # and the tests); its only way to the backends is its own seam, qcn.lab.backends.
    "qcn.lab": {
        "qcn.core",
        "qcn.controller",
        "qcn.reaction_point",
        "qcn.simulator",
        "qcn.topologies",
        "qcn.lab",
    },
    "qcn.ptf_tests": {
        "qcn.core",
        "qcn.controller",
        "qcn.topologies",
        "qcn.wireshark",
        "qcn.ptf_tests",
    },
}
FRONT_DOOR = "qcn.cli"
API = "qcn.api"
FRONT_DOORS = (FRONT_DOOR, API)
SOURCES = ("qcn/*.py", *(f"{d}/*.py" for d in FOLDERS))


def tracked(*patterns: str) -> list[Path]:
    out = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard",
         *patterns],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return [ROOT / line for line in out.splitlines() if (ROOT / line).is_file()]


def layer_of(module: str) -> str:
    """The layer of a project module: the package directly under ``qcn`` (or ``qcn``);
    ``python -m qcn`` is the front door's."""
    layer = ".".join(module.split(".")[:2])
    return FRONT_DOOR if layer == "qcn.__main__" else layer


def imports_of(path: Path) -> set[str]:
    """Every module of the project ``path`` imports, at any depth (lazy imports too), and
    every module it imports by a top-level name the namespace holds (``controller``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return {m for m in found if m.split(".")[0] in ("qcn", *FOLDERS)}


def upward_imports() -> list[str]:
    bad = []
    for path in tracked(*SOURCES):
        me = module_name(path)
        layer = layer_of(me)
        if layer in FRONT_DOORS:
            continue
        bad += [f"{me} imports {m}" for m in imports_of(path) if layer_of(m) not in LAYERS[layer]]
    return sorted(bad)


def test_layers_import_only_downward() -> None:
    assert upward_imports() == []


def import_graph() -> dict[str, set[str]]:
    """Each module of the package and the modules of it that it imports, at any depth (lazy
    imports too), each resolved as Python resolves it: ``from qcn.core import scenario``
    is the module qcn.core.scenario, ``from qcn.core.scenario import Scenario`` is too."""
    modules = {module_name(p): p for p in tracked(*SOURCES, "qcn/*/*.py")}

    def resolve(name: str) -> str:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    def imported(path: Path) -> set[str]:
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(resolve(a.name) for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.update(resolve(f"{node.module}.{a.name}") for a in node.names)
        return found

    return {me: imported(path) & set(modules) - {me} for me, path in modules.items()}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The cycles of ``graph``: its strongly connected parts of more than one module."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # (Tarjan's algorithm)
        order[v] = low[v] = len(order)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in order:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], order[w])
        if low[v] == order[v]:
            part = stack[stack.index(v) :]
            del stack[stack.index(v) :]
            if len(part) > 1:
                cycles.append(sorted(part))

    for v in sorted(graph):
        if v not in order:
            visit(v)
    return cycles


def test_the_import_graph_has_no_cycle() -> None:
    """topologies/backend.py -> experiment.py -> backend.py (Experiment.__init__ asked the
    backend for its refusal), and qcn -> qcn.api -> ... -> qcn.cli.main -> qcn (the
    version) were the two."""
    assert import_cycles(import_graph()) == []
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_version_has_one_source() -> None:
    """pyproject.toml's, which ``qcn --version`` and ``qcn.__version__`` read."""
    import tomllib  # noqa: PLC0415

    import qcn  # noqa: PLC0415

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert qcn.__version__ == version
    r = subprocess.run([sys.executable, "-m", "qcn", "--version"], capture_output=True,
                       text=True, check=True)  # fmt: skip
    assert (r.stdout, r.stderr) == (f"qcn-p4 {version}\n", "")


def test_every_package_is_a_known_layer() -> None:
    """A new package under ``qcn`` is placed in the layers before it lands."""
    packages = {layer_of(module_name(p)) for p in tracked(*SOURCES)}
    assert packages == {*LAYERS, *FRONT_DOORS}


@pytest.mark.parametrize("module", ["qcn", "qcn.core.results"])
def test_importing_a_layer_brings_nothing_of_the_front_doors(module: str) -> None:
    """``qcn`` names the API's functions (``qcn.run``) but imports them on first use: a
    layer's import of ``qcn.core`` runs ``qcn/__init__.py``, and must not bring the
    commands or the API with it.  Asking for ``qcn.run`` does."""
    check = (
        f"import sys, {module}; import qcn; "
        "print(sorted(m for m in sys.modules if m.startswith(('qcn.cli', 'qcn.api')))); "
        "qcn.run; print('qcn.api' in sys.modules, 'qcn.cli.run' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.splitlines()
    assert out == ["[]", "True True"]


def test_nothing_imports_a_layer_by_its_top_level_name() -> None:
    """The checkout's top-level folders are importable from it, but the installed project
    has them under ``qcn`` only: an import of ``controller`` works here and nowhere else."""
    offenders = [
        f"{module_name(path)} imports {m}"
        for path in tracked(*SOURCES, "tests/*.py", "bench/*.py")
        for m in imports_of(path)
        if m.split(".")[0] in FOLDERS
    ]
    assert offenders == []


def test_the_checkout_holds_no_symbolic_link() -> None:
    """Each file once, where git has it: a link would show a folder twice (to ``find -L``,
    to a reader of the imports) and name in tracebacks a path git does not know."""
    staged = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "--stage"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert [line for line in staged if line.startswith("120000")] == []
    assert [p for p in tracked("*") if p.is_symlink()] == []


def test_the_package_maps_the_design_cards_folders() -> None:
    """pyproject.toml names each folder under qcn, and lists every package the checkout
    has: a new one is placed in the layers (above) and in the distribution."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["package-dir"] == {f"qcn.{d}": d for d in FOLDERS}
    inside = {".".join(p.relative_to(ROOT).parent.parts) for p in tracked("qcn/*")}
    assert sorted(setuptools["packages"]) == sorted({*inside, *(f"qcn.{d}" for d in FOLDERS)})


#: A module of each layer, and of the front doors.
ONE_OF_EACH = (
    "qcn.controller.agent",
    "qcn.reaction_point.rules",
    "qcn.simulator.engine",
    "qcn.topologies.errors",
    "qcn.ptf_tests.run",
    "qcn.core.errors",
    "qcn.wireshark",
    "qcn.cli.main",
    "qcn.api",
)

#: Prints the file each of ONE_OF_EACH is imported from; then what importing each layer by
#: its folder's name says; then how many classes QcnError is, reached four ways.
WHERE_FROM = f"""
import importlib
for name in {ONE_OF_EACH}:
    print(importlib.import_module(name).__file__)
for folder in {FOLDERS}:
    try:
        importlib.import_module(folder + ".errors")
    except ImportError as e:
        print(type(e).__name__, e)
import qcn, qcn.api, qcn.controller.errors, qcn.core.errors
print(len({{qcn.QcnError, qcn.api.QcnError, qcn.controller.errors.QcnError,
          qcn.core.errors.QcnError}}))
"""


@pytest.mark.parametrize("where", ["checkout", "elsewhere"])
def test_each_module_is_imported_once_from_the_file_git_has(where: str, tmp_path: Path) -> None:
    """A layer is imported from its one folder, so that a traceback or ``__file__`` names a
    path git knows, and under its qcn name only.  From the checkout, whose root is on the
    import path, a layer's folder name fails and says what to import instead (else
    ``controller.errors`` would be a second module beside ``qcn.controller.errors``, whose
    errors an ``except`` of the other's misses); elsewhere it is no module at all."""
    cwd = ROOT if where == "checkout" else tmp_path
    out = subprocess.run(
        [sys.executable, "-c", WHERE_FROM], capture_output=True, text=True, check=True, cwd=cwd
    ).stdout.splitlines()
    files = [Path(line) for line in out[: len(ONE_OF_EACH)]]
    for name, file in zip(ONE_OF_EACH, files, strict=True):
        layer = name.split(".")[1]
        assert file.relative_to(ROOT).parts[0] == (layer if layer in FOLDERS else "qcn"), name
    assert tracked(*(str(f.relative_to(ROOT)) for f in files)) == sorted(files)
    refused = out[len(ONE_OF_EACH) : -1]
    if where == "checkout":
        assert refused == [
            f"ImportError import qcn.{d}: {d}/ is its folder (docs/layout.md)" for d in FOLDERS
        ]
    else:
        assert refused == [f"ModuleNotFoundError No module named '{d}'" for d in FOLDERS]
    assert out[-1] == "1"


def test_only_the_backend_seam_imports_the_backends() -> None:
    """Every command, and the API, runs its scenarios through qcn.lab.backends."""
    offenders = [
        f"{module_name(path)} imports {imported}"
        for path in tracked("qcn/cli/*.py", "qcn/api/*.py", "qcn/lab/*.py")
        if path.name != "backends.py"
        for imported in imports_of(path)
        if imported.startswith(("qcn.simulator", "qcn.topologies"))
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
        for path in tracked(*SOURCES, "bench/*.py")
        if path != TOPOLOGY_UNIT and not path.is_relative_to(ROOT / "ptf_tests")
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


def test_no_command_asks_which_backend_it_is() -> None:
    """A backend is one unit that declares what it does (qcn.core.backend.Backend): no code
    outside the backends' own modules and their registration compares a backend's name."""
    own = {ROOT / "simulator" / "backend.py", ROOT / "topologies" / "backend.py",
           ROOT / "qcn" / "lab" / "backends.py"}  # fmt: skip
    offenders = []
    for path in tracked(*SOURCES, "bench/*.py"):
        if path in own:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            listed = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else []
            compared = list(ast.walk(node)) if isinstance(node, ast.Compare) else []
            if isinstance(node, ast.expr) and any(
                isinstance(c, ast.Constant) and c.value in BACKEND_NAMES
                for c in [*listed, *compared]
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            if isinstance(node, ast.JoinedStr) and any(
                isinstance(c, ast.Constant) and c.value in {f"{w}-" for w in BACKEND_WORDS}
                for c in node.values
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: a folder by a name")
    assert offenders == []


#: ``--backend``'s names, which code outside the backends' modules neither compares nor
#: lists (compare and tune read a backend's declared name: ``("sim", "bmv2")`` was tune's).
BACKEND_NAMES = ("sim", "mininet")
#: ... and the words of result folders named by hand (compare's ``bmv2-K``, read by tune).
BACKEND_WORDS = (*BACKEND_NAMES, "bmv2")


#: The generators of the traffic patterns: the only code that names a pattern to tell
#: it from another (qcn.core.patterns declares what everything else asks).
PATTERN_GENERATORS = {
    ROOT / "qcn" / "core" / "patterns.py",
    ROOT / "simulator" / "engine.py",  # (its sources' loop; its refusals read the declaration)
    ROOT / "reaction_point" / "sources.py",
    ROOT / "topologies" / "experiment.py",  # (the hosts' sources' arguments)
    ROOT / "topologies" / "iperf.py",
}


def test_no_pattern_is_told_by_its_name_outside_its_generators() -> None:
    """A pattern's kind, engines and backends are declared once (qcn.core.patterns): 28
    literal tests (``pattern == "flows"``) in 10 files each knew some of it."""
    from qcn.core.patterns import names  # noqa: PLC0415

    offenders = []
    for path in tracked(*SOURCES, "qcn/*/*.py", "bench/*.py"):
        if path in PATTERN_GENERATORS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Compare):
                continue
            parts = list(ast.walk(node))
            told = any(isinstance(c, ast.Constant) and c.value in names() for c in parts)
            about = any(
                (isinstance(c, ast.Attribute) and c.attr == "pattern")
                or (isinstance(c, ast.Name) and c.id in ("pattern", "PATTERNS"))
                for c in parts
            )
            if told and about:
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_every_import_inside_a_function_is_of_a_module_that_costs_start_up_time() -> None:
    """Imports at the top of modules, but the libraries docs/layout.md lists with their
    measured cost (bench/import_costs.py) and the modules of the project that bring one."""
    assert import_costs.unlisted_lazy_imports() == []


def test_every_library_kept_lazy_is_kept_so_somewhere() -> None:
    assert import_costs.listed_libraries()  # (the table is where the bench reads it)
    assert import_costs.unused_rows() == []


def test_a_cheap_import_inside_a_function_is_found(tmp_path: Path) -> None:
    """The check reads what it should: an import of the standard library inside a
    function is one, a listed library's is not, a module's __getattr__'s is not."""
    module = tmp_path / "m.py"
    module.write_text(
        "def f():\n    import json\n    import matplotlib.pyplot\n"
        "def __getattr__(name):\n    import csv\n"
    )
    found = import_costs.lazy_imports({"qcn.m": module}, root=tmp_path)
    assert [(i.module, i.where) for i in found] == [
        ("json", "m.py:2"),
        ("matplotlib.pyplot", "m.py:3"),
    ]
    listed = ["matplotlib"]
    assert [i.module for i in found if not import_costs.is_listed(i.module, listed)] == ["json"]
