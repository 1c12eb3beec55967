"""The frame balance's arithmetic (topologies/frame_balance.py) on counters made up here;
tests/test_mininet_bmv2.py closes it on real runs."""

from __future__ import annotations

import itertools

from qcn.topologies.frame_balance import FrameBalance, SenderPath, balance, holding, settle

# Two senders into switch a, a link a:3 -> b:1, one sink behind b:2.
PATH = SenderPath(
    entries=(("a-eth1", "a", 1), ("a-eth2", "a", 2)),
    exits=(("b-eth2", "b", 2),),
    links=((("a-eth3", "a", 3), ("b-eth1", "b", 1)),),
    inputs=(("a", 1), ("a", 2), ("b", 1)),
    outputs=(("a", 3), ("b", 2)),
)


def counters(changes: dict[str, int] | None = None) -> dict[str, int]:
    """An end snapshot where 100 frames from each sender all arrive, but for ``changes``."""
    end = {
        "a-eth1:rx_packets": 100,
        "a-eth2:rx_packets": 100,
        "a:1:frames_in": 100,
        "a:2:frames_in": 100,
        "a:3:frames_out": 200,
        "a-eth3:tx_packets": 200,
        "b-eth1:rx_packets": 200,
        "b:1:frames_in": 200,
        "b:2:frames_out": 200,
        "b-eth2:tx_packets": 200,
    }
    end.update(changes or {})
    return end


def test_every_frame_delivered_closes() -> None:
    b = balance(PATH, {}, counters())
    assert (b.sent, b.delivered, b.unplaced, b.closed) == (200, 200, 0, True)
    assert not any(b.dropped.values())


def test_only_the_change_since_the_start_counts() -> None:
    start = {k: 1000 for k in counters()}
    end = {k: v + 1000 for k, v in counters().items()}
    assert balance(PATH, start, end).closed


def test_each_loss_is_placed_where_it_happened() -> None:
    end = counters(
        {
            "a:1:frames_in": 95,  # 5 never read by switch a (its receive ring)
            "a:1:pause_drops": 3,  # 3 over the partition
            "a:2:mac_control_drops": 2,  # 2 MAC Control frames (the agents' wake-ups)
            "a:3:frames_out": 190,
            "a-eth3:tx_packets": 189,  # 1 written by a that the kernel never sent
            "b-eth1:rx_packets": 187,  # 2 lost on the link
            "b:1:frames_in": 187,
            "b:2:tail_drops": 7,  # 7 tail drops at the sink's port
            "b:2:frames_out": 180,
            "b-eth2:tx_packets": 180,
        }
    )
    b = balance(PATH, {}, end)
    assert b.dropped == {
        "partition": 3,
        "mac_control": 2,
        "cnm_from_host": 0,
        "tail": 7,
        "switch_receive": 5,
        "switch_transmit": 1,
        "kernel": 2,
    }
    assert (b.sent, b.delivered, b.unplaced) == (200, 180, 0)
    assert b.closed
    assert "frame balance closed" in b.describe()


def test_a_switch_s_own_pauses_are_not_the_senders() -> None:
    """a's PAUSEs to b cross the link (counted out of a and into b, then consumed: b's
    pause_received); b's PAUSEs to the sink leave by the exit.  Neither is a sender's."""
    end = counters(
        {
            "a:3:frames_out": 204,
            "a-eth3:tx_packets": 204,
            "b-eth1:rx_packets": 204,
            "b:1:frames_in": 204,
            "b:1:pause_received": 4,
            "b:2:frames_out": 203,
            "b-eth2:tx_packets": 203,
            "b:2:pause_sent": 3,
        }
    )
    b = balance(PATH, {}, end)
    assert (b.delivered, b.unplaced) == (200, 0)


def test_a_frame_nobody_counted_is_unplaced_and_said_so() -> None:
    b = balance(PATH, {}, counters({"b:2:frames_out": 199, "b-eth2:tx_packets": 199}))
    assert (b.unplaced, b.closed) == (1, False)
    assert "1 frames not placed" in b.describe()


def test_bytes_a_switch_still_holds_keep_it_open() -> None:
    end = counters({"b:1:input_bytes": 1500, "b:2:frames_out": 199, "b-eth2:tx_packets": 199})
    b = balance(PATH, {}, end)
    assert b.held_bytes == {"b:1": 1500}
    assert not b.closed
    assert "switches still hold b:1 1500 B" in b.describe()
    assert holding(end)
    assert not holding(counters())


def test_the_report_keeps_every_counter_s_change() -> None:
    b = balance(PATH, {"a-eth1:rx_packets": 10}, counters())
    report = b.as_dict()
    assert report["counters"]["a-eth1:rx_packets"] == 90
    assert set(report) >= {"sent", "delivered", "dropped", "unplaced", "closed", "settled"}


def test_settle_waits_for_two_equal_reads_with_nothing_held() -> None:
    reads = iter([{"x": 1}, {"x": 2}, {"x": 2, "s:1:input_bytes": 10}, {"x": 2}, {"x": 2}])
    waited: list[float] = []
    snapshot, settled = settle(
        lambda: next(reads), holding, quiet_s=0.5, timeout_s=10, wait=waited.append
    )
    assert (snapshot, settled) == ({"x": 2}, True)
    assert waited == [0.5] * 4


def test_settle_gives_up_after_its_timeout() -> None:
    counter = itertools.count()
    waited: list[float] = []
    snapshot, settled = settle(
        lambda: {"x": next(counter)}, holding, quiet_s=0.5, timeout_s=2, wait=waited.append
    )
    assert not settled
    assert snapshot == {"x": 4}
    assert sum(waited) == 2


def test_a_balance_not_settled_says_so() -> None:
    b = FrameBalance(sent=2, delivered=1, dropped={}, held_bytes={}, settled=False)
    assert "the network never drained" in b.describe()
