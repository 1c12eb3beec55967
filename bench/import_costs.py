"""What each import the package keeps lazy would cost a command that does not need it.

    python -m bench.import_costs [--repeat N]

The package imports at the top of its modules, except the libraries listed in
docs/layout.md ("Imports kept lazy"), and the project's modules that import one of them at
their top.  This measures, for each listed library, the time ``import LIB`` adds to a
fresh interpreter that has already imported the command line (``qcn.cli.main``, what every
``qcn`` command loads), against that baseline measured in the same run: the median of
``--repeat`` fresh interpreters each.  A library's import is all of its modules the package
imports lazily (``bokeh`` is bokeh.models, bokeh.plotting, ...: ``import bokeh`` alone is
light).  A library whose import adds little (under a tenth
of the baseline) is flagged: it belongs at the top of its modules.

``tests/test_structure.py`` holds the code to the list: every import inside a function is
of a listed library or of a project module that imports one at its top (``lazy_imports``,
``costly_closure`` below), and every listed library is imported lazily somewhere.
"""

from __future__ import annotations

import argparse
import ast
import re
import statistics
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYOUT = ROOT / "docs" / "layout.md"
#: The layers whose sources sit at the top of the checkout (the design card's folders), the
#: only copy of each: the package names folder NAME qcn.NAME (pyproject.toml's package-dir;
#: docs/layout.md; tests/test_structure.py holds pyproject.toml to it).
LAYER_FOLDERS = ("controller", "reaction_point", "simulator", "topologies", "ptf_tests")
#: The package's sources: qcn/ and the layers' folders it maps under qcn.
PACKAGE_FOLDERS = ("qcn", *LAYER_FOLDERS)
BASELINE = "qcn.cli.main"
#: A row of docs/layout.md's table of lazy imports: | `library` | ... |
LISTED_ROW = re.compile(r"^\| `([\w.]+)` \|", re.M)
SECTION = "## Imports kept lazy"


@dataclass(frozen=True)
class LazyImport:
    module: str
    where: str  # path:line


def installed_path(path: Path) -> Path:
    """Where ``path``, a file of the package in the checkout, sits in an installed ``qcn``:
    a layer folder's under qcn/ (controller's agent.py is qcn's controller/agent.py)."""
    rel = path.relative_to(ROOT)
    return rel if rel.parts[0] == "qcn" else Path("qcn", rel)


def module_of(path: Path) -> str:
    """The module a source file of the package is imported as (a layer folder's under
    ``qcn.``)."""
    parts = installed_path(path).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_sources() -> dict[str, Path]:
    return {
        module_of(p): p
        for folder in PACKAGE_FOLDERS
        for p in sorted((ROOT / folder).rglob("*.py"))
        if "__pycache__" not in p.parts
    }


def known_modules(sources: dict[str, Path]) -> set[str]:
    """The package's modules: its sources' and its compiled ones' (each has a stub)."""
    stubs = {module_of(p) for f in PACKAGE_FOLDERS for p in (ROOT / f).rglob("*.pyi")}
    return set(sources) | stubs


def _names(node: ast.Import | ast.ImportFrom, known: set[str]) -> Iterator[str]:
    """The modules an import statement loads (``from a import b`` is module a.b if the
    package has it, else a)."""
    if isinstance(node, ast.Import):
        yield from (a.name for a in node.names)
    elif node.module and node.level == 0:
        for a in node.names:
            sub = f"{node.module}.{a.name}"
            yield sub if sub in known else node.module


def _top_level_imports(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """The imports a module runs when imported: its body's, at any depth of if/try/with
    and class bodies, but not inside functions nor under ``if TYPE_CHECKING``."""
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            if not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                stack += node.body + node.orelse
        elif isinstance(node, ast.Try):
            stack += node.body + node.orelse + node.finalbody
            stack += [s for h in node.handlers for s in h.body]
        elif isinstance(node, ast.With | ast.ClassDef):
            stack += node.body


def _imported_at_top(path: Path, known: set[str]) -> set[str]:
    return {
        m for node in _top_level_imports(ast.parse(path.read_text())) for m in _names(node, known)
    }


def lazy_imports(sources: dict[str, Path] | None = None, root: Path = ROOT) -> list[LazyImport]:
    """Every import inside a function of the package, but a module's ``__getattr__``'s
    (PEP 562: the attributes a module gives on first use, as ``qcn.__version__``)."""
    sources = package_sources() if sources is None else sources
    known = known_modules(sources)
    found = []
    for path in sources.values():
        tree = ast.parse(path.read_text())
        on_first_use = {id(f) for f in tree.body if getattr(f, "name", "") == "__getattr__"}
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) or id(fn) in on_first_use:
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    where = f"{path.relative_to(root)}:{node.lineno}"
                    found += [LazyImport(m, where) for m in _names(node, known)]
    return sorted(set(found), key=lambda i: (i.where, i.module))


