"""make reproduce's report says each figure the same way in its progress lines and in its
tables (a bursty run's utilization printed "= 1" above a table that gave 0.92)."""

from __future__ import annotations

from qcn.simulator.reproduce import BURSTY_ROWS, bursty_table, progress_line


def test_a_bursty_rows_utilization_reads_the_same_in_its_line_and_its_table() -> None:
    results = {
        row.label: {"utilization": 0.9213, "queue_mean_pkts": 3.0, "queue_std_pkts": 1.0,
                    "drops": 0.0}
        for row in BURSTY_ROWS
    }  # fmt: skip
    row = BURSTY_ROWS[0]
    line = progress_line(row, 0.9213, [0.9188, 0.9238])
    assert line == f"  {row.label}: utilization = 0.92 (seeds: 0.92, 0.92)"
    assert "| 20 ms | QCN | 0.92 |" in bursty_table(results)
