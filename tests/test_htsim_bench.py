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
