"""Flows that finish (seed 003's dynamic workload): flow sizes, arrivals, and what the field
measures of them, flow completion time (FCT) and slowdown (``docs/fct.md``).

Both backends share everything here: how a flow's bytes become frames, the size
distributions, the ideal FCT, and the analysis of the finished flows, which follows HPCC's
``analysis/fct_analysis.py``:

- slowdown = FCT / the FCT the flow would have alone in the empty network, floored at 1;
- the finished flows, sorted by size, are cut into bins of 5 % of them; per bin, its largest
  size and the p50, p95 and p99 slowdown (percentile p of n sorted values: index int(n p));
- flows that did not finish are counted, never dropped from the record.
"""

from __future__ import annotations

import bisect
import csv
import itertools
import math
import random
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from qcn.core.errors import QcnError
from qcn.core.stats import percentile

WORKLOAD_DIR = Path(__file__).resolve().parent.parent / "workloads"
"""The CDF files shipped with the project (``NAME.cdf``: ``web-search``, ``hadoop``)."""

FLOW_HEADER = struct.Struct("!IIII")
"""The flow header, first in each frame's UDP payload: flow id, the frame's sequence number
in its flow (from 0), the flow's size in bytes, flags.  An acknowledgement is the header of
the frame it acknowledges with :data:`FLAG_ACK` set, and nothing else.  The flags' bits
from :data:`COPY_SHIFT` up count the copies of the frame sent before this one: a copy that
arrives first tells the receiver that the earlier ones were lost (the path is FIFO)."""
FLAG_ACK = 1
COPY_SHIFT = 8
FIELD_MAX = (1 << (8 * FLOW_HEADER.size // 4)) - 1
"""The largest value of each of the header's four fields (unsigned, 32 bits)."""
FLOW_SIZE_MAX = FIELD_MAX
"""The largest flow the header can carry: a size beyond it made the sender die with
``struct.error`` (issue 42)."""
MAX_COPIES = 0xFF
"""The copy count's largest value (bits 8-15 of the flags): a sender saturates there, and
a receiver takes a datagram with any other bit set (beyond ACK) as malformed, so that no
one datagram can add 16.7 M lost frames (flags 0xffffff00 did)."""
KNOWN_FLAGS = FLAG_ACK | (MAX_COPIES << COPY_SHIFT)
TRANSPORTS = ("frames", "tcp")
"""How a flow's bytes travel (docs/fct.md, "Transport"): this project's acknowledged
datagrams, sent again after a timeout, on both backends; or a kernel TCP connection."""
TCP_CONNECTIONS = ("kept", "per-flow")
"""tcp: a sender keeps its connections open and sends its next flow to the same receiver on
an idle one (a new one only when every one is busy), as datacenter traffic generators do;
or opens and closes one per flow, whose handshake and close cost a BMv2 port at least four
full frames' turns each (docs/fct.md, "Real TCP")."""
ETH_IP_UDP_BYTES = 14 + 20 + 8
FLOW_HEADER_BYTES = ETH_IP_UDP_BYTES + FLOW_HEADER.size
"""What each frame of a flow carries besides the flow's bytes: Ethernet, IPv4, UDP and the
flow header."""
MIN_FRAME_BYTES = 60
"""The shortest Ethernet frame without its FCS: a flow's short last frame is padded to it."""
FRAME_BYTES_MIN, FRAME_BYTES_MAX = 64, 9216
"""The frame sizes a run takes: a minimum Ethernet frame to a jumbo frame (the flow header
and its Ethernet, IPv4 and UDP headers fit in the smallest, with room for a flow byte)."""
PORT_MIN, PORT_MAX = 1, 65535
RTO_MIN_S, RTO_MAX_S = 1e-3, 3600.0
"""A host's retransmission timeout: below a millisecond no sender process keeps it (and
one of 0 sent a frame again at every turn, 2,308 times for one flow), above an hour it
never fires within a run."""
REPORT_INTERVAL_MIN_S, REPORT_INTERVAL_MAX_S = 1e-3, 3600.0
"""How often a receiver reports its counts: at most 1,000 lines a second (an interval of 0
wrote ~450k lines in 2 s), at least once an hour (besides its last report, at its stop)."""
MAX_FLOWS = 1_000_000
"""The most flows a run may draw (their expected number, from the mean size): some 130
times the fct scenario's ~7,600.  A run drawing 76 M flows (a CDF of one 1-byte size)
held ~4 GB for 45 s before its first line; every flow is an arrival, a record and, on
BMv2, a socket."""
MAX_CUT_FRACTION = 1e-6
"""Sizes are cut at :data:`FLOW_SIZE_MAX`; a distribution that would be cut for more than
one flow in a million is refused (a CDF reaching past it always is, once scaled)."""
SHORT_FLOW_BYTES = 100_000
"""Short flows are below this size (HPCC's and TrafficGenerator's line), before scaling."""
BIN_PERCENT = 5
"""Each slowdown bin holds this percentage of the finished flows (HPCC's step)."""
PERCENTILES = (0.5, 0.95, 0.99)

SEED003_IPC_MAX_BYTES = 10_000
"""Seed 003's IPC flows: uniform sizes with a 5 KB mean, here 1 to 10,000 bytes."""
SEED003_DATA_MEAN_BYTES = 100_000
SEED003_DATA_SHAPE = 2.0
"""Seed 003's data flows: Pareto, shape 2, mean 100 KB (so the smallest is 50 KB)."""


SO_RCVBUFFORCE = 33
"""Linux's SO_RCVBUFFORCE (Python's socket module has no name for it): SO_RCVBUF beyond
rmem_max, for CAP_NET_ADMIN (the sinks' and the acknowledgement channel's buffers)."""


class FlowSizeError(QcnError, ValueError):
    """A flow size distribution that cannot be used: the message names the file and line."""


class FlowFieldError(QcnError, ValueError):
    """A flow's field, or a setting of the transport that carries it, outside what the flow
    header and the hosts take (docs/reliability.md); the message names it."""


def check_host_flow(flow_id: int, start_s: float, size_bytes: int) -> None:
    """One flow as a sender is given it: the one check of a flow's fields (a NaN start used
    to keep a sender waiting for ever, a size past the header's field to crash it)."""
    if not 0 <= flow_id <= FIELD_MAX:
        raise FlowFieldError(f"flow id {flow_id}: must be in [0, {FIELD_MAX}]")
    if not (math.isfinite(start_s) and start_s >= 0):
        raise FlowFieldError(f"flow {flow_id}: start_s must be a finite time >= 0 (got {start_s})")
    if not 1 <= size_bytes <= FLOW_SIZE_MAX:
        raise FlowFieldError(
            f"flow {flow_id}: size_bytes must be in [1, {FLOW_SIZE_MAX}], what the flow "
            f"header carries (got {size_bytes})"
        )


def check_transport(
    *,
    frame_bytes: int | None = None,
    rto_s: float | None = None,
    port: int | None = None,
    interval_s: float | None = None,
) -> None:
    """The flows' transport settings a sender or receiver is given (those not None)."""
    if frame_bytes is not None and not FRAME_BYTES_MIN <= frame_bytes <= FRAME_BYTES_MAX:
        raise FlowFieldError(
            f"--frame-bytes must be in [{FRAME_BYTES_MIN}, {FRAME_BYTES_MAX}] (got {frame_bytes})"
        )
    if rto_s is not None and not RTO_MIN_S <= rto_s <= RTO_MAX_S:  # (NaN fails too)
        raise FlowFieldError(f"--rto must be in [{RTO_MIN_S:g}, {RTO_MAX_S:g}] s (got {rto_s:g})")
    if port is not None and not PORT_MIN <= port <= PORT_MAX:
        raise FlowFieldError(f"--port must be in [{PORT_MIN}, {PORT_MAX}] (got {port})")
    if interval_s is not None and not REPORT_INTERVAL_MIN_S <= interval_s <= REPORT_INTERVAL_MAX_S:
        raise FlowFieldError(
            f"--interval must be in [{REPORT_INTERVAL_MIN_S:g}, {REPORT_INTERVAL_MAX_S:g}] s "
            f"(got {interval_s:g})"
        )


def expected_flows(sizes: SizeDistribution, load: float, rate_bps: float, until_s: float,
                   size_scale: float) -> float:  # fmt: skip
    """How many flows :func:`draw_arrivals` draws on average (from the mean size)."""
    return load * rate_bps * until_s / (8 * sizes.mean_bytes * size_scale)


class SizeDistribution(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def mean_bytes(self) -> float: ...

    def draw(self, uniform: Callable[[], float]) -> float:
        """One size in bytes (not yet rounded), from ``uniform()`` draws in [0, 1)."""
        ...

    def fraction_above(self, size: float) -> float:
        """The share of sizes drawn above ``size``."""
        ...


@dataclass(frozen=True)
class EmpiricalCdf:
    """Sizes drawn from a piecewise-linear CDF given as (bytes, cdf) points.

    The CDF rises linearly between points (sizes are interpolated, as HPCC's and
    TrafficGenerator's samplers do); a first point with cdf > 0 is a point mass there.
    """

    name: str
    points: tuple[tuple[float, float], ...]

    @property
    def mean_bytes(self) -> float:
        b0, c0 = self.points[0]
        total = b0 * c0  # the point mass at the first size, if any
        for (a, ca), (b, cb) in itertools.pairwise(self.points):
            total += (cb - ca) * (a + b) / 2
        return total

    def draw(self, uniform: Callable[[], float]) -> float:
        u = uniform()
        cdfs = [c for _, c in self.points]
        i = bisect.bisect_right(cdfs, u)
        if i == 0:
            return self.points[0][0]
        if i == len(self.points):
            return self.points[-1][0]
        (a, ca), (b, cb) = self.points[i - 1], self.points[i]
        return a + (b - a) * (u - ca) / (cb - ca)

    def fraction_above(self, size: float) -> float:
        return 1.0 - self.cdf(size)

    def cdf(self, size: float) -> float:
        """P(size drawn <= ``size``)."""
        sizes = [b for b, _ in self.points]
        i = bisect.bisect_right(sizes, size)
        if i == 0:
            return 0.0
        if i == len(self.points):
            return 1.0
        (a, ca), (b, cb) = self.points[i - 1], self.points[i]
        return ca + (cb - ca) * (size - a) / (b - a)


@dataclass(frozen=True)
class Seed003Mix:
    """Seed 003's mix: a flow is IPC with probability ``ipc_fraction`` (uniform sizes, 5 KB
    mean), else data (Pareto, shape 2, 100 KB mean).  The seed gives no ratio: the default,
    half the flows (``docs/fct.md``), is this project's choice."""

    ipc_fraction: float = 0.5
    name: str = "seed003"

    @property
    def data_min_bytes(self) -> float:
        shape = SEED003_DATA_SHAPE
        return SEED003_DATA_MEAN_BYTES * (shape - 1) / shape

    @property
    def mean_bytes(self) -> float:
        ipc_mean = (1 + SEED003_IPC_MAX_BYTES) / 2
        return self.ipc_fraction * ipc_mean + (1 - self.ipc_fraction) * SEED003_DATA_MEAN_BYTES

    def fraction_above(self, size: float) -> float:
        ipc = self.ipc_fraction * max(0.0, 1 - max(size, 0.0) / SEED003_IPC_MAX_BYTES)
        data: float = (self.data_min_bytes / max(size, self.data_min_bytes)) ** SEED003_DATA_SHAPE
        return ipc + (1 - self.ipc_fraction) * data

    def draw(self, uniform: Callable[[], float]) -> float:
        if uniform() < self.ipc_fraction:
            # 1 .. IPC_MAX, each equally likely once rounded up.
            return float(max(1, math.ceil(uniform() * SEED003_IPC_MAX_BYTES)))
        return float(self.data_min_bytes / (1.0 - uniform()) ** (1 / SEED003_DATA_SHAPE))


def read_cdf(path: Path, name: str | None = None) -> EmpiricalCdf:
    """A CDF file: ``bytes cdf`` lines (cdf from 0 to 1, both non-decreasing, the last cdf
    1), ``#`` comments and blank lines allowed."""
    if path.exists() and not path.is_file():
        raise FlowSizeError(f"{path}: not a regular file, so not a CDF file")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise FlowSizeError(f"{path}: cannot read the CDF file ({e})") from None
    points: list[tuple[float, float]] = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        where = f"{path}:{number}"
        try:
            size, cdf = (float(w) for w in words) if len(words) == 2 else (math.nan, math.nan)
        except ValueError:
            size = cdf = math.nan
        if not (math.isfinite(size) and math.isfinite(cdf)):
            raise FlowSizeError(f"{where}: expected 'bytes cdf' (two numbers), got {line!r}")
        if size < 0 or not 0 <= cdf <= 1:
            raise FlowSizeError(f"{where}: needs bytes >= 0 and a cdf in [0, 1]")
        if points and (size < points[-1][0] or cdf < points[-1][1]):
            raise FlowSizeError(f"{where}: sizes and cdf values must not decrease")
        points.append((size, cdf))
    if not points or points[-1][1] != 1:
        raise FlowSizeError(f"{path}: the last line's cdf must be 1")
    if points[-1][0] <= 0:
        raise FlowSizeError(f"{path}: the largest size must be positive")
    # Equal cdf values add nothing to interpolate between: keep the first of each run.
    kept = [points[0]] + [p for q, p in itertools.pairwise(points) if p[1] > q[1]]
    return EmpiricalCdf(name or path.stem, tuple(kept))


def shipped_cdfs() -> list[str]:
    return sorted(p.stem for p in WORKLOAD_DIR.glob("*.cdf"))


def size_file(spec: str) -> Path | None:
    """The CDF file a flow size distribution (``workload.flow_sizes``) reads: a shipped one
    by name (``web-search``, ``hadoop``) or a file's path; None for ``seed003``, which is
    code.  What a run's results depend on besides the scenario (a sweep's point keys hash
    its content)."""
    if spec == "seed003":
        return None
    path = WORKLOAD_DIR / f"{spec}.cdf"
    if "/" in spec or spec.endswith(".cdf") or not path.exists():
        path = Path(spec)
        if not path.is_file():
            known = ", ".join(["seed003", *shipped_cdfs()])
            raise FlowSizeError(f"no flow size distribution {spec!r} (known: {known}; or a file)")
    return path


def size_distribution(spec: str, ipc_fraction: float = 0.5) -> SizeDistribution:
    """``seed003``, a shipped CDF's name (``web-search``, ``hadoop``) or a CDF file's path."""
    path = size_file(spec)
    if path is None:
        return Seed003Mix(ipc_fraction)
    return read_cdf(path, spec)


# -- arrivals ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class FlowArrival:
    """A flow to start: when, at which source, how many bytes."""

    start_s: float
    source: int
    size_bytes: int
    destination: int = 0
    """Which of its source's destinations (qcn.core.scenario.SourceHost) it goes to."""


def draw_arrivals(
    sizes: SizeDistribution,
    *,
    sources: int,
    load: float,
    rate_bps: float,
    until_s: float,
    size_scale: float = 1.0,
    seed: int = 1,
) -> list[FlowArrival]:
    """Flows that together offer ``load`` of ``rate_bps`` in flow bytes (HPCC's traffic
    generator: headers not counted): each of ``sources`` starts flows as a Poisson process,
    the same for all, until ``until_s``; sizes drawn from ``sizes``, times ``size_scale``,
    and cut at :data:`FLOW_SIZE_MAX` (the flow header's field; a scenario whose sizes would
    be cut for more than :data:`MAX_CUT_FRACTION` of its flows is refused).  The same seed
    gives the same flows, whichever backend runs them."""
    rng = random.Random(f"flows-{seed}")
    per_source_hz = load * rate_bps / (8 * sizes.mean_bytes * size_scale) / sources
    out: list[FlowArrival] = []
    for source in range(sources):
        t = rng.expovariate(per_source_hz)
        while t < until_s:
            size = min(FLOW_SIZE_MAX, max(1, round(sizes.draw(rng.random) * size_scale)))
            out.append(FlowArrival(t, source, size))
            t += rng.expovariate(per_source_hz)
    out.sort(key=lambda a: (a.start_s, a.source))
    return out


def draw_destinations(
    arrivals: list[FlowArrival], choices: Sequence[int], seed: int
) -> list[FlowArrival]:
    """Each flow's destination, uniform over its source's ``choices[source]`` hosts, from a
    stream of its own: the arrivals (and a single destination's flows) stay as they were
    drawn."""
    if all(k == 1 for k in choices):
        return arrivals
    rng = random.Random(f"destinations-{seed}")
    return [
        a if choices[a.source] == 1 else replace(a, destination=rng.randrange(choices[a.source]))
        for a in arrivals
    ]


# -- frames -----------------------------------------------------------------------------------


def flow_frames(size_bytes: int, frame_bytes: int) -> tuple[int, int]:
    """How a flow of ``size_bytes`` goes on the wire in frames of at most ``frame_bytes``:
    (frames, the last frame's bytes).  Every other frame is ``frame_bytes`` long."""
    payload = frame_bytes - FLOW_HEADER_BYTES
    frames = max(1, -(-size_bytes // payload))
    last = size_bytes - (frames - 1) * payload
    return frames, max(MIN_FRAME_BYTES, FLOW_HEADER_BYTES + last)


def wire_bytes(size_bytes: int, frame_bytes: int) -> int:
    frames, last = flow_frames(size_bytes, frame_bytes)
    return (frames - 1) * frame_bytes + last


def ideal_fct_s(size_bytes: int, frame_bytes: int, rate_bps: float, one_way_s: float) -> float:
    """The flow's FCT alone in the empty network: its first bit's one-way delay, then all its
    frames at ``rate_bps`` (the slower of its host link and the bottleneck).  HPCC adds a
    base RTT instead because its flows finish at the sender's last ACK; here a flow finishes
    at the receiver (docs/fct.md)."""
    return one_way_s + 8 * wire_bytes(size_bytes, frame_bytes) / rate_bps


# -- records and analysis ---------------------------------------------------------------------


@dataclass
class FlowRecord:
    """One flow, finished or not."""

    flow_id: int
    source: int
    destination: int
    """Which of its source's destinations it went to (qcn.core.scenario.SourceHost):
    0 for a source with one."""
    size_bytes: int
    start_s: float
    ideal_fct_s: float
    finish_s: float = math.nan
    """When its last byte reached the receiver (NaN: it did not finish)."""
    retransmitted_frames: int = 0
    hops: int = 1
    """Switches on its path."""

    @property
    def finished(self) -> bool:
        return not math.isnan(self.finish_s)

    @property
    def fct_s(self) -> float:
        return self.finish_s - self.start_s

    @property
    def slowdown(self) -> float:
        return max(1.0, self.fct_s / self.ideal_fct_s) if self.finished else math.nan


FLOW_CSV_COLUMNS = (
    "flow",
    "source",
    "sender",
    "destination",
    "receiver",
    "size_bytes",
    "start_s",
    "fct_s",
    "ideal_fct_s",
    "slowdown",
    "retransmitted_frames",
    "finished",
)
HOPS_COLUMN = "hops"
"""flows.csv's last column in a network of several switches: each flow's path length."""


class Endpoints(Protocol):
    """A source's hosts, as flows.csv names them (qcn.core.scenario.SourceHost)."""

    @property
    def host(self) -> str: ...
    @property
    def destinations(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class FlowPath:
    """What a flow's ideal completion depends on: its path's slowest link (the source's
    own included), its one-way delay in the model's convention, its switches."""

    rate_bps: float
    one_way_s: float
    hops: int = 1


def records_from_logs(
    arrivals: Sequence[FlowArrival],
    sender_lines: Iterable[dict[str, Any]],
    receiver_lines: Iterable[dict[str, Any]],
    *,
    origin: float,
    frame_bytes: int,
    path: Callable[[int, FlowArrival], FlowPath],
) -> list[FlowRecord]:
    """Every flow of ``arrivals`` (flow id: its index) as a record, from what the senders
    and the receivers logged (qcn.reaction_point.flow_sender, qcn.topologies.flow_receiver), times
    taken from ``origin``, its ideal from its ``path``.  A flow with no start record never
    started (its sender was stopped first): it keeps its due time and is unfinished, like
    one with no finish."""
    started: dict[int, float] = {}
    retransmitted: dict[int, int] = {}
    for line in sender_lines:
        if "start" in line:
            started[line["flow"]] = line["start"] - origin
        if "retransmitted" in line:
            retransmitted[line["flow"]] = line["retransmitted"]
    finished = {line["flow"]: line["finish"] - origin for line in receiver_lines}
    out = []
    for i, a in enumerate(arrivals):
        way = path(i, a)
        out.append(
            FlowRecord(
                flow_id=i,
                source=a.source,
                destination=a.destination,
                size_bytes=a.size_bytes,
                start_s=started.get(i, a.start_s),
                ideal_fct_s=ideal_fct_s(a.size_bytes, frame_bytes, way.rate_bps, way.one_way_s),
                finish_s=finished.get(i, math.nan) if i in started else math.nan,
                retransmitted_frames=retransmitted.get(i, 0),
                hops=way.hops,
            )
        )
    return out


def write_flows_csv(
    path: Path, records: Sequence[FlowRecord], sources: Sequence[Endpoints], *, hops: bool = False
) -> None:
    """One row per flow, its sender and receiver named (``sources``: the run's, by a
    record's source); with ``hops`` (a network of several switches) also its path's
    length, as a last column (a single switch's flows all have one hop)."""
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow([*FLOW_CSV_COLUMNS, *([HOPS_COLUMN] if hops else [])])
        for r in records:
            done, src = r.finished, sources[r.source]
            w.writerow(
                [
                    r.flow_id,
                    r.source,
                    src.host,
                    r.destination,
                    src.destinations[r.destination],
                    r.size_bytes,
                    f"{r.start_s:.9f}",
                    f"{r.fct_s:.9f}" if done else "",
                    f"{r.ideal_fct_s:.9f}",
                    f"{r.slowdown:.4f}" if done else "",
                    r.retransmitted_frames,
                    int(done),
                    *([r.hops] if hops else []),
                ]
            )


def slowdown_figures(records: Sequence[FlowRecord]) -> dict[str, Any]:
    """Count, mean and p50/p95/p99 slowdown of finished ``records`` (NaN for none); the
    percentiles are HPCC's, as the project takes them everywhere (qcn.core.stats)."""
    slow = sorted(r.slowdown for r in records)  # (summed in ascending order)
    figures: dict[str, Any] = {"flows": len(slow), "mean": _mean(slow)}
    for p in PERCENTILES:
        value = percentile(slow, p)
        figures[f"p{round(100 * p)}"] = math.nan if value is None else value
    return figures


def slowdown_bins(records: Sequence[FlowRecord]) -> list[dict[str, Any]]:
    """The finished flows by size in bins of :data:`BIN_PERCENT` % of them: each bin's
    largest size and its slowdown figures (HPCC's table)."""
    done = sorted((r for r in records if r.finished), key=lambda r: (r.size_bytes, r.start_s))
    n, out = len(done), []
    for lo in range(0, 100, BIN_PERCENT):
        part = done[lo * n // 100 : (lo + BIN_PERCENT) * n // 100]
        if part:
            out.append({"size_max_bytes": part[-1].size_bytes, **slowdown_figures(part)})
    return out


def slowdown_by_hops(records: Sequence[FlowRecord]) -> dict[str, dict[str, Any]]:
    """The finished flows by their path's length (hops, as a string: a JSON key): each
    hop count's slowdown figures, short and long flows together, and its flows' sizes (a
    longer path's flows may be a different mix)."""
    done = [r for r in records if r.finished]
    out: dict[str, dict[str, Any]] = {}
    for hops in sorted({r.hops for r in done}):
        part = [r for r in done if r.hops == hops]
        out[str(hops)] = {
            **slowdown_figures(part),
            "size_mean_bytes": _mean([float(r.size_bytes) for r in part]),
        }
    return out


def summarize_flows(
    records: Sequence[FlowRecord], short_bytes: float, *, by_hops: bool = False
) -> dict[str, Any]:
    """summary.json's ``flows``: flows started, finished and not, slowdown of short
    (< ``short_bytes``) and long flows and of all, and the per-bin table; with
    ``by_hops`` (a network of several switches) also ``bins_by_hops``
    (:func:`slowdown_by_hops`)."""
    done = [r for r in records if r.finished]
    unfinished = [r for r in records if not r.finished]

    def slowdown(short: bool | None) -> dict[str, Any]:
        """The finished flows' figures of a size class (None: all), and how many of the
        class did not finish (so the figures say what they leave out)."""

        def of(rs: list[FlowRecord]) -> list[FlowRecord]:
            return [r for r in rs if short is None or (r.size_bytes < short_bytes) == short]

        return {**slowdown_figures(of(done)), "unfinished": len(of(unfinished))}

    return {
        "started": len(records),
        "finished": len(done),
        "unfinished": len(unfinished),
        "unfinished_bytes": sum(r.size_bytes for r in unfinished),
        "retransmitted_frames": sum(r.retransmitted_frames for r in records),
        "short_flow_bytes": short_bytes,
        "slowdown_all": slowdown(None),
        "slowdown_short": slowdown(True),
        "slowdown_long": slowdown(False),
        "fct_short_mean_s": _mean([r.fct_s for r in done if r.size_bytes < short_bytes]),
        "fct_long_mean_s": _mean([r.fct_s for r in done if r.size_bytes >= short_bytes]),
        "bins": slowdown_bins(done),
        **({"bins_by_hops": slowdown_by_hops(done)} if by_hops else {}),
    }


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else math.nan


def unfinished_note(flows: dict[str, Any]) -> str:
    """What a slowdown figure leaves out, in words (``flows``: summary.json's ``flows``):
    the slowdown is the finished flows'."""
    if not flows["unfinished"]:
        return f"all {flows['started']} flows finished"
    return (
        f"{flows['unfinished']} of {flows['started']} flows did not finish: the slowdown is "
        f"the {flows['finished']} finished flows'"
    )


def plot_slowdown(path: Path, title: str, curves: dict[str, dict[str, Any]]) -> Path:
    """slowdown.png (:func:`slowdown_figure`) at ``path``."""
    import matplotlib  # noqa: PLC0415 - only runs that write results need it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig = slowdown_figure(plt, title, curves)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def slowdown_figure(plt: Any, title: str, curves: dict[str, dict[str, Any]]) -> Any:
    """Slowdown against flow size (each bin's largest size, log x): p50 solid and p99
    dashed for each named run's flows (summary.json's ``flows``: one run, or runs to
    compare), the title's next line saying how many flows each left unfinished, which
    its curves leave out."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for i, (label, flows) in enumerate(curves.items()):
        bins = flows["bins"]
        sizes = [b["size_max_bytes"] for b in bins]
        color = f"C{i}"
        ax.plot(sizes, [b["p50"] for b in bins], "-o", ms=3, color=color, label=f"{label} p50")
        ax.plot(sizes, [b["p99"] for b in bins], "--", color=color, label=f"{label} p99")
    notes = [
        unfinished_note(flows) if len(curves) == 1 else f"{label}: {unfinished_note(flows)}"
        for label, flows in curves.items()
    ]
    ax.set(xlabel="flow size (bytes, each 5 % bin's largest)", ylabel="slowdown")
    ax.set_title("\n".join([title, *notes]), fontsize=10)
    if any(flows["bins"] for flows in curves.values()):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    else:
        # No flow finished (a run too short, or a load too low): the plot says so, as the
        # summary does; log axes with no data made matplotlib raise, and the run end PARTIAL.
        ax.text(0.5, 0.5, "no flow finished", ha="center", va="center", transform=ax.transAxes)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return fig
