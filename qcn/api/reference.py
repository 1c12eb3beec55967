"""docs/python.md's reference, made from the API's own signatures and docstrings: every
name ``qcn`` gives (:data:`qcn.API`), and each class's public methods, properties and
attributes (an attribute's docstring is the string under its assignment in ``__init__``).

    python -m qcn.api.reference            # print it
    python -m qcn.api.reference --write     # put it into docs/python.md, between its markers

``tests/test_python_api.py`` fails when the page's copy is not what this makes.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import re
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

PAGE = Path(__file__).resolve().parents[2] / "docs" / "python.md"
BEGIN = "<!-- reference: made by python -m qcn.api.reference --write; edit the docstrings -->"
END = "<!-- reference: end -->"


def markdown(doc: str) -> str:
    """A docstring as Markdown: its reStructuredText roles and double backticks as code."""
    text = inspect.cleandoc(doc)
    text = re.sub(r":(?:func|class|attr|mod|data|meth):`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


def signature(fn: Callable[..., Any], name: str) -> str:
    """``name(params) -> return`` as the source writes its annotations (not the quoted
    strings ``from __future__ import annotations`` leaves them as)."""
    sig = inspect.signature(fn)
    parts, star = [], False
    for p in sig.parameters.values():
        if p.name == "self":
            continue
        if p.kind is p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        text = ("*" if p.kind is p.VAR_POSITIONAL else "") + p.name
        if p.annotation is not p.empty:
            text += f": {p.annotation}"
        if p.default is not p.empty:
            text += f" = {p.default!r}"
        parts.append(text)
    returned = "" if sig.return_annotation is sig.empty else f" -> {sig.return_annotation}"
    return f"{name}({', '.join(parts)}){returned}"


def attributes(cls: type) -> Iterator[tuple[str, str, str]]:
    """``cls``'s public attributes set in its ``__init__`` with a docstring under them:
    (name, annotation, docstring)."""
    init = cls.__dict__.get("__init__")
    if init is None:
        return
    source = textwrap.dedent(inspect.getsource(inspect.unwrap(init)))
    body = ast.parse(source).body[0].body  # type: ignore[attr-defined]
    for stmt, after in itertools.pairwise(body):
        target = getattr(stmt, "target", None)
        if (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(target, ast.Attribute)
            and not target.attr.startswith("_")
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            yield target.attr, ast.unparse(stmt.annotation), after.value.value


def members(cls: type) -> Iterator[tuple[str, str, str]]:
    """``cls``'s public methods and properties: (heading, kind, docstring)."""
    for name, member in cls.__dict__.items():
        if name.startswith("_"):
            continue
        if isinstance(member, property) and member.fget is not None:
            returned = inspect.signature(member.fget).return_annotation
            yield f"{cls.__name__}.{name}: {returned}", "property", member.__doc__ or ""
        elif inspect.isfunction(member):
            yield signature(member, f"{cls.__name__}.{name}"), "method", member.__doc__ or ""


def reference() -> str:
    """The reference: each name of :data:`qcn.API` in turn, a heading and its docstring."""
    import qcn.api  # noqa: PLC0415

    out: list[str] = []
    for name in qcn.API:
        obj = getattr(qcn.api, name)
        if inspect.isclass(obj) and issubclass(obj, BaseException):
            out += [f"### `qcn.{name}`", "", markdown(obj.__doc__ or ""), ""]
        elif inspect.isclass(obj):
            # (a class a user makes shows how: its __init__ raises their mistakes as one line)
            init = obj.__dict__.get("__init__")
            made = init is not None and hasattr(init, "__wrapped__")
            head = signature(init, name) if made and init is not None else name
            out += [f"### class `qcn.{head}`", "", markdown(obj.__doc__ or ""), ""]
            for attr, kind, doc in attributes(obj):
                out += [f"- `{name}.{attr}: {kind}`: {markdown(doc)}".replace("\n", " "), ""]
            for heading, kind, doc in members(obj):
                out += [f"#### `{heading}` ({kind})", "", markdown(doc), ""]
        else:
            out += [f"### `qcn.{signature(obj, name)}`", "", markdown(obj.__doc__ or ""), ""]
    return "\n".join(out).rstrip() + "\n"


def page_with(text: str, reference_text: str) -> str:
    """The page ``text`` with ``reference_text`` between its markers."""
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n\n{reference_text}\n{END}{tail}"


def main(argv: list[str]) -> int:
    made = reference()
    if argv == ["--write"]:
        PAGE.write_text(page_with(PAGE.read_text(), made))
        print(f"wrote {PAGE}")
    else:
        sys.stdout.write(made)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
