"""A picture of a :class:`~qcn.core.topology.Topology` (``qcn net draw``), its CP ports
marked: a link's width by its rate, a red dot at the switch end of each egress port that
runs a CP, labelled with its port number.

Where it can, the layout is layered: switches by their distance from the hosts (leaves
below spines), each host under its switch.  A link between switches of one layer (a
triangle of switches that all have hosts) would be drawn through the switches between
them, so every layout is checked: no link may pass through a node it does not join.  A
layered layout that fails is stretched upwards (a wide fan of hosts), and one that still
fails gives way to a circular layout: switches on a circle, so that a link between two
switches is a chord, which meets the circle only at its ends; each switch's hosts outside
it, on rays from the centre (docs/topology.md, "qcn net").
"""

from __future__ import annotations

import math
import os
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import Circle, Rectangle

from qcn.core.topology import Topology

CP_COLOUR = "#d62728"
SWITCH_HALF = 0.22
"""Half the side of a switch's square, in the layout's units (hosts of a switch are 1
apart in a layered layout)."""
HOST_RADIUS = 0.14
Position = dict[str, tuple[float, float]]


def node_half(topo: Topology, node: str) -> float:
    """Half the side of the square a node is drawn within."""
    return HOST_RADIUS if node in topo.host_by_name else SWITCH_HALF


def segment_meets_box(
    a: tuple[float, float], b: tuple[float, float], centre: tuple[float, float], half: float
) -> bool:
    """Whether segment ``a``-``b`` enters the square of half side ``half`` round ``centre``
    (Liang-Barsky clipping)."""
    t0, t1 = 0.0, 1.0
    dx, dy = b[0] - a[0], b[1] - a[1]
    for p, q in (
        (-dx, a[0] - (centre[0] - half)),
        (dx, centre[0] + half - a[0]),
        (-dy, a[1] - (centre[1] - half)),
        (dy, centre[1] + half - a[1]),
    ):
        if p == 0:
            if q < 0:
                return False
        elif p < 0:
            t0 = max(t0, q / p)
        else:
            t1 = min(t1, q / p)
        if t0 > t1:
            return False
    return True


def links_through_nodes(topo: Topology, pos: Position) -> list[tuple[str, str, str]]:
    """Every (link's end, its other end, a node it is drawn through)."""
    out = []
    for link in topo.links:
        a, b = link.a.node, link.b.node
        for node, centre in pos.items():
            if node not in (a, b) and segment_meets_box(
                pos[a], pos[b], centre, node_half(topo, node)
            ):
                out.append((a, b, node))
    return out


def _switch_graph(topo: Topology) -> dict[str, list[str]]:
    neighbours: dict[str, list[str]] = {s: [] for s in topo.switches}
    for link in topo.links:
        a, b = link.a.node, link.b.node
        if a in neighbours and b in neighbours:
            neighbours[a].append(b)
            neighbours[b].append(a)
    return neighbours


def _hosts_of(topo: Topology, switch: str) -> list[str]:
    return [h.name for h in topo.hosts if topo.attachment(h.name).switch == switch]


def layered(topo: Topology, stretch: float = 1.0) -> Position:
    """(x, y) of every node: a switch's layer is its hop count to the nearest switch with
    hosts (those are layer 1, hosts layer 0); each layer ordered by its neighbours below;
    the layers ``stretch`` apart."""
    neighbours = _switch_graph(topo)
    with_hosts = {topo.attachment(h.name).switch for h in topo.hosts}
    level = {s: 1 for s in with_hosts}
    queue = deque(sorted(with_hosts, key=topo.switches.index))
    while queue:
        node = queue.popleft()
        for n in neighbours[node]:
            if n not in level:
                level[n] = level[node] + 1
                queue.append(n)
    for s in topo.switches:
        level.setdefault(s, 1)
    pos: Position = {}
    x = 0.0
    for s in (s for s in topo.switches if level[s] == 1):
        hosts = _hosts_of(topo, s)
        for k, h in enumerate(hosts):
            pos[h] = (x + k, 0.0)
        width = max(1, len(hosts))
        pos[s] = (x + (width - 1) / 2, stretch)
        x += width + 0.6
    for lv in sorted({level[s] for s in topo.switches if level[s] > 1}):
        layer = [s for s in topo.switches if level[s] == lv]
        below = [
            sum(pos[n][0] for n in neighbours[s] if n in pos)
            / max(1, sum(n in pos for n in neighbours[s]))
            for s in layer
        ]
        span = max(p[0] for p in pos.values()) if pos else 1.0
        order = sorted(range(len(layer)), key=lambda i: below[i])
        for rank, i in enumerate(order):
            pos[layer[i]] = (span * (rank + 0.5) / len(layer), lv * stretch)
    return pos


