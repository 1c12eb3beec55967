"""`qcn net draw`'s layout draws no link through a node it does not join (a triangle of
switches was laid out in a line, one link drawn over the middle switch)."""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
from pathlib import Path

import pytest

from qcn.core.netdraw import HOST_RADIUS, SWITCH_HALF, draw, layout
from qcn.core.topology import LinkDefaults, Topology, load
from qcn.topologies.calibration import CACHE_DIR_VARIABLE
from tests.kit import assert_one_line_error, qcn, small_disk
from tests.toolchain import requires_root

DATA = Path(__file__).resolve().parent / "data"
RATE = LinkDefaults(
    line_rate_bps=10e6, bottleneck_rate_bps=10e6, innocent_rate_bps=10e6, delay_s=0.0
)
NETWORKS = [
    str(DATA / "triangle.json"),
    str(DATA / "two-leaves.json"),
    "single:10",
    "single:64",
    "multihop:5,5",
    "parking-lot:3",
    "leaf-spine:2,2,2",
    "leaf-spine:2,8,4",
    "leaf-spine:4,4,16",
]


def drawn_through(topo: Topology, pos: dict[str, tuple[float, float]]) -> list[str]:
    """Each link that passes through another node's box: checked point by point along the
    link (every 1/2000 of it), apart from the two nodes it joins."""
    out = []
    for link in topo.links:
        a, b = link.a.node, link.b.node
        (xa, ya), (xb, yb) = pos[a], pos[b]
        for node, (x, y) in pos.items():
            if node in (a, b):
                continue
            half = HOST_RADIUS if node in topo.host_by_name else SWITCH_HALF
            if any(
                abs(xa + t / 2000 * (xb - xa) - x) <= half
                and abs(ya + t / 2000 * (yb - ya) - y) <= half
                for t in range(2001)
            ):
                out.append(f"{a}-{b} through {node}")
    return out


@pytest.mark.parametrize("spec", NETWORKS, ids=lambda s: Path(s).name)
def test_no_link_is_drawn_through_a_node(spec: str) -> None:
    topo = load(spec, RATE)
    pos = layout(topo)
    assert set(pos) == set(topo.switches) | {h.name for h in topo.hosts}
    assert drawn_through(topo, pos) == []
    # Nodes do not overlap either.
    boxes = list(pos.values())
    assert len(set(boxes)) == len(boxes)


def test_a_triangle_is_drawn_as_a_triangle(tmp_path: Path) -> None:
    topo = load(str(DATA / "triangle.json"), RATE)
    pos = layout(topo)
    (x1, y1), (x2, y2), (x3, y3) = (pos[s] for s in ("s1", "s2", "s3"))
    area = abs((x2 - x1) * (y3 - y1) - (x3 - x1) * (y2 - y1)) / 2
    assert area > 1.0  # not three switches in a line
    assert draw(topo, tmp_path / "t.png").stat().st_size > 0


