"""The reaction-point daemon's limiter CSVs (qcn.reaction_point.limiter_csv): a fixed budget of
open files whatever the number of limiters, and write failures counted, never raised."""

from __future__ import annotations

import os
from pathlib import Path

from qcn.reaction_point.limiter_csv import CSV_COLUMNS, LimiterCsvs


def rows_of(path: Path) -> list[list[str]]:
    return [line.split(",") for line in path.read_text().splitlines()]


def test_open_files_stay_within_the_budget_and_rows_stay_in_order(tmp_path: Path) -> None:
    """Many limiters, few files open: a limiter whose file was closed appends to it, and
    its header is written once."""
    csvs = LimiterCsvs(tmp_path, "h1-eth0", max_open=4)
    names = [f"10.0.0.1:{4000 + i}-10.0.0.2:5001/17" for i in range(50)]
    for step in range(3):
        for name in names:
            csvs.write(name, [step, name])
            assert csvs.open_files <= 4
    csvs.close()
    assert csvs.open_files == 0
    assert csvs.errors == 0
    files = sorted(tmp_path.glob("rp-h1-eth0-*.csv"))
    assert len(files) == 50
    for f in files:
        rows = rows_of(f)
        assert rows[0] == list(CSV_COLUMNS)
        assert [r[0] for r in rows[1:]] == ["0", "1", "2"]


def test_a_full_disk_is_counted_once_told_and_never_raised(tmp_path: Path) -> None:
    """/dev/full fails every write with ENOSPC (at the flush, when the file closes): the
    failure is counted, said once, and the next files still work."""
    told: list[str] = []
    csvs = LimiterCsvs(tmp_path, "h1-eth0", max_open=1, on_first_error=told.append)
    full = csvs.path("a")
    full.symlink_to("/dev/full")
    csvs.write("a", [1])
    csvs.write("b", [2])  # closes a: its flush fails
    csvs.write("a", [3])
    csvs.close()
    assert csvs.errors == 2
    assert len(told) == 1
    assert "No space left on device" in told[0]
    assert "csv_write_errors" in told[0]
    assert rows_of(csvs.path("b")) == [list(CSV_COLUMNS), ["2"]]


def test_a_directory_taken_away_is_counted(tmp_path: Path) -> None:
    d = tmp_path / "csv"
    d.mkdir()
    csvs = LimiterCsvs(d, "h1-eth0")
    csvs.write("a", [1])
    csvs.close()
    os.unlink(csvs.path("a"))
    d.rmdir()
    csvs.write("a", [2])
    csvs.close()
    assert csvs.errors == 1
