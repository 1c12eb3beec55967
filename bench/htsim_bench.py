"""The simulator against a peer: htsim (the NDP/EQDS work's packet simulator), same run.

    python -m bench.htsim_bench --htsim DIR [--seconds S] [--sources N] [--network TOPOLOGY]

htsim is not part of this project and is not fetched by it: DIR is a checkout of
https://github.com/Broadcom/csg-htsim (``git clone`` it; ``HTSIM_DIR`` also names it).
Without one the bench says so in one line and exits 0 (``make bench`` goes on).  Given one,
it builds htsim's library (``make -C DIR/sim libhtsim.a``) and a small driver of ours into
``build/htsim-bench/`` (again only when either changed), then runs, one after the other:

- htsim: N QCN reactors at 10 Gb/s, each behind a 20 us pipe, into one ``QcnQueue`` of
  10 Gb/s and 100 frames of 1500 bytes, a 20 us pipe on to a sink; its QCN reactor needs a
  node name to be built (``nodename`` is pure virtual in htsim's ``PacketSink``), which
  the driver's subclass gives;
- this project's compiled core on the same dumbbell: seed 000's transient with its sources
  offering line rate at a constant pace, as htsim's reactors send, and no capacity change
  (``transient`` with ``workload.max_rate_bps = 10e9``, ``pattern = "constant"`` and an
  empty schedule; its Bernoulli sources draw a random number per frame offered, which at
  100 sources held to a hundredth of their offer is a hundred draws per frame sent).

- then a network on both (``--network``, default ``leaf-spine:4,8,16``: 128 hosts):
  ``long-lived``'s streams at line rate in a permutation of the hosts, htsim's side built
  from this project's topology (every switch egress port a stream crosses, a ``QcnQueue``
  and its link's ``Pipe``; each stream's path as this project routes it).

Each side's events (htsim: every ``EventList::doNextEvent`` that ran; the core: every event
it popped, departures included) and delivered frames per second of wall time, and their
ratios.  The dynamics differ (htsim's reactor is its own QCN: Fb from a queue sampled
every 100 frames, no timer), so events and frames are what is compared, not the runs'
figures.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from qcn.core import scenario
from qcn.core.topology import PortRef
from qcn.core.trace import Trace
from qcn.simulator import compiled

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "htsim-bench"

DRIVER = r"""
// This project's driver of htsim's QCN (bench/htsim_bench.py): N reactors into one queue.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include "config.h"
#include "eventlist.h"
#include "loggers.h"
#include "network.h"
#include "pipe.h"
#include "qcn.h"

class QuietQcnLogger : public QcnLogger {
 public:
  void logQcn(QcnReactor&, QcnEvent, double) override {}
  void logQcnQueue(QcnQueue&, QcnQueueEvent, double, double, double) override {}
};

class NamedReactor : public QcnReactor {  // htsim's is abstract: a sink needs a name
 public:
  NamedReactor(QcnLogger* l, EventList& ev) : QcnReactor(l, nullptr, ev), _name("reactor") {}
  const string& nodename() override { return _name; }
 private:
  string _name;
};

class CountingSink : public PacketSink {
 public:
  uint64_t received = 0;
  void receivePacket(Packet& pkt) override {
    received++;
    static_cast<QcnPacket&>(pkt).free();
  }
  const string& nodename() override { return _name; }
 private:
  string _name = "sink";
};

// The dumbbell: N reactors, each behind a 20 us pipe, into one queue.
static void dumbbell(EventList& eventlist, QcnLogger& logger, PacketSink& sink, int sources) {
  linkspeed_bps rate = speedFromGbps(10);
  auto* queue = new QcnQueue(rate, memFromPkt(100), eventlist, nullptr, &logger);
  auto* out = new Pipe(timeFromUs(20.0), eventlist);
  for (int i = 0; i < sources; i++) {
    auto* reactor = new NamedReactor(&logger, eventlist);
    auto* route = new route_t();
    route->push_back(new Pipe(timeFromUs(20.0), eventlist));
    route->push_back(queue);
    route->push_back(out);
    route->push_back(&sink);
    auto* back = new route_t();
    back->push_back(new Pipe(timeFromUs(20.0), eventlist));
    reactor->connect(*route, *new routes_t(route->size(), back), timeFromUs(1.0 * i), rate);
  }
}

