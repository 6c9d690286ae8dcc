"""Progress lines of long runs: on stderr, throttled, off when disabled (--quiet or a rank other than 0)."""

from __future__ import annotations

import pytest

from harness.progress import Progress
from harness.timing import time_iterations, time_loop


def test_lines_name_the_phase_and_count(capsys: pytest.CaptureFixture[str]) -> None:
    p = Progress("all_reduce/fused isolated steps", 4, every_s=0.0)
    for i in range(4):
        p.tick(i + 1)
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("all_reduce/fused isolated steps: 1/4 (25%), ")
    assert err[-1].startswith("all_reduce/fused isolated steps: 4/4 (100%), ")
    assert capsys.readouterr().out == ""


def test_throttled_and_disabled(capsys: pytest.CaptureFixture[str]) -> None:
    slow = Progress("x", 100, every_s=3600.0)
    off = Progress("y", 100, enabled=False, every_s=0.0)
    for i in range(100):
        slow.tick(i + 1)
        off.tick(i + 1)
    assert capsys.readouterr().err == ""


def test_timing_loops_report_between_iterations(capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[int] = []
    common = {"iters": 3, "warmup": 1, "barrier": lambda: None, "use_events": False}
    time_iterations(lambda _t: calls.append(1), progress=Progress("iso", 4, every_s=0.0), **common)
    time_loop(lambda: calls.append(1), progress=Progress("loop", 2, every_s=0.0), repeats=2, **common)
    err = capsys.readouterr().err
    assert "iso: 4/4 (100%)" in err and "loop: 2/2 (100%)" in err
    assert len(calls) == 4 + 1 + 2 * 3
