"""Why the simulator's core is C++: each candidate language's bare event loop, same run.

    python -m bench.core_choice

The loop every candidate runs is the core's own baseline (``qcn.simulator._core.bare_loop``):
a heap of 12 pending events (time, kind and source, sequence, version), popped and pushed
again 1.2 us later, no model.  A core keeps a fraction of its loop's speed (the C++ core
keeps ~0.14, the Python engine ~0.2), so a language whose bare loop is under ~100 M
events/s cannot carry the model at 15 M.  Candidates not installed are skipped in one line
(numba: ``pip install numba``; it is not a dependency of the project).  docs/simulator.md
gives the figures and the choice.
"""

from __future__ import annotations

import heapq
import importlib.util
import time
from collections.abc import Callable

EVENTS = 3_000_000
WIDTH = 12


def python_loop(n: int, width: int) -> float:
    heap = [(i * 1e-7, i, i + 1, 0) for i in range(width)]
    heapq.heapify(heap)
    seq = width
    for _ in range(n):
        t, kind_src, _seq, version = heapq.heappop(heap)
        seq += 1
        heapq.heappush(heap, (t + 1.2e-6, kind_src, seq, version))
    return heap[0][0]


def numba_loop() -> Callable[[int, int], float] | str:
    if importlib.util.find_spec("numba") is None:
        return "numba is not installed (pip install numba)"
    import numba  # type: ignore[import-not-found]  # noqa: PLC0415

    return numba.njit(python_loop)  # type: ignore[no-any-return]


def core_loop() -> Callable[[int, int], float] | str:
    try:
        from qcn.simulator import _core  # noqa: PLC0415
    except ImportError as e:
        return f"not built ({e}): make venv"
    return _core.bare_loop


def rate(loop: Callable[[int, int], float], n: int) -> float:
    loop(1000, WIDTH)  # compiled on first call (numba)
    started = time.perf_counter()
    loop(n, WIDTH)
    return n / (time.perf_counter() - started)


def main() -> int:
    candidates: dict[str, Callable[[int, int], float] | str] = {
        "Python heapq": python_loop,
        "numba (njit, heapq on tuples)": numba_loop(),
        "C++ (qcn.simulator._core, pybind11)": core_loop(),
    }
    base = 0.0
    for name, loop in candidates.items():
        if isinstance(loop, str):
            print(f"core_choice: {name}: skipped: {loop}")
            continue
        r = rate(loop, EVENTS // 10 if loop is python_loop else EVENTS)
        base = base or r
        print(f"core_choice: {name}: {r / 1e6:.1f} M events/s ({r / base:.1f}x Python's)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
