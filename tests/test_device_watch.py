"""harness.device_watch without a GPU: fake events stand in for CUDA events. A device whose marks never complete
ends the wait within the bound, with the reference's one line and exit code 1; a device whose marks complete, an
idle one and a paused one (a graph capture) never do; the timing loops mark at most once every `every` steps."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time

from conftest import REPO_ROOT

from streamk_pgas.harness.device_watch import DeviceWatch, stall_line
from streamk_pgas.harness.timing import host_us_per_call, time_loop

TIMEOUT_S = 0.3  # short, where only a wait that never ends could fail the test
STOP_TIMEOUT_S = 1.0  # where the time to the end is measured: room for a busy machine within the 1.5x bound
LINE = re.compile(r"^(benchmark.py|python -m reference): rank [0-9]+: ")  # scripts/probe_stall.sh's


class FakeEvent:
    """Completes `done_after` seconds after its record (never, with None), on the host's clock."""

    def __init__(self, done_after: float | None) -> None:
        self.done_after = done_after
        self.recorded = 0.0

    def record(self) -> None:
        self.recorded = time.monotonic()

    def query(self) -> bool:
        return self.done_after is not None and time.monotonic() - self.recorded >= self.done_after


class Stalls:
    """An on_stall that keeps what it was called with, and when."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, float]] = []  # (seconds without progress, time.monotonic() of the call)
        self.fired = threading.Event()

    def __call__(self, quiet_s: float) -> None:
        self.calls.append((quiet_s, time.monotonic()))
        self.fired.set()


def watch(done_after: float | None, stalls: Stalls, timeout_s: float = TIMEOUT_S) -> DeviceWatch:
    return DeviceWatch(timeout_s, stalls, lambda: FakeEvent(done_after))


def test_a_device_that_stops_ends_the_wait_within_the_bound() -> None:
    stalls = Stalls()
    w = watch(None, stalls, STOP_TIMEOUT_S).start()
    try:
        marked = time.monotonic()
        w.mark()
        assert stalls.fired.wait(10 * STOP_TIMEOUT_S)
    finally:
        w.stop()
    (quiet, at), = stalls.calls
    assert STOP_TIMEOUT_S <= at - marked < 1.5 * STOP_TIMEOUT_S and quiet >= STOP_TIMEOUT_S


def test_a_device_that_progresses_idles_or_pauses_never_ends_the_wait() -> None:
    stalls = Stalls()
    w = watch(0.02, stalls).start()
    try:
        end = time.monotonic() + 4 * TIMEOUT_S
        while time.monotonic() < end:  # steps whose marks complete 20 ms after their record
            w.step()
            time.sleep(0.005)
        time.sleep(2 * TIMEOUT_S)  # idle: every mark done, nothing outstanding
        with w.paused():  # a capture: no polls, and its time does not count once it ends
            w.mark()
            time.sleep(2 * TIMEOUT_S)
        time.sleep(0.05)
    finally:
        w.stop()
    assert stalls.calls == []


def test_the_clock_runs_from_the_last_completion_or_the_oldest_outstanding_mark() -> None:
    """stalled_for on a fake clock: outstanding work counts from the later of the two, completed marks are reused."""
    now = [100.0]
    done: list[bool] = []

    class Ev:
        def __init__(self) -> None:
            self.i = -1

        def record(self) -> None:
            done.append(False)
            self.i = len(done) - 1

        def query(self) -> bool:
            return done[self.i]

    made: list[Ev] = []
    w = DeviceWatch(5.0, Stalls(), lambda: made.append(Ev()) or made[-1], clock=lambda: now[0])
    assert w.stalled_for(200.0) is None  # nothing outstanding: an idle device never stalls
    now[0] = 200.0
    w.mark()
    assert w.stalled_for(204.9) is None
    assert w.stalled_for(205.0) == 5.0
    done[0] = True
    assert w.stalled_for(206.0) is None  # it completed: progress at 206
    now[0] = 207.0
    w.mark()  # the completed event is recorded again
    assert len(made) == 1
    assert w.stalled_for(210.9) is None  # from 207 (its record), not from 206 (the last completion)
    assert w.stalled_for(212.5) == 5.5


def test_the_timing_loops_mark_once_every_few_steps() -> None:
    """time_loop and host_us_per_call mark every `every` steps (warm-up included); no mark when none is needed."""
    made: list[FakeEvent] = []
    w = DeviceWatch(60.0, Stalls(), lambda: made.append(FakeEvent(None)) or made[-1], every=8)
    common = {"barrier": lambda: None, "use_events": False, "watch": w}
    time_loop(lambda: None, iters=16, warmup=8, repeats=2, **common)  # 40 steps
    assert len(w._pending) == 5
    host_us_per_call(lambda: None, calls=7, **common)  # 47 steps: no new mark
    assert len(w._pending) == 5
    host_us_per_call(lambda: None, calls=1, **common)
    assert len(w._pending) == 6


def test_the_stall_ends_the_process_with_one_line() -> None:
    """exit_on_stall: one line on stderr in the entry's form, nothing on stdout but what was there, exit code 1."""
    code = (
        "import time\n"
        "from harness.device_watch import DeviceWatch, exit_on_stall\n"
        "class Never:\n"
        "    def record(self): pass\n"
        "    def query(self): return False\n"
        f"w = DeviceWatch({TIMEOUT_S}, exit_on_stall('python -m reference', 3), Never).start()\n"
        "print('before', flush=False)\n"
        "w.mark()\n"
        "time.sleep(30)\n"  # the main thread blocked, as in a synchronize
    )
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert time.monotonic() - t0 < 20
    assert done.returncode == 1, done
    assert done.stdout == "before\n"
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and LINE.match(lines[0]), done.stderr
    assert lines[0].startswith("python -m reference: rank 3: TimeoutError: no progress on the device for ")
    assert lines[0] == stall_line("python -m reference", 3, float(lines[0].split(" for ")[1].split(" s")[0]))
