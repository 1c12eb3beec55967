"""The simulator against a peer: htsim (the NDP/EQDS work's packet simulator), same run.

    python -m bench.htsim_bench --htsim DIR [--seconds S] [--sources N]

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
from qcn.simulator import compiled

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "htsim-bench"

DRIVER = r"""
// This project's driver of htsim's QCN (bench/htsim_bench.py): N reactors into one queue.
#include <chrono>
#include <cstdio>
#include <cstdlib>
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

int main(int argc, char** argv) {
  double seconds = atof(argv[1]);
  int sources = atoi(argv[2]);
  EventList eventlist;
  eventlist.setEndtime(timeFromSec(seconds));
  QuietQcnLogger logger;
  linkspeed_bps rate = speedFromGbps(10);
  QcnQueue queue(rate, memFromPkt(100), eventlist, nullptr, &logger);
  Pipe out(timeFromUs(20.0), eventlist);
  CountingSink sink;
  std::vector<NamedReactor*> reactors;
  for (int i = 0; i < sources; i++) {
    auto* reactor = new NamedReactor(&logger, eventlist);
    auto* in = new Pipe(timeFromUs(20.0), eventlist);
    auto* route = new route_t();
    route->push_back(in);
    route->push_back(&queue);
    route->push_back(&out);
    route->push_back(&sink);
    auto* back = new route_t();
    back->push_back(new Pipe(timeFromUs(20.0), eventlist));
    auto* backs = new routes_t(route->size(), back);
    reactor->connect(*route, *backs, timeFromUs(1.0 * i), rate);
    reactors.push_back(reactor);
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--htsim", help="a checkout of csg-htsim (or HTSIM_DIR)")
    parser.add_argument("--seconds", type=float, default=1.0, help="simulated seconds")
    parser.add_argument("--sources", type=int, default=10)
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
    peer = json.loads(out.splitlines()[-1])
    sc = scenario.load("transient").with_overrides(
        {"duration_s": args.seconds, "network.sources": args.sources,
         "workload.max_rate_bps": 10e9, "workload.pattern": "constant", "schedule": []}
    )  # fmt: skip
    trace = compiled.CompiledSimulation(sc, seed=1).run()
    delivered = (
        sum(sum(row) for row in trace.source_delivered_bps) * 1e-3 / (8 * sc.network.frame_bytes)
    )  # (bits/s each 1 ms sample)
    ours = {"events": trace.events, "delivered": delivered, "wall_s": trace.wall_s}
    load = os.getloadavg()[0]
    for name, run in (("htsim", peer), ("this core", ours)):
        print(
            f"htsim_bench: {name}: {run['events']:,.0f} events, {run['delivered']:,.0f} frames "
            f"delivered in {run['wall_s']:.2f} s: {run['events'] / run['wall_s'] / 1e6:.1f} M "
            f"events/s, {run['delivered'] / run['wall_s'] / 1e6:.2f} M frames/s"
        )
    print(
        "htsim_bench: this core over htsim: events/s "
        f"{(ours['events'] / ours['wall_s']) / (peer['events'] / peer['wall_s']):.2f}x, "
        "delivered frames/s "
        f"{(ours['delivered'] / ours['wall_s']) / (peer['delivered'] / peer['wall_s']):.2f}x "
        f"({args.sources} sources, {args.seconds:g} s simulated; load average {load:.2f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
