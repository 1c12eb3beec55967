"""`qcn net draw`'s layout draws no link through a node it does not join (a triangle of
switches was laid out in a line, one link drawn over the middle switch)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from qcn.core.netdraw import HOST_RADIUS, SWITCH_HALF, draw, layout
from qcn.core.topology import LinkDefaults, Topology, load
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


def test_net_show_has_column_headers_and_each_note_once() -> None:
    """`qcn net show` printed its runtime_json note once per switch, and its table had no
    column headers."""
    from qcn.cli.net import show_lines  # noqa: PLC0415

    lines = show_lines(load(str(DATA / "two-leaves.json"), RATE))
    notes = [line for line in lines if line.startswith("note: ")]
    assert [n for n in notes if "runtime_json" in n] == [
        "note: switches s1, s2: their runtime_json are for the tutorials' own program; this "
        "network runs the QCN pipeline, programmed by qcn's controller"
    ]
    assert lines[len(notes) + 2].split() == ["port", "to", "rate", "delay", "buffer", "CP"]
    assert lines[len(notes) + 3].split() == ["s1:1", "h1", "10", "Mb/s", "0", "ms", "100", "pkts",
                                            "CP"]  # fmt: skip
    assert "s1:3 s3:1 5 Mb/s 2 ms 100 pkts -" in [" ".join(line.split()) for line in lines]
    assert ["host", "IP", "MAC", "attached", "to"] in [line.split() for line in lines]


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
