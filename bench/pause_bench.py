"""PAUSE benchmark: how soon a PAUSE stops an interface's transmission.

    python -m bench.pause_bench [--pauses N]

Two namespaces joined by a veth; the PAUSE agent (qcn.reaction_point.pause) honours PAUSE on
one end, the other sends it N PAUSEs, each followed 2 ms later by a PAUSE of 0.  Reported,
p50/p99 over the N holds:

- PAUSE to held: the kernel's receive time of the PAUSE -> the agent's gate holding (the
  netlink change acknowledged);
- the baseline, measured on the same frames in the same run: the kernel's receive time ->
  the agent reading the frame (what any user-space MAC would pay before acting);
- their ratio: what the hold itself costs on top of hearing the PAUSE.
"""

from __future__ import annotations

import argparse
import json
import os
import threading

from qcn.core.frames import pause_frame
from qcn.core.params import PAUSE_QUANTA_MAX
from qcn.reaction_point.pause import PauseAgent
from qcn.topologies.netns import VethEnd, add_veth, namespaces, send_frames

HOST, PEER = f"pzbench1-{os.getpid()}", f"pzbench2-{os.getpid()}"
IF_HOST, IF_PEER = "pzb-h", "pzb-p"
LINE_RATE_BPS = 10e6
"""The scaled links of the project's BMv2 runs."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pauses", type=int, default=300)
    args = parser.parse_args()
    if args.pauses < 1:
        parser.error("--pauses must be at least 1")
    with namespaces(HOST, PEER):
        add_veth(VethEnd(HOST, IF_HOST), VethEnd(PEER, IF_PEER))
        agent = PauseAgent([IF_HOST], LINE_RATE_BPS, netns=HOST)
        stop = threading.Event()
        loop = threading.Thread(target=agent.run, args=(stop.is_set,))
        loop.start()
        try:
            frames = [pause_frame("02:00:00:00:00:02", q) for _ in range(args.pauses) for q in (
                PAUSE_QUANTA_MAX, 0)]  # fmt: skip
            print(f"pause: {args.pauses} PAUSEs (and as many of 0) into the agent ...")
            send_frames(PEER, IF_PEER, frames, gap_s=0.002)
        finally:
            stop.set()
            loop.join()
            summary = agent.summary()[IF_HOST]
            agent.close()
    print(
        f"pause: PAUSE to held p50 {summary['stop_p50_ms']:.3f} ms, "
        f"p99 {summary['stop_p99_ms']:.3f} ms ({summary['pauses']:.0f} pauses)"
    )
    print(
        f"pause: baseline, PAUSE to read p50 {summary['wake_p50_ms']:.3f} ms, "
        f"p99 {summary['wake_p99_ms']:.3f} ms"
    )
    ratio = summary["stop_p50_ms"] / max(summary["wake_p50_ms"], 1e-9)
    print(f"pause: held / read = {ratio:.1f} (p50)")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
