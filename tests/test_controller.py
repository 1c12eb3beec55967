"""Controller logic without a switch: config validation and parameter -> entry encoding."""

from __future__ import annotations

import math
import re
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from qcn.controller import config
from qcn.controller.agent import SwitchAgent
from qcn.controller.entries import (
    CpPort,
    PauseWatermarks,
    admission_entry,
    bmv2_queue_pkts,
    cnm_clone_session,
    cp_config_entry,
    cp_entries,
    cp_sampling_entry,
    decode_cp,
    decode_input_port,
    decode_pmax,
    default_cpid,
    ecn_marking_entry,
    edge_entries,
    flood_groups,
    input_port_entry,
    l2_entry,
    pause_honour_entry,
    quantum_us_fp16,
    sample_interval_entries,
)
from qcn.controller.errors import ConfigError
from qcn.core.params import (
    CpJudge,
    CpParams,
    CpSignal,
    ParamError,
    QcnParams,
    QueueDepth,
    QueueUnit,
    SamplingMode,
)
from qcn.core.pipeline import (
    ACTION_ADMIT,
    ACTION_HONOUR,
    ACTION_WATCH,
    TABLE_ADMISSION,
    TABLE_INPUT_PORT,
    TABLE_PAUSE_HONOUR,
)

NETWORK = """
[qcn]
q_eq_pkts = 20

[[switch]]
name = "s1"
grpc = "127.0.0.1:9559"
cp_mac = "02:00:00:00:01:00"

[[switch.port]]
port = 1
edge = true

[[switch.port]]
port = 3
cp = true
queue_rate_pps = 1000
qcn = { w = 1.5 }

[[switch]]
name = "s2"
grpc = "127.0.0.1:9560"
thrift_port = 9091

[[switch.port]]
port = 1
edge = true

[[switch.port]]
port = 2

[[host]]
name = "h1"
mac = "00:00:00:00:00:01"
switch = "s1"
port = 1

[[host]]
name = "h2"
mac = "00:00:00:00:00:02"
switch = "s2"
port = 1

[[link]]
a = "s1:3"
b = "s2:2"
"""


PAUSE = (
    "pause = { hi_bytes = 130000, lo_bytes = 110000, partition_bytes = 150000, "
    "pause_quanta = 5000, refresh_us = 2000 }"
)