// A network read from stdin, as the bench wrote it from this project's topology: its
// switch egress ports ("rate_bps buffer_pkts delay_s" each: a QcnQueue and the link's pipe
// after it), then its flows ("line_rate_bps access_delay_s back_delay_s k port..."): a
// reactor on a host link, through the k ports of its path to one sink.
static void network(EventList& eventlist, QcnLogger& logger, PacketSink& sink) {
  int ports = 0, flows = 0;
  if (scanf("%d", &ports) != 1) exit(2);
  std::vector<std::pair<QcnQueue*, Pipe*>> hops;
  for (int i = 0; i < ports; i++) {
    double rate = 0, delay = 0;
    int buffer = 0;
    if (scanf("%lf %d %lf", &rate, &buffer, &delay) != 3) exit(2);
    hops.emplace_back(
        new QcnQueue((linkspeed_bps)rate, memFromPkt(buffer), eventlist, nullptr, &logger),
        new Pipe(timeFromSec(delay), eventlist));
  }
  if (scanf("%d", &flows) != 1) exit(2);
  for (int f = 0; f < flows; f++) {
    double rate = 0, access = 0, back_delay = 0;
    int k = 0;
    if (scanf("%lf %lf %lf %d", &rate, &access, &back_delay, &k) != 4) exit(2);
    auto* route = new route_t();
    route->push_back(new Pipe(timeFromSec(access), eventlist));
    for (int j = 0; j < k; j++) {
      int port = 0;
      if (scanf("%d", &port) != 1) exit(2);
      route->push_back(hops[port].first);
      route->push_back(hops[port].second);
    }
    route->push_back(&sink);
    auto* back = new route_t();
    back->push_back(new Pipe(timeFromSec(back_delay), eventlist));
    auto* reactor = new NamedReactor(&logger, eventlist);
    reactor->connect(*route, *new routes_t(route->size(), back), timeFromUs(0.1 * f),
                     (linkspeed_bps)rate);
  }
}

