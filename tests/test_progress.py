"""Progress lines of long runs: on stderr, throttled, off when disabled (--quiet or a rank other than 0)."""

from __future__ import annotations

import pytest

from streamk_pgas.harness.progress import LastLine, Progress
from streamk_pgas.harness.timing import host_us_per_call, time_iterations, time_loop


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


def test_every_timing_phase_reports_within_its_loop(capsys: pytest.CaptureFixture[str]) -> None:
    """Isolated iterations, back-to-back loops (step by step, warm-up included) and host-cost calls each count
    what they have done, so a long phase on the CPU prints a line every ~10 s, not one per loop."""
    calls: list[int] = []
    common = {"iters": 3, "warmup": 1, "barrier": lambda: None, "use_events": False}
    time_iterations(lambda _t: calls.append(1), progress=Progress("iso", 4, every_s=0.0), **common)
    time_loop(lambda: calls.append(1), progress=Progress("loop", 7, every_s=0.0), repeats=2, **common)
    host_us_per_call(lambda: calls.append(1), calls=3, barrier=lambda: None, use_events=False,
                     progress=Progress("host", 3, every_s=0.0))
    err = capsys.readouterr().err.splitlines()
    assert [line.split(",")[0] for line in err] == [*(f"iso: {i}/4 ({25 * i}%)" for i in range(1, 5)),
                                                    *(f"loop: {i}/7 ({100 * i // 7}%)" for i in range(1, 8)),
                                                    *(f"host: {i}/3 ({100 * i // 3}%)" for i in range(1, 4))]
    assert len(calls) == 4 + 1 + 2 * 3 + 3


def test_phases_sharing_a_last_line_count_from_the_last_line_of_any(capsys: pytest.CaptureFixture[str],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Short phases in a row: the next phase reports as soon as ~every_s has passed since the previous phase's last
    line, not every_s after its own start (so no gap of twice every_s between two phases)."""
    now = [100.0]
    monkeypatch.setattr("streamk_pgas.harness.progress.time.monotonic", lambda: now[0])
    shared = LastLine()
    first = Progress("first", 10, every_s=10.0, last_line=shared)
    now[0] += 8.0
    first.tick(10)  # 8 s: too soon
    second = Progress("second", 10, every_s=10.0, last_line=shared)
    now[0] += 3.0
    second.tick(1)  # 11 s since the last line (the start), though the second phase began 3 s ago
    now[0] += 5.0
    second.tick(2)  # 5 s since that line: too soon
    alone = Progress("alone", 10, every_s=10.0)
    now[0] += 3.0
    alone.tick(1)  # a phase of its own counts from its start
    assert capsys.readouterr().err.splitlines() == ["second: 1/10 (10%), 3 s"]