def write(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "net.toml"
    f.write_text(text)
    return f


def test_valid_network(tmp_path: Path) -> None:
    net = config.load(write(tmp_path, NETWORK))
    s1 = net.switch("s1")
    assert s1.port(3).cp_params == CpParams(q_eq_pkts=20, w=1.5)  # file default + override
    assert s1.port(1).cp_params.q_eq_pkts == 20
    assert net.switch("s2").thrift_port == 9091
    # h2 is reached from s1 through the s1:3 - s2:2 link.
    assert net.l2_ports("s1") == {"00:00:00:00:00:01": 1, "00:00:00:00:00:02": 3}
    assert net.l2_ports("s2") == {"00:00:00:00:00:01": 2, "00:00:00:00:00:02": 1}


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('grpc = "127.0.0.1:9559"', 'grpc = "localhost"', "switch[0].grpc: must be HOST:PORT"),
        ('grpc = "127.0.0.1:9559"', 'grpc = "127.0.0.1:99999"', "the port in [1, 65535]"),
        ('b = "s2:2"', 'b = "s1:3"', "link[0]: a link from a port to itself (s1:3)"),
        ("q_eq_pkts = 20", "q_eq_pkts = 0", "qcn.q_eq_pkts: must be a whole number in [1, 2047]"),
        ("qcn = { w = 1.5 }", "qcn = { w = -1 }", "switch[0].port[1].qcn.w: must be in [0, 64]"),
        ("qcn = { w = 1.5 }", "qcn = { p_base = 2 }", "switch[0].port[1].qcn.p_base"),
        ("port = 3", "port = 600", "switch[0].port[1].port: must be a whole number in [0, 510]"),
        (
            "edge = true\n\n[[switch.port]]\nport = 3",
            "edge = 1\n\n[[switch.port]]\nport = 3",
            "switch[0].port[0].edge: must be true or false",
        ),
        ('cp_mac = "02:00:00:00:01:00"', 'cp_mac = "zz"', "switch[0].cp_mac: must be a MAC"),
        ('cp_mac = "02:00:00:00:01:00"', 'cp_mac = "01:00:00:00:01:00"', "must be a unicast"),
        ('switch = "s2"', 'switch = "s9"', "host[1].switch: no switch named 's9'"),
        ('a = "s1:3"', 'a = "s7:3"', "link[0].a: must be SWITCH:PORT of a known switch"),
        ('name = "s2"', 'name = "s1"', "switch 's1' appears twice"),
        ("queue_rate_pps = 1000", "queue_rate_pps = -1", "queue_rate_pps: must be a whole number"),
        ("[qcn]", "[qcn]\nbogus = 1", "qcn.bogus: unknown parameter"),
        ('name = "h1"', 'name = "h1"\ncolour = "red"', "host[0].colour: unknown field"),
        (
            "queue_rate_pps = 1000",
            "queue_rate_pps = 1000\n" + PAUSE.replace("lo_bytes = 110000", "lo_bytes = 140000"),
            "switch[0].port[1].pause: watermarks must satisfy 0 <= lo < hi < partition",
        ),
        (
            "queue_rate_pps = 1000",
            "queue_rate_pps = 1000\n" + PAUSE.replace(", refresh_us = 2000", ""),
            "switch[0].port[1].pause.refresh_us: required",
        ),
        (
            "queue_rate_pps = 1000",
            "queue_rate_pps = 1000\npause = { hi = 1 }",
            "switch[0].port[1].pause.hi: unknown field",
        ),
    ],
)
def test_invalid_field_named(tmp_path: Path, old: str, new: str, message: str) -> None:
    assert old in NETWORK
    with pytest.raises(ConfigError) as e:
        config.load(write(tmp_path, NETWORK.replace(old, new, 1)))
    assert str(e.value).startswith(str(tmp_path / "net.toml"))
    assert message in str(e.value)


def test_pause_on_a_port(tmp_path: Path) -> None:
    net = config.load(write(tmp_path, NETWORK.replace("queue_rate_pps = 1000", PAUSE, 1)))
    s1 = net.switch("s1")
    pause = s1.port(3).pause
    assert pause == PauseWatermarks(130000, 110000, 150000, 5000, 2000)
    entry = input_port_entry(3, pause, push_fb_tag=False)
    assert entry is not None
    assert (entry.table_id, action_name(entry)) == (TABLE_INPUT_PORT, ACTION_WATCH)
    assert args(entry) == {
        "hi_bytes": 130000,
        "lo_bytes": 110000,
        "partition_bytes": 150000,
        "refresh_us": 2000,
        "pause_quanta": 5000,
    }
    assert decode_input_port(entry) == (pause, False)


def test_an_input_port_has_one_entry_for_pause_and_the_fb_tag_push() -> None:
    """PAUSE's watermarks and the three-point push share the input port's one lookup."""
    pause = PauseWatermarks(130000, 110000, 150000, 5000, 2000)
    assert input_port_entry(3, None, push_fb_tag=False) is None
    push = input_port_entry(3, None, push_fb_tag=True)
    assert push is not None
    assert (action_name(push), args(push), decode_input_port(push)) == (
        "push_fb_tag",
        {},
        (None, True),
    )
    both = input_port_entry(3, pause, push_fb_tag=True)
    assert both is not None
    assert action_name(both) == "watch_and_push_fb_tag"
    assert decode_input_port(both) == (pause, True)
    three_point = CpParams(three_point=True)
    tables = [e.table_id for e in edge_entries(3, three_point, 7, "02:00:00:00:01:00", pause)]
    assert tables == ["edge_port", "fb_tag_exit", "input_port"]
    assert [e.table_id for e in edge_entries(3, CpParams(), 7, "02:00:00:00:01:00")] == [
        "edge_port",
        "fb_tag_exit",
    ]


