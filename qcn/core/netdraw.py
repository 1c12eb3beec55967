"""A picture of a :class:`~qcn.core.topology.Topology` (``qcn net draw``), its CP ports
marked: switches in layers by their distance from the hosts (leaves below spines), each
host under its switch, a link's width by its rate, a red dot at the switch end of each
egress port that runs a CP, labelled with its port number."""

from __future__ import annotations

from collections import deque
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from qcn.core.topology import Topology

CP_COLOUR = "#d62728"


def layout(topo: Topology) -> dict[str, tuple[float, float]]:
    """(x, y) of every node: a switch's layer is its hop count to the nearest switch with
    hosts (those are layer 1, hosts layer 0); each layer ordered by its neighbours below."""
    neighbours: dict[str, list[str]] = {s: [] for s in topo.switches}
    for link in topo.links:
        a, b = link.a.node, link.b.node
        if a in neighbours and b in neighbours:
            neighbours[a].append(b)
            neighbours[b].append(a)
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
    pos: dict[str, tuple[float, float]] = {}
    x = 0.0
    for s in (s for s in topo.switches if level[s] == 1):
        hosts = [h.name for h in topo.hosts if topo.attachment(h.name).switch == s]
        for k, h in enumerate(hosts):
            pos[h] = (x + k, 0.0)
        width = max(1, len(hosts))
        pos[s] = (x + (width - 1) / 2, 1.0)
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
            pos[layer[i]] = (span * (rank + 0.5) / len(layer), float(lv))
    return pos


def draw(topo: Topology, out: Path) -> Path:
    pos = layout(topo)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.6 * len(pos)), 4.5))
    fastest = max(lk.rate_bps for lk in topo.links)
    for link in topo.links:
        (xa, ya), (xb, yb) = pos[link.a.node], pos[link.b.node]
        ax.plot(
            [xa, xb], [ya, yb], color="#888888", lw=0.8 + 2.5 * link.rate_bps / fastest, zorder=1
        )
    cps = set(topo.cp_ports)
    for ref in topo.port_refs():
        far = topo.far_end(ref)
        (xs, ys), (xf, yf) = pos[ref.switch], pos[far.node]
        px, py = xs + 0.22 * (xf - xs), ys + 0.22 * (yf - ys)
        on = ref in cps
        ax.scatter([px], [py], s=30 if on else 8, color=CP_COLOUR if on else "#555555", zorder=3)
        ax.annotate(
            str(ref.port), (px, py), textcoords="offset points", xytext=(4, 3), fontsize=7,
            color=CP_COLOUR if on else "#555555",
        )  # fmt: skip
    for s in topo.switches:
        x, y = pos[s]
        ax.scatter([x], [y], s=500, marker="s", color="#1f77b4", zorder=2)
        ax.annotate(s, (x, y), ha="center", va="center", color="white", fontsize=8, zorder=4)
    for h in topo.hosts:
        x, y = pos[h.name]
        ax.scatter([x], [y], s=220, marker="o", color="#2ca02c", zorder=2)
        ax.annotate(
            h.name, (x, y), textcoords="offset points", xytext=(0, -10), ha="center",
            va="top", fontsize=7,
        )  # fmt: skip
    ax.set_title(f"{topo.describe()}  (red: a CP on that egress port)", fontsize=9)
    ax.axis("off")
    ax.margins(0.1)
    ax.set_ylim(bottom=-0.35)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
