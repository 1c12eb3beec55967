"""The unit of every numeric parameter, declared on its field, and what scaling a scenario
for BMv2 does to it (docs/experiments.md, "On BMv2": rates by k, times by tau, traffic
volumes by k * tau).

A field is declared with its unit where it is defined::

    line_rate_bps: float = rate(10e9)
    timer_s: float = seconds(0.015)
    bc_limit_bytes: int = volume(150_000)

and :func:`scaled_fields` finds them, so a new parameter (a scheme's own, too) is scaled
as its unit says without a list kept beside it; ``tests/test_units.py`` fails on a numeric
field that declares none.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterator
from enum import StrEnum
from typing import Any

UNIT = "unit"
"""The dataclass field metadata key that holds a field's :class:`Unit`."""


class Unit(StrEnum):
    RATE = "rate"
    """Bits per second: times the rate scale."""
    TIME = "time"
    """Seconds: times the time scale."""
    VOLUME = "volume"
    """An amount of traffic, in bytes or frames (a byte counter's cycle, frames sent since
    a CNM): times both, so that it takes as long at the scaled rate."""
    SIZE = "size"
    """The size of a frame or a buffer, or a queue threshold, in bytes or frames: the same
    frames go through BMv2, so unscaled."""
    NONE = "none"
    """A ratio, a probability, a gain, a count of hosts or of steps: unscaled."""


def _with(unit: Unit, default: Any) -> Any:
    return dataclasses.field(default=default, metadata={UNIT: unit})


def rate(default: float) -> float:
    """A field in bits per second."""
    return typing.cast(float, _with(Unit.RATE, default))


def seconds(default: float) -> float:
    """A field in seconds."""
    return typing.cast(float, _with(Unit.TIME, default))


def volume(default: Any) -> Any:
    """A field counting traffic (bytes or frames)."""
    return _with(Unit.VOLUME, default)


def size(default: int) -> int:
    """A frame's or a buffer's size, or a queue threshold (bytes or frames)."""
    return typing.cast(int, _with(Unit.SIZE, default))


def plain(default: Any) -> Any:
    """A number without a unit BMv2 scaling changes: a ratio, a probability, a count."""
    return _with(Unit.NONE, default)


def unit_of(f: dataclasses.Field[Any]) -> Unit | None:
    found = f.metadata.get(UNIT)
    return Unit(found) if found is not None else None


def is_numeric(annotation: Any) -> bool:
    """Whether a field's type holds numbers (bool is not one)."""
    if annotation in (int, float):
        return True
    args = typing.get_args(annotation)
    return bool(args) and any(a in (int, float) for a in args)


_NUMERIC_FIELDS: dict[type[Any], tuple[dataclasses.Field[Any], ...]] = {}
"""Each class's numeric fields, found once: reading its type hints was most of the time
a scenario took to scale for BMv2 (2.9 of 4.0 ms)."""


def _numeric_fields_of(cls: type[Any]) -> tuple[dataclasses.Field[Any], ...]:
    found = _NUMERIC_FIELDS.get(cls)
    if found is None:
        hints = typing.get_type_hints(cls)
        found = tuple(f for f in dataclasses.fields(cls) if is_numeric(hints[f.name]))
        _NUMERIC_FIELDS[cls] = found
    return found


def numeric_fields(roots: dict[str, type[Any]]) -> Iterator[tuple[str, dataclasses.Field[Any]]]:
    """(dotted name, field) of every numeric field of the dataclasses in ``roots`` (dotted
    prefix -> class; "" for top-level fields)."""
    for prefix, cls in roots.items():
        for f in _numeric_fields_of(cls):
            yield (f"{prefix}.{f.name}" if prefix else f.name), f


def scaled_fields(roots: dict[str, type[Any]], unit: Unit) -> tuple[str, ...]:
    """The dotted names of ``roots``' fields in ``unit``, in declaration order."""
    return tuple(name for name, f in numeric_fields(roots) if unit_of(f) is unit)


def rate_text(bps: float) -> str:
    """``bps`` in the unit that reads best (``10 Mb/s``, ``2.5 Gb/s``, ``800 b/s``)."""
    for unit, scale in (("Gb/s", 1e9), ("Mb/s", 1e6), ("kb/s", 1e3)):
        if bps >= scale:
            return f"{bps / scale:.3g} {unit}"
    return f"{bps:.3g} b/s"