def test_missing_and_broken_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        config.load(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match="not valid TOML"):
        config.load(write(tmp_path, "[[switch]\n"))
    with pytest.raises(ConfigError, match="at least one"):
        config.load(write(tmp_path, "[qcn]\n"))


def args(entry: Any) -> dict[str, Any]:
    return dict(entry.action.args)


def action_name(entry: Any) -> str:
    return str(entry.action.name)


def test_cp_entry_fixed_point_encoding() -> None:
    cp = CpPort.with_default_cpid(3, CpParams(queue_unit=QueueUnit.PACKETS), "02:00:00:00:01:00")
    assert cp.cpid == 0x020000000100_0003
    entry = cp_config_entry(cp)
    assert entry.table_id == "arrival_cp.cp_config"
    assert dict(entry.match or {}) == {"eg_port": 3}
    assert args(entry) == {
        "q_eq": 22,
        "w_fixed": 32,  # 2.0 * 16
        "fbmax_fixed": 1760,  # (2*32 + 16) * 22 = 16 * Fbmax
        "fb_multiplier": 10_075_524_734_530,  # ceil(63 * 2^48 / 1760)
        "p_base_fixed": 167_772,  # round(0.01 * 2^24)
        "p_scale_fixed": 23_593,  # round(0.09/64 * 2^24)
        "cpid": 0x0200000001000003,
        "cp_mac": "02:00:00:00:01:00",
        "positive_feedback": 0,  # QCN's CP: Fb < 0 only
        "three_point": 0,  # two-point QCN
        "reflect_p_base_fixed": 1 << 24,  # three-point: reflect every sampled Fb < 0
        "reflect_p_scale_fixed": 0,
        "signal": 0,  # CNMs (SIGNAL_CODES)
    }
    ecm = CpPort.with_default_cpid(3, QcnParams.preset("ecm").cp, "02:00:00:00:01:00")
    assert args(cp_config_entry(ecm))["positive_feedback"] == 1
    # The standard's unit: q_eq = 33 KB, Fbmax = 16 * 5 * 33,000 bytes.
    in_bytes = args(cp_config_entry(CpPort.with_default_cpid(3, CpParams(), "02:00:00:00:01:00")))
    assert (in_bytes["q_eq"], in_bytes["fbmax_fixed"]) == (33_000, 2_640_000)
    assert in_bytes["fb_multiplier"] == math.ceil(63 * 2**48 / 2_640_000)


def test_admission_entry() -> None:
    """Limits and the unit of q go to ingress with the arrival CP's stage 1 (one table per
    frame); a port the departure CP judges is only admitted there."""
    cp = CpPort.with_default_cpid(3, CpParams(), "02:00:00:00:01:00", limit_pkts=100)
    entry = admission_entry(cp)
    assert (entry.table_id, action_name(entry), dict(entry.match or {})) == (
        "admission",
        "admit_sample_bernoulli",
        {"eg_port": 3},
    )
    assert args(entry) == {
        "limit_pkts": 100,
        "limit_bytes": 2**32 - 1,
        "bytes_unit": 1,
        "p_max_fixed": 167_772 + 63 * 23_593,
        "judge_dropped": 1,  # cp.judge = "arrivals": the frames the queue drops too
    }
    admitted = CpPort.with_default_cpid(3, CpParams(judge=CpJudge.ADMITTED), "02:00:00:00:01:00")
    assert args(admission_entry(admitted))["judge_dropped"] == 0
    leaving = CpParams(
        depth_at=QueueDepth.DEQUEUE, queue_unit=QueueUnit.PACKETS, judge=CpJudge.ADMITTED
    )
    cp = CpPort.with_default_cpid(3, leaving, "02:00:00:00:01:00", 10, limit_bytes=15_000)
    assert (action_name(admission_entry(cp)), args(admission_entry(cp))) == (
        "admit",
        {"limit_pkts": 10, "limit_bytes": 15_000, "bytes_unit": 0},
    )
    assert cp_config_entry(cp).table_id == "departure_cp.cp_config"
    assert bmv2_queue_pkts(100) >= 100 + 50_000  # BMv2 never drops a counted frame


