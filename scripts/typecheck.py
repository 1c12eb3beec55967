"""mypy over the checkout, each file under the name it is imported by (`make lint` runs it).

    python scripts/typecheck.py [MYPY OPTIONS] [FILES]

The layers' folders at the top of the checkout (controller/, ...) are the package's
qcn.controller, ... (pyproject.toml's [tool.setuptools.package-dir]; docs/layout.md).  mypy
names a file after its folders and does not read the import finder of an editable install,
so by itself it would check controller/agent.py as ``controller.agent`` and find no
``qcn.controller`` for any import of it.  This is mypy, with its settings from
pyproject.toml's [tool.mypy] and any options given, told each file's qcn name.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

from mypy import build, util
from mypy.errors import CompileError
from mypy.fscache import FileSystemCache
from mypy.main import process_options, show_messages
from mypy.modulefinder import BuildSource

ROOT = Path(__file__).resolve().parent.parent


def package_of_folder() -> dict[str, str]:
    """Each folder that pyproject.toml's package-dir maps, and its package's name."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return {folder: package for package, folder in setuptools["package-dir"].items()}


def renamed(source: BuildSource, packages: dict[str, str]) -> BuildSource:
    """``source`` under its package's name where mypy named it after a mapped folder."""
    top, _, rest = source.module.partition(".")
    if top not in packages:
        return source
    module = f"{packages[top]}.{rest}" if rest else packages[top]
    return BuildSource(source.path, module, source.text, source.base_dir, source.followed)


def main(argv: list[str]) -> int:
    fscache = FileSystemCache()
    sources, options = process_options(argv, fscache=fscache)
    # A cache of its own: one `mypy` wrote, with no qcn.controller, hides what it imports.
    options.cache_dir = str(Path(options.cache_dir) / "qcn-names")
    packages = package_of_folder()
    sources = [renamed(s, packages) for s in sources]
    formatter = util.FancyFormatter(sys.stdout, sys.stderr, options.hide_error_codes)
    messages: list[str] = []

    def flush_errors(_filename: str | None, new: list[str], serious: bool) -> None:
        messages.extend(new)
        show_messages(new, sys.stderr if serious else sys.stdout, formatter, options)

    blockers = False
    try:
        build.build(sources, options, None, flush_errors, fscache, sys.stdout, sys.stderr)
    except CompileError:  # (its messages were flushed)
        blockers = True
    n_errors, n_notes, n_files = util.count_stats(messages)
    if n_errors:
        print(formatter.format_error(n_errors, n_files, len(sources), blockers=blockers))
    elif not messages or n_notes == len(messages):
        print(formatter.format_success(len(sources)))
    if messages and n_notes < len(messages):
        return 2 if blockers else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
