"""bench/htsim_bench.py without htsim: one line that says so, and make bench goes on."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import htsim_bench


def test_without_htsim_the_bench_says_so_and_goes_on(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.delenv("HTSIM_DIR", raising=False)
    assert htsim_bench.main([]) == 0
    assert htsim_bench.main(["--htsim", str(tmp_path)]) == 0  # not a checkout of htsim
    lines = capsys.readouterr().out.splitlines()
    assert lines == [lines[0]] * 2
    assert lines[0].startswith("htsim_bench: skipped: no htsim here (--htsim DIR or HTSIM_DIR")


def test_the_network_htsim_is_given_is_this_projects() -> None:
    """The driver's input: every port a stream crosses once, with its link's rate, buffer
    and delay; each stream on the ports of the path this project routes it on."""
    from qcn.core import scenario  # noqa: PLC0415

    sc = scenario.load("long-lived").with_overrides(
        {"network.topology": "leaf-spine:2,4,4", "workload.traffic": "permutation"}
    )
    lines = htsim_bench.network_spec(sc).splitlines()
    ports = int(lines[0])
    port_lines, flow_lines = lines[1 : 1 + ports], lines[2 + ports :]
    assert int(lines[1 + ports]) == len(flow_lines) == len(sc.sources) == 16
    topo = sc.topology
    order: list[object] = []
    for i, flow in enumerate(flow_lines):
        rate, access, back, k, *hops = flow.split()
        refs = sc.stream_refs(i)
        assert int(k) == len(refs) == len(hops)
        assert len(refs) in (1, 3)  # (its leaf; or a leaf, a spine, another leaf)
        link = topo.access_link(sc.sources[i].host)
        assert float(rate) == link.rate_bps
        assert float(access) == link.delay_s
        assert float(back) == pytest.approx(
            link.delay_s + sum(topo.link_at(r).delay_s for r in refs)
        )
        for hop, ref in zip(hops, refs, strict=True):
            if ref not in order:
                order.append(ref)
            assert int(hop) == order.index(ref)
            rate_bps, buffer_pkts, delay_s = port_lines[int(hop)].split()
            assert float(rate_bps) == topo.link_at(ref).rate_bps
            assert int(buffer_pkts) == topo.link_at(ref).buffer_pkts
            assert float(delay_s) == topo.link_at(ref).delay_s
    assert len(order) == ports
    assert {len(sc.stream_refs(i)) for i in range(len(flow_lines))} == {1, 3}