def test_a_queue_that_overflows_fb_is_refused() -> None:
    """|Fb| * 16 must fit the pipeline's 32 bits for the deepest queue admitted."""
    steep = CpParams(w=64.0, q_eq_bytes=3000)
    CpPort.with_default_cpid(3, steep, "02:00:00:00:01:00", limit_pkts=100, limit_bytes=2_000_000)
    with pytest.raises(ParamError, match="overflows the pipeline's 32-bit Fb"):
        CpPort.with_default_cpid(3, steep, "02:00:00:00:01:00", limit_pkts=1000)


def test_sample_interval_entries() -> None:
    cp = CpPort(2, CpParams(sampling=SamplingMode.BYTE_INTERVAL), "02:00:00:00:01:00", 7)
    rows = sample_interval_entries(cp)
    assert [dict(r.match or {}) for r in rows] == [{"eg_port": 2, "idx": i} for i in range(8)]
    assert args(rows[0]) == {"base_bytes": 150_000, "jitter_span_bytes": 45_000}  # 2*22500
    assert args(rows[7]) == {"base_bytes": 18_500, "jitter_span_bytes": 5_550}
    stage1 = admission_entry(cp)
    assert (stage1.table_id, action_name(stage1)) == ("admission", "admit_sample_byte_interval")
    assert "p_max_fixed" not in args(stage1)
    enqueue = replace(
        cp.params, depth_at=QueueDepth.ENQUEUE, queue_unit=QueueUnit.PACKETS, judge=CpJudge.ADMITTED
    )
    leaving = replace(cp, params=enqueue)
    stage1 = cp_sampling_entry(leaving)
    assert (stage1.table_id, action_name(stage1), args(stage1)) == (
        "cp_sampling",
        "sample_byte_interval",
        {"dequeue_depth": 0},
    )


def test_departure_stage_bound() -> None:
    """The departure CP's stage 1 lets through the draws below p_base + 63 * p_scale, with
    BMv2's depth at enqueue or dequeue; the arrival CP has no cp_sampling entry."""
    params = CpParams(
        depth_at=QueueDepth.DEQUEUE, queue_unit=QueueUnit.PACKETS, judge=CpJudge.ADMITTED
    )
    stage1 = cp_sampling_entry(CpPort(2, params, "02:00:00:00:01:00", 7))
    assert action_name(stage1) == "sample_bernoulli"
    assert args(stage1) == {"p_max_fixed": 167_772 + 63 * 23_593, "dequeue_depth": 1}
    with pytest.raises(ValueError, match="admission entry"):
        cp_sampling_entry(CpPort(2, CpParams(), "02:00:00:00:01:00", 7))


def test_cp_entries_enable_the_port_last() -> None:
    """The per-frame stage goes in after the feedback table, so no frame meets half a CP."""
    tables = [e.table_id for e in cp_entries(CpPort(2, CpParams(), "02:00:00:00:01:00", 7))]
    assert tables == ["arrival_cp.cp_config", *["arrival_cp.sample_interval"] * 8, "admission"]
    leaving = CpParams(
        depth_at=QueueDepth.ENQUEUE, queue_unit=QueueUnit.PACKETS, judge=CpJudge.ADMITTED
    )
    tables = [e.table_id for e in cp_entries(CpPort(2, leaving, "02:00:00:00:01:00", 7))]
    assert tables == [
        "departure_cp.cp_config",
        *["departure_cp.sample_interval"] * 8,
        "cp_sampling",
        "admission",
    ]