def show(topology: str, scenario: str | None = None, *sets: str) -> list[str]:
    """`qcn net show`'s lines, as its command line would print them on a machine whose BMv2
    is not calibrated (the built-in cost: the same figures on every machine)."""
    from qcn.cli.net import backend_views, show_lines  # noqa: PLC0415

    args = argparse.Namespace(
        topology=topology, line_rate=None, ecmp="per-destination", scenario=scenario,
        set=list(sets),
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as empty, pytest.MonkeyPatch.context() as mp:
        mp.setenv(CACHE_DIR_VARIABLE, empty)
        return show_lines(backend_views(args))


def rows(lines: list[str]) -> dict[str, list[str]]:
    """The port table's rows by port, split into words."""
    return {line.split()[0]: line.split()[1:] for line in lines if re.match(r"s\d+:\d+ ", line)}


def test_net_show_has_column_headers_and_each_note_once() -> None:
    """`qcn net show` printed its runtime_json note once per switch, and its table had no
    column headers."""
    lines = show(str(DATA / "two-leaves.json"))
    notes = [line for line in lines if line.startswith("note: ")]
    assert [n for n in notes if "runtime_json" in n] == [
        "note: switches s1, s2: their runtime_json are for the tutorials' own program; this "
        "network runs the QCN pipeline, programmed by qcn's controller"
    ]
    header = lines.index("") + 1
    assert lines[header].split() == ["rate", "delay"]
    assert lines[header + 1].split() == ["port", "to", "sim", "BMv2", "sim", "BMv2", "buffer",
                                         "CP"]  # fmt: skip
    assert rows(lines)["s1:1"] == ["h1", "10", "Gb/s", "8.2", "Mb/s", "0", "ms", "0", "ms",
                                   "100", "pkts", "CP"]  # fmt: skip
    assert rows(lines)["s1:3"] == ["s3:1", "5", "Mb/s", "5", "Mb/s", "2", "ms", "2", "ms",
                                   "100", "pkts", "-"]  # fmt: skip
    assert ["host", "IP", "MAC", "attached", "to"] in [line.split() for line in lines]


def test_net_show_gives_the_rate_each_backend_runs() -> None:
    """A tutorials file with one 0.5 Mb/s link: `net show` listed its other links at 10 Mb/s,
    which the simulator ran at 10 Gb/s (issue 63).  Each backend's rate is shown: the
    simulator's line rate and `qcn net up`'s scale; with --scenario, the run's, at the scale
    a BMv2 run chooses (rates x0.000815 for long-lived's incast on this machine's model)."""
    plain = show(str(DATA / "ecn-topo.json"))
    assert plain[1].startswith("sim: as a scenario runs it on the simulator")
    assert plain[2].startswith("BMv2: as qcn net up runs it; scale: links at 0.5/5.7 Mb/s")
    assert rows(plain)["s1:1"][:5] == ["h11", "10", "Gb/s", "5.7", "Mb/s"]
    assert rows(plain)["s1:3"][:5] == ["s2:3", "500", "kb/s", "500", "kb/s"]
    run = show(str(DATA / "ecn-topo.json"), "long-lived", 'workload.traffic="incast"',
               'workload.incast_sink="h2"')  # fmt: skip
    assert run[1] == "sim: long-lived on the simulator"
    # (Why the built-in figure, in brackets, is the machine's: no BMv2, or none calibrated.)
    assert run[2].startswith(
        "BMv2: long-lived at scale: rates x0.000815, times x245.3 (1.23x slower than its own "
        "[bmv2] scale (rates x0.001, times x200)): at its own the switches would take 0.67 of "
        "a core, over the budget of 0.55 (predicted at 159 us a frame: the built-in figure, "
        "calibrated on the developers' machine ("
    ), run[2]
    assert run[2].endswith("); --scale chooses another"), run[2]
    assert rows(run)["s1:1"] == ["h11", "10", "Gb/s", "8.15", "Mb/s", "0", "ms", "0", "ms",
                                 "100", "pkts", "-"]  # fmt: skip
    assert rows(run)["s1:3"][:5] == ["s2:3", "500", "kb/s", "500", "kb/s"]
    # The run's CPs (the incast's two congested ports), not every port that could congest.
    assert [p for p, cells in rows(run).items() if cells[-1] == "CP"] == ["s1:3", "s2:2"]


def test_net_show_says_where_a_backend_would_not_run_it() -> None:
    lines = show("leaf-spine:16,32,32")
    assert lines[2].startswith("BMv2: qcn net up would not run it: leaf-spine:16,32,32: ")
    assert rows(lines)["s1:1"][:6] == ["s17:33", "10", "Gb/s", "-", "0.02", "ms"]
    r = qcn("net", "show", str(DATA / "ecn-topo.json"), "--set", "duration_s=1")
    assert_one_line_error(r, "--set goes with --scenario")
    r = qcn("net", "show", str(DATA / "ecn-topo.json"), "--scenario", "long-lived",
            "--set", 'network.topology="single:2"')  # fmt: skip
    assert_one_line_error(r, "--set network.topology: the network is the command's own")


def test_draw_into_a_directory_writes_name_png_there_and_says_so(tmp_path: Path) -> None:
    """`-o DIR` wrote DIR.png beside it and said "drew DIR"."""
    r = qcn("net", "draw", "single:2", "-o", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith(f"drew {tmp_path / 'single-2.png'}")
    assert (tmp_path / "single-2.png").read_bytes()[:4] == b"\x89PNG"
    assert not tmp_path.with_name(tmp_path.name + ".png").exists()


def test_a_drawing_the_command_names_replaces_no_file(tmp_path: Path) -> None:
    """`qcn net draw single:3` without -o replaced an existing single-3.png silently."""
    (tmp_path / "single-3.png").write_text("mine")
    for where in ((), ("-o", ".")):
        r = qcn("net", "draw", "single:3", *where, cwd=tmp_path)
        assert_one_line_error(r, "single-3.png exists: name it with -o single-3.png to replace")
    assert (tmp_path / "single-3.png").read_text() == "mine"
    r = qcn("net", "draw", "single:3", "-o", "single-3.png", cwd=tmp_path)  # (named: replaced)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "single-3.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("name", ["x.txt", "x"])
def test_draw_to_a_name_that_is_no_png_is_one_line(tmp_path: Path, name: str) -> None:
    r = qcn("net", "draw", "single:2", "-o", str(tmp_path / name))
    assert_one_line_error(r, f"-o {tmp_path / name}: the picture is a PNG")
    assert list(tmp_path.iterdir()) == []


@requires_root()
def test_draw_to_a_read_only_or_full_disk_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    with small_disk(tmp_path / "full", full=True) as disk:
        r = qcn("net", "draw", "leaf-spine:2,2,2", "-o", str(disk / "ls.png"))
        assert_one_line_error(r, "cannot write the picture (No space left on device)")
        assert sorted(p.name for p in disk.iterdir()) == ["filler"]  # (a 0-byte PNG was left)
    ro = tmp_path / "ro"
    ro.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(ro)], check=True)
    try:
        r = qcn("net", "draw", "single:2", "-o", str(ro / "s.png"))
        assert_one_line_error(r, "cannot write the picture (Read-only file system)")
    finally:
        subprocess.run(["umount", str(ro)], check=True)