int main(int argc, char** argv) {
  double seconds = atof(argv[1]);
  EventList eventlist;
  eventlist.setEndtime(timeFromSec(seconds));
  QuietQcnLogger logger;
  CountingSink sink;
  if (argc > 2 && std::string(argv[2]) == "network") {
    network(eventlist, logger, sink);
  } else {
    dumbbell(eventlist, logger, sink, atoi(argv[2]));
  }
  uint64_t events = 0;
  auto started = std::chrono::steady_clock::now();
  while (eventlist.doNextEvent()) events++;
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  printf("{\"events\": %llu, \"delivered\": %llu, \"wall_s\": %.6f}\n",
         (unsigned long long)events, (unsigned long long)sink.received, wall);
  return 0;
}
"""


def htsim_dir(given: str | None) -> Path | None:
    path = given or os.environ.get("HTSIM_DIR")
    if not path:
        return None
    sim = Path(path) / "sim"
    return sim if (sim / "qcn.h").is_file() else None


def build(sim: Path) -> Path:
    """htsim's library (its own Makefile) and our driver, built when either changed."""
    BUILD.mkdir(parents=True, exist_ok=True)
    print(f"htsim_bench: building {sim}/libhtsim.a (make; minutes the first time)", flush=True)
    subprocess.run(["make", "-C", str(sim), "-j2", "libhtsim.a"], check=True,
                   capture_output=True, text=True)  # fmt: skip
    source = BUILD / "driver.cpp"
    source.write_text(DRIVER)
    key = hashlib.sha256(DRIVER.encode() + (sim / "libhtsim.a").read_bytes()).hexdigest()[:16]
    binary = BUILD / f"driver-{key}"
    if not binary.exists():
        subprocess.run(
            ["g++", "-O3", "-std=c++11", f"-I{sim}", str(source), str(sim / "libhtsim.a"),
             "-o", str(binary)],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
    return binary


def network_spec(sc: scenario.Scenario) -> str:
    """``sc``'s network as the driver reads it: every switch egress port a stream crosses
    (rate, buffer, the link's delay), then each source's stream: its host link's rate and
    delay, the delay back to it, and its path's ports, as this project routes it."""
    topo = sc.topology
    index: dict[PortRef, int] = {}
    flows = []
    for i, host in enumerate(sc.sources):
        refs = sc.stream_refs(i)
        for ref in refs:
            index.setdefault(ref, len(index))
        access = topo.access_link(host.host)
        one_way = access.delay_s + sum(topo.link_at(r).delay_s for r in refs)
        flows.append(
            f"{access.rate_bps:.0f} {access.delay_s!r} {one_way!r} {len(refs)} "
            + " ".join(str(index[r]) for r in refs)
        )
    ports = [
        f"{topo.link_at(r).rate_bps:.0f} {topo.link_at(r).buffer_pkts} {topo.link_at(r).delay_s!r}"
        for r in index  # (in index order: insertion order)
    ]
    return "\n".join([str(len(ports)), *ports, str(len(flows)), *flows]) + "\n"


def delivered_frames(sc: scenario.Scenario, trace: Trace) -> float:
    """Frames the sources delivered (each 1 ms sample's bits/s, summed)."""
    return sum(sum(row) for row in trace.source_delivered_bps) * 1e-3 / (8 * sc.network.frame_bytes)


def compare(name: str, peer: dict[str, float], sc: scenario.Scenario, load: float) -> None:
    """Run this core on ``sc`` and print both sides' rates and their ratios."""
    trace = compiled.CompiledSimulation(sc, seed=1).run()
    ours = {
        "events": trace.events,
        "delivered": delivered_frames(sc, trace),
        "wall_s": trace.wall_s,
    }
    for side, run in (("htsim", peer), ("this core", ours)):
        print(
            f"htsim_bench: {name}: {side}: {run['events']:,.0f} events, {run['delivered']:,.0f} "
            f"frames delivered in {run['wall_s']:.2f} s: "
            f"{run['events'] / run['wall_s'] / 1e6:.1f} M events/s, "
            f"{run['delivered'] / run['wall_s'] / 1e6:.2f} M frames/s"
        )
    print(
        f"htsim_bench: {name}: this core over htsim: events/s "
        f"{(ours['events'] / ours['wall_s']) / (peer['events'] / peer['wall_s']):.2f}x, "
        "delivered frames/s "
        f"{(ours['delivered'] / ours['wall_s']) / (peer['delivered'] / peer['wall_s']):.2f}x "
        f"({sc.duration_s:g} s simulated; load average {load:.2f})",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--htsim", help="a checkout of csg-htsim (or HTSIM_DIR)")
    parser.add_argument("--seconds", type=float, default=1.0, help="simulated seconds")
    parser.add_argument("--sources", type=int, default=10)
    parser.add_argument(
        "--network", default="leaf-spine:4,8,16", help="the network run's topology ('' skips it)"
    )
    parser.add_argument(
        "--network-seconds", type=float, default=0.02, help="the network run's simulated seconds"
    )
    args = parser.parse_args(argv)
    sim = htsim_dir(args.htsim)
    if sim is None:
        print(
            "htsim_bench: skipped: no htsim here (--htsim DIR or HTSIM_DIR: a checkout of "
            "https://github.com/Broadcom/csg-htsim, which this project does not contain)"
        )
        return 0
    if compiled.CORE_MISSING is not None:
        print(compiled.core_status())
        return 1
    try:
        driver = build(sim)
    except subprocess.CalledProcessError as e:
        print(f"htsim_bench: htsim did not build: {(e.stderr or '').strip()[-500:]}")
        return 1
    out = subprocess.run(
        [str(driver), str(args.seconds), str(args.sources)], check=True, capture_output=True,
        text=True,
    ).stdout  # fmt: skip
    sc = scenario.load("transient").with_overrides(
        {"duration_s": args.seconds, "network.sources": args.sources,
         "workload.max_rate_bps": 10e9, "workload.pattern": "constant", "schedule": []}
    )  # fmt: skip
    compare(f"dumbbell of {args.sources}", json.loads(out.splitlines()[-1]), sc, os.getloadavg()[0])
    if args.network:
        # Long-lived streams at line rate, a permutation of the hosts (each sends to one,
        # each receives from one), on the paths this project's routes give.
        sc = scenario.load("long-lived").with_overrides(
            {"duration_s": args.network_seconds, "network.topology": args.network,
             "workload.traffic": "permutation"}
        )  # fmt: skip
        out = subprocess.run(
            [str(driver), str(args.network_seconds), "network"], input=network_spec(sc),
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
        hosts = len(sc.topology.hosts)
        name = f"{args.network} ({hosts} hosts, {len(sc.sources)} streams)"
        compare(name, json.loads(out.splitlines()[-1]), sc, os.getloadavg()[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