def test_forwarding_entities() -> None:
    assert args(l2_entry("00:00:00:00:00:02", 4)) == {"port": 4}
    groups = flood_groups([3, 1, 2])
    assert [g.multicast_group_id for g in groups] == [2, 3, 4]  # FLOOD_GROUP_BASE + port
    assert [list(g.replicas) for g in groups] == [
        [(2, 1), (3, 1)],
        [(1, 1), (3, 1)],
        [(1, 1), (2, 1)],
    ]
    assert flood_groups([1]) == []
    session = cnm_clone_session(5)
    assert session.session_id == 6
    assert list(session.replicas) == [(5, 1)]
    assert default_cpid("00:00:00:00:00:01", 1) == 0x0000_0000_0001_0001


def test_ctl_run_reports_an_unreachable_switch(tmp_path: Path) -> None:
    (tmp_path / "p4info.txtpb").write_text(
        'pkg_info {\n  arch: "v1model"\n}\ntables {\n  preamble {\n    id: 33554433\n'
        '    name: "t"\n    alias: "t"\n  }\n}\n'
    )
    (tmp_path / "qcn_cp.json").write_text("{}")
    net = write(
        tmp_path,
        """
[[switch]]
name = "s1"
grpc = "127.0.0.1:1"
thrift_port = 1
p4info = "p4info.txtpb"
bmv2_json = "qcn_cp.json"

[[switch.port]]
port = 1
edge = true
""",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "qcn", "ctl", "-c", str(net), "--timeout", "2", "run"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        began = time.monotonic()
        lines = [proc.stdout.readline(), proc.stdout.readline()]
        assert time.monotonic() - began < 2 + 5  # within its deadline, with start-up
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    assert lines[0].startswith("qcn ctl: holding s1")
    assert lines[1].startswith("s1: not reachable (127.0.0.1:1:"), lines


@pytest.mark.parametrize(
    "params",
    [
        CpParams(),
        CpParams(queue_unit=QueueUnit.PACKETS, q_eq_pkts=30, w=4.0),
        CpParams(sampling=SamplingMode.BYTE_INTERVAL, sample_jitter=0.2),
        CpParams(
            depth_at=QueueDepth.DEQUEUE,
            queue_unit=QueueUnit.PACKETS,
            judge=CpJudge.ADMITTED,
            p_base=0.04,
        ),
        CpParams(depth_at=QueueDepth.ENQUEUE, queue_unit=QueueUnit.PACKETS, judge=CpJudge.ADMITTED),
        QcnParams.preset("ecm").cp,
        QcnParams.preset("dcqcn").cp,
        CpParams(signal=CpSignal.ECN, kmin_bytes=0, kmax_bytes=1, pmax=1.0),
        CpParams(signal=CpSignal.ECN, kmin_bytes=10_000, kmax_bytes=16_000_000, pmax=0.3),
        CpParams().never_sampling(),
        CpParams(p_base=0.0, p_scale=0.0),
    ],
)
def test_decoding_the_entries_gives_back_the_parameters(params: CpParams) -> None:
    """decode_cp (what `qcn ctl show` reads back) inverts cp_entries, port by port."""
    cp = CpPort.with_default_cpid(5, params, "02:00:00:00:01:00", limit_pkts=100)
    other = CpPort.with_default_cpid(6, CpParams(q_eq_pkts=7), "02:00:00:00:01:00")
    entries = [*cp_entries(other), *cp_entries(cp)]
    decoded = decode_cp(entries, 5)
    assert decoded is not None
    back, cpid = decoded
    assert cpid == cp.cpid
    # Each field as the data plane holds it: the same entries again.
    assert cp_entries(CpPort(5, back, "02:00:00:00:01:00", cpid, 100)) == cp_entries(cp)
    assert back.queue_unit is params.queue_unit
    assert back.depth_at is params.depth_at
    assert back.sampling is params.sampling
    assert back.signal is params.signal
    if params.signal is CpSignal.ECN:
        assert (back.kmin_bytes, back.kmax_bytes, back.pmax) == (
            params.kmin_bytes,
            params.kmax_bytes,
            params.pmax,
        )
    assert decode_cp(entries, 4) is None


def test_an_ecn_port_marks_on_its_curve_and_samples_nothing() -> None:
    """signal = ecn: the marking entry holds CpPortConfig's integers (the one encoder), and
    the port's CP samples nothing (p_max 0), so it sends no CNM; a cnm port has no curve."""
    curve = CpParams(signal=CpSignal.ECN, kmin_bytes=5_000, kmax_bytes=200_000, pmax=0.01)
    cp = CpPort.with_default_cpid(3, curve, "02:00:00:00:01:00")
    entry = ecn_marking_entry(cp)
    assert entry is not None
    assert (entry.table_id, action_name(entry), dict(entry.match or {})) == (
        "ecn_marking",
        "mark_ecn",
        {"eg_port": 3},
    )
    # ecn_slope = round(0.01 * 2^24 * 2^16 / 195,000)
    assert args(entry) == {"kmin_bytes": 5_000, "kmax_bytes": 200_000, "ecn_slope": 56_385}
    assert args(admission_entry(cp))["p_max_fixed"] == 0
    assert (
        args(cp_config_entry(cp))["p_base_fixed"],
        args(cp_config_entry(cp))["p_scale_fixed"],
    ) == (
        0,
        0,
    )
    assert args(cp_config_entry(cp))["signal"] == 1
    assert entry in cp_entries(cp)
    assert cp_entries(cp)[-1] == admission_entry(cp)  # the port admits frames last
    silent = CpPort.with_default_cpid(3, replace(curve, signal=CpSignal.NONE), "02:00:00:00:01:00")
    assert ecn_marking_entry(silent) is None
    assert args(admission_entry(silent))["p_max_fixed"] == 0
    assert args(cp_config_entry(silent))["signal"] == 2
    assert ecn_marking_entry(CpPort.with_default_cpid(3, CpParams(), "02:00:00:00:01:00")) is None


def test_what_the_switch_does_not_hold_is_read_back_as_configured() -> None:
    """An ECN port holds no sampling probabilities and a CNM port no marking curve: read
    back, those fields are the configured ones (so `qcn ctl set --signal cnm` on an ECN port
    samples as the network file says, not at 0)."""
    configured = CpParams(p_base=0.05, p_scale=0.001, kmin_bytes=7_000, kmax_bytes=70_000)
    marking = CpPort.with_default_cpid(
        5, replace(configured, signal=CpSignal.ECN), "02:00:00:00:01:00"
    )
    decoded = decode_cp(cp_entries(marking), 5, configured)
    assert decoded is not None
    back = decoded[0]
    assert (back.signal, back.p_base, back.p_scale) == (CpSignal.ECN, 0.05, 0.001)
    sampling = CpPort.with_default_cpid(
        5, replace(configured, kmin_bytes=1_000, kmax_bytes=2_000), "02:00:00:00:01:00"
    )
    decoded = decode_cp(cp_entries(sampling), 5, configured)
    assert decoded is not None
    assert (decoded[0].signal, decoded[0].kmin_bytes, decoded[0].kmax_bytes) == (
        CpSignal.CNM,
        7_000,
        70_000,
    )


@pytest.mark.parametrize(
    ("kmin", "kmax", "pmax"),
    [(5_000, 200_000, 0.01), (0, 1, 1.0), (0, 1 << 24, 0.5), (100, 101, 0.000123), (0, 3, 0.0)],
)
def test_pmax_reads_back_as_the_shortest_decimal_of_its_slope(
    kmin: int, kmax: int, pmax: float
) -> None:
    params = CpParams(signal=CpSignal.ECN, kmin_bytes=kmin, kmax_bytes=kmax, pmax=pmax)
    cp = CpPort.with_default_cpid(3, params, "02:00:00:00:01:00")
    assert decode_pmax(kmin, kmax, cp.encoded.ecn_slope) == pmax


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("garbage {{", "not a P4Info file (ParseError"),
        ('pkg_info { arch: "v1model" }', "a P4Info without tables"),
    ],
)
def test_a_p4info_that_is_not_the_pipelines_is_named(
    tmp_path: Path, text: str, message: str
) -> None:
    """It was reported as "connect failed: IndexError", blaming the switch."""
    from qcn.controller.errors import P4RuntimeError  # noqa: PLC0415
    from qcn.controller.p4runtime import P4RuntimeSwitch  # noqa: PLC0415

    p4info, blob = tmp_path / "x.p4info.txtpb", tmp_path / "x.json"
    p4info.write_text(text)
    blob.write_text("{}")
    with pytest.raises(P4RuntimeError, match=rf"{p4info}: {re.escape(message)}"):
        P4RuntimeSwitch("127.0.0.1:9559", p4info, blob)


