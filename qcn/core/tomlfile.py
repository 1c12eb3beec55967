"""Reading the project's TOML files (parameters, scenarios, networks) and command-line TOML
values the same way.

Every way a file can be unreadable becomes one line naming the file, raised as the caller's
own error type (a :class:`~qcn.core.errors.QcnError`), never a traceback.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from qcn.core.errors import QcnError


def read_toml(path: Path, error: Callable[[str], QcnError]) -> dict[str, Any]:
    """The TOML document in ``path``; ``error(message)`` builds what is raised."""
    if path.is_dir():
        raise error(f"{path}: is a directory, not a TOML file")
    if path.exists() and not path.is_file():
        # A FIFO or a device would be read for ever.
        raise error(f"{path}: not a regular file, so not a TOML file")
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as e:
        raise error(f"{path}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise error(f"{path}: not UTF-8 text (byte {e.start}), so not a TOML file") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise error(f"{path}: not valid TOML: {e}") from None
    except RecursionError:
        raise error(f"{path}: not valid TOML here: {TOO_DEEP}") from None


TOO_DEEP = "arrays or tables nested too deeply to read"
"""Python's TOML parser recurses once per level: thousands of levels exhaust the stack."""


def toml_value(text: str, error: Callable[[str], QcnError], what: str) -> Any:
    """One command-line value (``--set KEY=VALUE``'s, one of ``--grid``'s) as TOML, or as
    the text itself if it is no TOML value; ``what`` names it in the errors.

    A line break is refused: what follows it was parsed as further keys of the same
    document and silently dropped (``--set $'duration_s=0.01\\nnetwork.sources=500'`` ran
    with 10 sources)."""
    if "\n" in text or "\r" in text:
        raise error(f"{what}: a value is one line (this one has a line break)")
    try:
        doc = tomllib.loads(f"v = {text.strip()}")
    except tomllib.TOMLDecodeError:
        return text.strip()
    except RecursionError:
        raise error(f"{what}: {TOO_DEEP}") from None
    if set(doc) != {"v"}:
        raise error(f"{what}: expected one value")
    return doc["v"]