def circular(topo: Topology) -> Position:
    """Switches on a circle (a link between two is a chord: it meets the circle only at its
    ends), each one's hosts beyond it on rays from the centre, 0.6 apart."""
    n = len(topo.switches)
    most = max((len(_hosts_of(topo, s)) for s in topo.switches), default=0)
    host_gap = 0.6
    # Room on the circle for each switch's fan of hosts, and for the switches themselves.
    fan = host_gap * most
    radius = 0.0 if n == 1 else max(1.5, (fan + 1.0) * n / (2 * math.pi))
    reach = max(1.2, 0.6 * fan)  # how far out the hosts are: a wide fan further
    pos: Position = {}
    for i, s in enumerate(topo.switches):
        angle = math.pi / 2 - 2 * math.pi * i / n
        cx, cy = radius * math.cos(angle), radius * math.sin(angle)
        pos[s] = (cx, cy)
        hosts = _hosts_of(topo, s)
        if n == 1:  # all round the one switch
            ring = max(reach, host_gap * len(hosts) / (2 * math.pi))
            for k, h in enumerate(hosts):
                a = -math.pi / 2 + 2 * math.pi * k / max(1, len(hosts))
                pos[h] = (ring * math.cos(a), ring * math.sin(a))
            continue
        outer = radius + reach
        for k, h in enumerate(hosts):
            a = angle + (k - (len(hosts) - 1) / 2) * host_gap / outer
            pos[h] = (outer * math.cos(a), outer * math.sin(a))
    return pos


def layout(topo: Topology) -> Position:
    """(x, y) of every node, no link drawn through a node it does not join: layered if a
    layered layout (stretched if need be) does it, else circular."""
    candidates = [layered(topo, stretch) for stretch in (1.0, 2.0, 4.0)]
    candidates.append(circular(topo))
    for pos in candidates:
        if not links_through_nodes(topo, pos):
            return pos
    return candidates[-1]  # (no layout here manages it: the circle is the least crossed)


def draw(topo: Topology, out: Path) -> Path:
    """``qcn net draw``: :func:`figure` written to ``out`` as a PNG (whole, or not at all)."""
    fig = figure(topo)
    try:
        write_whole(out, lambda f: fig.savefig(f, dpi=120, format="png"))
    finally:
        plt.close(fig)
    return out


def figure(topo: Topology, maker: Any = plt) -> Any:
    """The picture of ``topo`` (the module's docstring), made with ``maker``: pyplot, or
    what makes figures as its ``subplots`` does."""
    pos = layout(topo)
    xs, ys = [p[0] for p in pos.values()], [p[1] for p in pos.values()]
    width, height = max(xs) - min(xs) + 1.5, max(ys) - min(ys) + 1.5
    scale = min(1.0, 16.0 / width, 12.0 / height)  # inches per unit, the picture at most 16x12
    fig, ax = maker.subplots(figsize=(max(6.0, width * scale), max(4.5, height * scale + 0.6)))
    fastest = max(lk.rate_bps for lk in topo.links)
    for link in topo.links:
        (xa, ya), (xb, yb) = pos[link.a.node], pos[link.b.node]
        ax.plot(
            [xa, xb], [ya, yb], color="#888888", lw=0.8 + 2.5 * link.rate_bps / fastest, zorder=1
        )
    cps = set(topo.cp_ports)
    for ref in topo.port_refs():
        far = topo.far_end(ref)
        (xs0, ys0), (xf, yf) = pos[ref.switch], pos[far.node]
        # Just outside the switch's square, on the link.
        length = math.hypot(xf - xs0, yf - ys0) or 1.0
        step = min(0.45, 0.5 * length) / length
        px, py = xs0 + step * (xf - xs0), ys0 + step * (yf - ys0)
        on = ref in cps
        ax.scatter([px], [py], s=30 if on else 8, color=CP_COLOUR if on else "#555555", zorder=3)
        ax.annotate(
            str(ref.port), (px, py), textcoords="offset points", xytext=(4, 3), fontsize=7,
            color=CP_COLOUR if on else "#555555",
        )  # fmt: skip
    for s in topo.switches:
        x, y = pos[s]
        ax.add_patch(
            Rectangle((x - SWITCH_HALF, y - SWITCH_HALF), 2 * SWITCH_HALF, 2 * SWITCH_HALF,
                      color="#1f77b4", zorder=2)
        )  # fmt: skip
        ax.annotate(s, (x, y), ha="center", va="center", color="white", fontsize=8, zorder=4)
    for h in topo.hosts:
        x, y = pos[h.name]
        ax.add_patch(Circle((x, y), HOST_RADIUS, color="#2ca02c", zorder=2))
        ax.annotate(
            h.name, (x, y - HOST_RADIUS), textcoords="offset points", xytext=(0, -2),
            ha="center", va="top", fontsize=7,
        )  # fmt: skip
    ax.set_title(f"{topo.describe()}  (red: a CP on that egress port)", fontsize=9)
    ax.set_aspect("equal")
    ax.set_xlim(min(xs) - 0.75, max(xs) + 0.75)
    ax.set_ylim(min(ys) - 0.75, max(ys) + 0.75)
    ax.axis("off")
    fig.tight_layout()
    return fig


def write_whole(out: Path, write: Callable[[BinaryIO], object]) -> None:
    """Write ``out`` through a hidden file beside it, renamed into place once whole: a disk
    that fills half-way leaves nothing (it left a 0-byte PNG), and an error is the OSError
    the caller turns into one line."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial-{os.getpid()}")
    try:
        with partial.open("wb") as f:
            write(f)
        partial.replace(out)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