# -- a port that honours PAUSE (p4src/control/port_hold.p4) ---------------------------------


@pytest.mark.parametrize(
    ("link_bps", "quantum"),
    [
        (40_000_000, 838_861),  # 12.8 µs
        (1_000_000, 512 << 16),  # 512 µs
        (10_000_000_000, 3_355),  # 51.2 ns
    ],
)
def test_a_pause_quantum_in_microseconds(link_bps: int, quantum: int) -> None:
    assert quantum_us_fp16(link_bps) == quantum
    entry = pause_honour_entry(9, link_bps)
    assert (entry.table_id, action_name(entry)) == (TABLE_PAUSE_HONOUR, ACTION_HONOUR)
    assert args(entry) == {"quantum_us_fp16": quantum}
    # The pipeline's hold for the longest PAUSE is within 0.1 % of 802.3x's.
    hold_us = (0xFFFF * quantum) >> 16
    assert hold_us == pytest.approx(0xFFFF * 512 / link_bps * 1e6, rel=1e-3)


@pytest.mark.parametrize("link_bps", [9_999, 10**12 + 1])
def test_a_link_rate_outside_the_quantum_s_range_is_refused(link_bps: int) -> None:
    with pytest.raises(ParamError, match="honour_pause_bps"):
        quantum_us_fp16(link_bps)