def costly_closure(
    listed: Iterable[str], sources: dict[str, Path] | None = None
) -> dict[str, set[str]]:
    """The project modules whose import (at their top, transitively) imports a listed
    library, each with the listed libraries it brings: the modules a command that needs
    none of those imports lazily too.  A listed module of the project is itself only (the
    modules above it are not costly for it)."""
    sources = package_sources() if sources is None else sources
    libraries = [lib for lib in listed if lib.split(".")[0] != "qcn"]
    known = known_modules(sources)
    direct = {me: _imported_at_top(p, known) for me, p in sources.items()}
    brings = {
        me: {lib for lib in libraries if any(is_listed(m, [lib]) for m in ms)}
        for me, ms in direct.items()
    }
    brings |= {m: {lib for lib in libraries if is_listed(m, [lib])} for m in known - set(sources)}
    grew = True
    while grew:  # (a module importing a costly one, or its package, is costly too)
        grew = False
        for me, ms in direct.items():
            more = set().union(*(brings.get(m, set()) for m in ms)) - brings[me]
            if more:
                brings[me] |= more
                grew = True
    return {me: libs for me, libs in brings.items() if libs}


def is_listed(module: str, listed: Iterable[str]) -> bool:
    return any(module == lib or module.startswith(lib + ".") for lib in listed)


def unlisted_lazy_imports(listed: list[str] | None = None) -> list[str]:
    """The imports inside functions of modules neither listed nor costly (each as
    ``path:line module``): they belong at the top of their modules."""
    listed = listed_libraries() if listed is None else listed
    costly = costly_closure(listed)
    return [
        f"{i.where} {i.module}"
        for i in lazy_imports()
        if not is_listed(i.module, listed) and i.module not in costly
    ]


def unused_rows(listed: list[str] | None = None) -> list[str]:
    """The listed libraries no import inside a function needs, directly or through a
    costly module of the project."""
    listed = listed_libraries() if listed is None else listed
    costly = costly_closure(listed)
    used: set[str] = set()
    for i in lazy_imports():
        used |= {lib for lib in listed if is_listed(i.module, [lib])} or costly.get(i.module, set())
    return [lib for lib in listed if lib not in used]


def listed_libraries(text: str | None = None) -> list[str]:
    """The libraries docs/layout.md says are imported lazily (its table's first column)."""
    text = LAYOUT.read_text() if text is None else text
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0] if SECTION in text else ""
    return LISTED_ROW.findall(section)


def import_ms(before: list[str], modules: list[str], repeat: int) -> float:
    """Median wall time, in ms, of importing ``modules`` in a fresh interpreter that has
    imported ``before`` first."""
    code = (
        "import time\n"
        + "".join(f"import {m}\n" for m in before)
        + "t = time.perf_counter()\n"
        + "".join(f"import {m}\n" for m in modules)
        + "print(time.perf_counter() - t)\n"
    )
    runs = [
        float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True).stdout)
        for _ in range(repeat)
    ]  # fmt: skip
    return 1e3 * statistics.median(runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="fresh interpreters per figure")
    args = ap.parse_args()
    listed = listed_libraries()
    lazy = {i.module for i in lazy_imports()}
    base = import_ms([], [BASELINE], args.repeat)
    print(f"baseline: import {BASELINE}: {base:.0f} ms (median of {args.repeat})")
    print(f"{'library':<22} {'adds, ms':>9} {'x baseline':>11}")
    cheap = []
    compiled = known_modules(package_sources()) - set(package_sources())
    for lib in listed:
        modules = sorted(m for m in lazy if is_listed(m, [lib])) or [lib]
        try:
            ms = import_ms([BASELINE], modules, args.repeat)
        except subprocess.CalledProcessError:
            print(f"{lib:<22} {'not installed':>21}")
            continue
        print(f"{lib:<22} {ms:>9.0f} {ms / base:>11.2f}")
        if ms < 0.1 * base and lib not in compiled:  # (a compiled one waits for its checks)
            cheap.append(lib)
    if cheap:
        print(f"cheap enough for the top of their modules: {', '.join(cheap)}")


if __name__ == "__main__":
    main()
