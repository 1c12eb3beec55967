"""Every command's and action's help is plain text, and says what it does: `qcn X --help`
and `qcn X Y --help` for every X and Y, each option with a help line of its own."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest

from qcn.cli import main as cli

MARKUP = re.compile(r"`|::|:(func|mod|class|meth|data|attr):|\w\(\)")
"""What RST, Markdown or Python spelling looks like in a help text: backticks (single or
double), RST's ``::`` and roles, a function call such as build_dir()."""


class GrabbedError(Exception):
    """Raised in place of parsing: the tool's parser, caught before it runs anything."""


def tool_parser(name: str, monkeypatch: pytest.MonkeyPatch) -> argparse.ArgumentParser:
    """The parser a tool's main builds (a tool builds it inside its main)."""
    grabbed: list[argparse.ArgumentParser] = []

    def grab(self: argparse.ArgumentParser, *_args: object, **_kwargs: object) -> None:
        grabbed.append(self)
        raise GrabbedError

    with monkeypatch.context() as m:
        m.setattr(argparse.ArgumentParser, "parse_args", grab)
        with pytest.raises(GrabbedError):
            cli.run_tool(name, [])
    return grabbed[0]


def actions(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """``parser``'s subcommands, by name, with theirs after each (depth first)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield name, sub
                yield from ((f"{name} {n}", p) for n, p in actions(sub))


def every_command(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, argparse.ArgumentParser]]:
    out = []
    for name, parser in actions(cli.build_parser()):
        head = name.split()[0]
        if head in cli.TOOLS:
            if name == head:  # its placeholder: the tool's own parser instead
                tool = tool_parser(head, monkeypatch)
                out += [(head, tool), *((f"{head} {n}", p) for n, p in actions(tool))]
        else:
            out.append((name, parser))
    return out


def help_text(words: str, capsys: pytest.CaptureFixture[str]) -> str:
    """What `qcn WORDS --help` prints."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        cli.main([*words.split(), "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


def test_every_command_and_action_has_plain_help(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    commands = every_command(monkeypatch)
    names = [n for n, _ in commands]
    # The walk reaches the tools' actions and the subcommands' (not only the top level).
    assert {"frames count", "rp start", "ctl set", "net draw", "ptf", "build"} <= set(names)
    faults = []
    for name, parser in commands:
        if not (parser.description or "").strip():
            faults.append(f"qcn {name}: no description")
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            if not action.help or action.help == argparse.SUPPRESS:
                faults.append(
                    f"qcn {name} {'/'.join(action.option_strings) or action.dest}: no help"
                )
        text = help_text(name, capsys)
        faults += [f"qcn {name} --help: {m.group()!r} in {line.strip()!r}"
                   for line in text.splitlines() for m in [MARKUP.search(line)] if m]  # fmt: skip
    assert faults == [], "\n".join(faults)


def test_the_top_level_help_is_plain(capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = capsys.readouterr().out
    assert MARKUP.search(text) is None, text