def test_a_port_honours_pause_at_its_link_rate(tmp_path: Path) -> None:
    honouring = "queue_rate_pps = 1000\nhonour_pause_bps = 40000000"
    net = config.load(write(tmp_path, NETWORK.replace("queue_rate_pps = 1000", honouring, 1)))
    assert net.switch("s1").port(3).honour_pause_bps == 40_000_000
    assert net.switch("s1").port(1).honour_pause_bps is None


@pytest.mark.parametrize(
    ("new", "message"),
    [
        ("honour_pause_bps = 40000000", "honour_pause_bps: needs queue_rate_pps on the port"),
        (
            "queue_rate_pps = 1000\nhonour_pause_bps = 5000",
            "switch[0].port[1].honour_pause_bps: must be a whole number in [10000,",
        ),
        (
            "queue_rate_pps = 1000\nhonour_pause_bps = 4e7",
            "switch[0].port[1].honour_pause_bps: must be a whole number",
        ),
    ],
)
def test_a_bad_honour_pause_is_named(tmp_path: Path, new: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        config.load(write(tmp_path, NETWORK.replace("queue_rate_pps = 1000", new, 1)))


def test_a_switch_with_a_port_beyond_the_held_order_s_range_cannot_hold(tmp_path: Path) -> None:
    text = NETWORK.replace(
        "queue_rate_pps = 1000", "queue_rate_pps = 1000\nhonour_pause_bps = 40000000", 1
    )
    text = text.replace("port = 1\nedge = true", "port = 64\nedge = true", 1)
    with pytest.raises(ConfigError, match="every port must be below 64"):
        config.load(write(tmp_path, text))
    with pytest.raises(ConfigError, match="needs queue_rate_pps"):
        config.PortConfig(port=3, honour_pause_bps=40_000_000)


def test_a_buffer_on_a_port_without_a_cp_is_the_pipeline_s(tmp_path: Path) -> None:
    """Not BMv2's own queue, which drops without a trace: an admission entry that counts
    the queue and its tail drops (qcn.controller.entries.buffer_entry)."""
    text = NETWORK.replace(
        "port = 1\nedge = true", "port = 1\nedge = true\nqueue_depth_pkts = 50", 1
    )
    agent = SwitchAgent(config.load(write(tmp_path, text)), "s1")
    buffers = [e for e in agent.desired_table_entries() if str(e.table_id) == TABLE_ADMISSION]
    ports = {int(e.match["eg_port"]): e for e in buffers if e.match is not None}
    assert set(ports) == {1, 3}  # the buffer of port 1, the CP's admission on port 3
    assert action_name(ports[1]) == ACTION_ADMIT
    assert args(ports[1]) == {"limit_pkts": 50, "limit_bytes": (1 << 32) - 1, "bytes_unit": 0}
    assert decode_cp([ports[1]], 1) is None  # a buffer is not a CP


def test_a_taken_port_is_said_with_its_holder() -> None:
    """A switch's port taken (a listener, or an outgoing connection's local port) is found
    before the switch starts, and named with the process that holds it."""
    import os  # noqa: PLC0415
    import socket  # noqa: PLC0415

    from qcn.topologies.bmv2 import port_taken  # noqa: PLC0415

    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        held = port_taken("127.0.0.1", port)
        assert held is not None
        assert held.startswith(f"pid {os.getpid()}, ")
    assert port_taken("127.0.0.1", port) is None


def test_a_port_whose_last_connection_waits_in_time_wait_is_free() -> None:
    """A switch just stopped leaves its gRPC port's connections in TIME-WAIT for a minute
    when it closed them first; BMv2's servers bind with SO_REUSEADDR, so the next switch
    there starts (CI once refused nine BMv2 tests in a row for it: "taken (a process)")."""
    import socket  # noqa: PLC0415

    from qcn.topologies.bmv2 import port_taken  # noqa: PLC0415

    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = listener.accept()
        accepted.close()  # (the server's side closes first: its port waits in TIME-WAIT)
        assert client.recv(1) == b""
        client.close()
    waiting = subprocess.run(
        ["ss", "-Htan", "state", "time-wait", f"( sport = :{port} )"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert f":{port} " in waiting
    assert port_taken("127.0.0.1", port) is None


def test_switch_ports_sit_below_the_range_of_outgoing_connections() -> None:
    """Linux gives an outgoing connection a local port from ip_local_port_range (32768-60999
    by default); a switch's port there could be taken as the switch starts."""
    from qcn.core.topology import load as load_topology  # noqa: PLC0415
    from qcn.topologies.network import address  # noqa: PLC0415

    low, _high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    switches = load_topology("fat-tree:8").switches  # 80 switches
    ports = [p for s in switches for p in (address(s).grpc_port, address(s).thrift_port)]
    assert len(set(ports)) == len(ports)
    assert max(ports) < low


def test_a_network_file_s_ecn_port_gets_its_curve_and_the_parser_reads_ipv4(
    tmp_path: Path,
) -> None:
    """A port whose `qcn` table says signal = "ecn": `qcn ctl up` writes its marking entry
    and makes the parser read IPv4 (SwitchAgent.marks_ecn); the network's other CP port
    marks nothing."""
    plain = SwitchAgent(config.load(write(tmp_path, NETWORK)), "s1")
    assert not plain.marks_ecn()
    text = NETWORK.replace(
        "qcn = { w = 1.5 }",
        'qcn = { w = 1.5, signal = "ecn", kmin_bytes = 3000, kmax_bytes = 30000, pmax = 0.1 }',
    )
    agent = SwitchAgent(config.load(write(tmp_path, text)), "s1")
    assert agent.marks_ecn()
    marking = [e for e in agent.desired_table_entries() if str(e.table_id) == "ecn_marking"]
    assert [
        (dict(e.match or {}), args(e)["kmin_bytes"], args(e)["kmax_bytes"]) for e in marking
    ] == [({"eg_port": 3}, 3000, 30000)]
    with pytest.raises(ConfigError, match=r"kmax_bytes"):
        config.load(write(tmp_path, text.replace("kmax_bytes = 30000", "kmax_bytes = 3000")))
