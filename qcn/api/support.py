"""What the API's functions share: the commands' own options as a call gives them, a user's
mistake raised as the one line the command prints, figures a notebook shows once, the
notebook's matplotlib left as it was, and folders a result owns.

The API calls the functions the commands call (qcn.cli.run, sweep, tune, compare, net),
with the options the command's own parser makes: its defaults are the command's by
construction, and what a call gives is set over them.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import shutil
import tempfile
import weakref
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import tomli_w

from qcn.cli.main import build_parser
from qcn.core import provenance
from qcn.core.errors import QcnError

P = ParamSpec("P")
R = TypeVar("R")


def one_line(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` raising a user's mistake (a :class:`QcnError`) as the command would say it:
    the same one line, and no traceback from inside the project (a notebook shows the
    call that failed, then the line)."""

    @functools.wraps(fn)
    def called(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except QcnError as e:
            raise e.with_traceback(None) from None

    return called


def command_args(
    command: str, *, record: bool = True, unsaid: Collection[str] = ("quiet",), **given: Any
) -> argparse.Namespace:
    """The options ``qcn COMMAND`` parses to (its parser's own defaults), with ``given`` set
    over them (an option's destination, as ``args.NAME`` reads it; the positional one too);
    a value outside an option's choices is refused as the parser refuses it.  ``record``:
    the command line that gives the same options (but ``unsaid``'s) is what the runs'
    provenance records (:func:`record_command`)."""
    words = command.split()
    parser = subparser(build_parser(only=words[0]), words)
    positional = [a.dest for a in parser._actions if not a.option_strings]
    # (a positional the call gives is set below, as the others: "-" parses as any)
    args = parser.parse_args(["-" if p in given else "" for p in positional if p in given])
    actions = {a.dest: a for a in parser._actions}
    for name, value in given.items():
        action = actions[name]  # (a KeyError: a mistake of the API's own, not the user's)
        if action.choices is not None and value is not None and value not in action.choices:
            choices = ", ".join(map(repr, action.choices))
            raise QcnError(
                f"argument {'/'.join(action.option_strings) or name}: invalid choice: "
                f"{value!r} (choose from {choices})"
            )
        setattr(args, name, value)
    if record:
        said = {k: v for k, v in given.items() if k not in unsaid}
        record_command([*words, *command_line(parser, said)])
    return args


def command_line(parser: argparse.ArgumentParser, given: Mapping[str, Any]) -> list[str]:
    """The arguments that give ``parser`` the options ``given`` (those not at their
    default): positionals first, then each option as its long flag."""
    argv = [str(given[a.dest]) for a in parser._actions if not a.option_strings and a.dest in given]
    for a in parser._actions:
        value = given.get(a.dest, a.default)
        if not a.option_strings or value == a.default or value is None:
            continue
        flag = a.option_strings[-1]
        if value is True or value is False:
            argv += [flag] if value else []
        elif isinstance(value, Mapping):
            argv += [x for k, v in value.items() for x in (flag, f"{k}={toml_text(v)}")]
        elif isinstance(value, list):
            argv += [x for v in value for x in (flag, option_text(v))]
        else:
            argv += [flag, str(value)]
    return argv


def option_text(value: Any) -> str:
    """One value of a repeated option: a grid's axis as ``KEY=V1,V2``, else its text."""
    if isinstance(value, tuple):
        key, values = value
        return f"{key}={','.join(toml_text(v) for v in values)}"
    return str(value)


def subparser(parser: argparse.ArgumentParser, words: list[str]) -> argparse.ArgumentParser:
    """The parser of ``qcn WORDS...`` (``net show``: ``qcn net``'s ``show``)."""
    for word in words:
        (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return parser


def overrides(given: Mapping[str, Any] | None) -> dict[str, Any]:
    """``set={...}`` as the overrides ``--set`` gives: a path or a :class:`qcn.Network`
    as the text a scenario field holds."""
    return {str(k): plain(v) for k, v in (given or {}).items()}


def plain(value: Any) -> Any:
    """A value as a scenario field or a TOML file holds it (a path, a network: its text)."""
    spec = getattr(value, "spec", None)  # (a qcn.Network: the topology it was made from)
    if isinstance(spec, str):
        return spec
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def path_or_none(given: str | Path | None) -> Path | None:
    """A file option (``params``) as the command's parser gives it: a path, or None."""
    return None if given is None else Path(given)


def record_command(argv: Sequence[str]) -> None:
    """What each run's provenance.json records as its command: the command line that makes
    the same run (``qcn run ... --set KEY=VALUE``), so that it can be made again from a
    shell too."""
    provenance.set_command(["qcn", *argv])


def toml_text(value: Any) -> str:
    """``value`` as ``--set KEY=VALUE`` writes it (TOML)."""
    return tomli_w.dumps({"v": plain(value)}).split("=", 1)[1].strip()


def quiet(_line: str) -> None:
    """Says nothing (the API's default: a notebook shows what a call returns)."""


def sayer(verbose: bool) -> Callable[[str], None]:
    """What says a command's lines: print with ``verbose``, else :func:`quiet`."""
    return functools.partial(print, flush=True) if verbose else quiet


class Owned:
    """A temporary folder, removed when nothing holds this any longer (``out=None``: the
    object a call returns holds it)."""

    def __init__(self, prefix: str) -> None:
        self.path = Path(tempfile.mkdtemp(prefix=prefix))
        weakref.finalize(self, shutil.rmtree, str(self.path), True)


def out_folder(out: str | Path | None, name: str) -> tuple[Path, Owned | None]:
    """``out`` as a path; None: a folder ``name`` in a temporary one, and what holds it."""
    if out is not None:
        return Path(out), None
    owned = Owned(f"qcn-{name}-")
    return owned.path / name, owned


@contextlib.contextmanager
def pyplot_kept() -> Iterator[None]:
    """matplotlib's backend as it was before the block: the project draws its files with
    Agg, which would leave a notebook's figures no longer shown inline.  A backend named
    but not loaded yet (a notebook's, before its first figure) is loaded first, while it
    is still the one named: loaded on the way back from Agg, IPython's inline backend
    would find Agg named, and never show a figure."""
    import matplotlib  # noqa: PLC0415

    before = dict.__getitem__(matplotlib.rcParams, "backend")  # (read: not resolved)
    if isinstance(before, str):
        import matplotlib.pyplot as plt  # noqa: PLC0415

        if getattr(plt, "_backend_mod", None) is None:
            plt.switch_backend(before)
    try:
        yield
    finally:
        if dict.__getitem__(matplotlib.rcParams, "backend") != before:
            matplotlib.use(before)


class Unmanaged:
    """Makes figures as pyplot's ``subplots`` does, but pyplot does not keep them: a
    notebook shows a figure a call returns once (not again as one pyplot holds open), and
    a figure nobody holds is freed."""

    @staticmethod
    def subplots(*args: Any, figsize: tuple[float, float] | None = None, **kw: Any) -> Any:
        """A new figure and its axes (pyplot.subplots' arguments)."""
        fig = shown_figure(figsize)
        return fig, fig.subplots(*args, **kw)


def shown_figure(figsize: tuple[float, float] | None) -> Any:
    """A matplotlib figure that IPython shows as a PNG whatever the backend."""
    return _shown()(figsize=figsize)


@functools.cache
def _shown() -> type:
    from matplotlib.figure import Figure as Plain  # noqa: PLC0415 - matplotlib when drawn

    class Figure(Plain):
        """A matplotlib figure with its PNG for IPython."""

        def _repr_png_(self) -> bytes:
            buffer = io.BytesIO()
            self.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
            return buffer.getvalue()

    return Figure
