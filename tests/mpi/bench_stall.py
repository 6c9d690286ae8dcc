"""benchmark.py's main (or `python -m reference`'s) on every rank, with rank 1 stopping itself (SIGSTOP) in one phase
of the run, after writing the time into STALL_FILE: every rank must still end, with one line, within about
--timeout_s of the stop (tests/test_stall.py on the CPU, scripts/probe_stall.sh on GPUs).

    STALL_PHASE=isolated STALL_FILE=/tmp/stalled mpirun -np 2 python tests/mpi/bench_stall.py [benchmark.py flags]
    STALL_PHASE=reference STALL_FILE=... mpirun -np 2 python tests/mpi/bench_stall.py [python -m reference flags]

STALL_PHASE (where rank STALL_RANK, default 1, stops):
    startup        as it is about to make its symmetric heap (the others wait in the heap's exchange)
    barrier        as it is about to enter the host barrier before a timed step (the others wait in that barrier)
    validation     as it is about to launch the isolated validation step (needs --validate)
    isolated       as it is about to launch the second timed isolated step (needs --benchmark)
    back_to_back   as it is about to launch the third step of the first timed back-to-back loop (--benchmark)
    graph          as it is about to launch the third replay of the timed graph loop (--benchmark --graph, GPU)
    reference      as it is about to launch the second timed step of the reference (python -m reference)
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from streamk_pgas.iris_ops.bootstrap import launcher_rank

PHASES = ("startup", "barrier", "validation", "isolated", "back_to_back", "graph", "reference")
PHASE = os.environ["STALL_PHASE"]
STALL_RANK = int(os.environ.get("STALL_RANK", "1"))
if PHASE not in PHASES:
    sys.exit(f"bench_stall.py: error: STALL_PHASE must be one of {', '.join(PHASES)}, got {PHASE!r}")


def stall() -> None:
    """Stop this process (on the stalling rank), after writing the time into STALL_FILE."""
    if launcher_rank() == STALL_RANK:
        Path(os.environ["STALL_FILE"]).write_text(f"{time.time()}\n")
        os.kill(os.getpid(), signal.SIGSTOP)


def on_call(fn: Callable[..., Any], at: int) -> Callable[..., Any]:
    """`fn`, stalling before its call number `at` (1-based)."""
    calls = 0

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == at:
            stall()
        return fn(*args, **kwargs)

    return wrapped


def stepping(timer_fn: Callable[..., Any], at: int) -> Callable[..., Any]:
    """A harness.timing loop (time_iterations, time_loop) whose step stalls before its call number `at`."""

    def loop(step: Callable[..., Any], **kwargs: Any) -> Any:
        return timer_fn(on_call(step, at), **kwargs)

    return loop


def stall_reference() -> int:
    from streamk_pgas.reference import runner
    from streamk_pgas.reference.cli import entry

    runner.time_iterations = stepping(runner.time_iterations, 3)  # after one warm-up step (the tests' --warmup 1)
    return entry()


def stall_bench() -> int:
    import streamk_pgas.bench as bench
    from streamk_pgas import iris_ops
    from streamk_pgas.harness import timing
    from streamk_pgas.harness.fixture import OverlapFixture

    if PHASE == "startup":
        iris_ops.iris = on_call(iris_ops.iris, 1)
    elif PHASE == "barrier":
        OverlapFixture.barrier = on_call(OverlapFixture.barrier, 2)  # type: ignore[method-assign]
    elif PHASE == "validation":
        OverlapFixture.step = on_call(OverlapFixture.step, 1)  # type: ignore[method-assign]
    elif PHASE == "isolated":
        bench.time_iterations = stepping(bench.time_iterations, 3)  # after one warm-up step (the tests' --warmup 1)
    elif PHASE == "back_to_back":
        loops, first = bench.time_loop, [True]

        def time_loop(step: Callable[..., Any], **kwargs: Any) -> Any:
            at, first[0] = (3 if first[0] else 0), False  # the first loop only: the eager one
            return loops(on_call(step, at), **kwargs)

        bench.time_loop = time_loop
    elif PHASE == "graph":
        class StallingReplay(timing.CapturedStep):
            replays = 0

            def __call__(self) -> None:
                StallingReplay.replays += 1
                if StallingReplay.replays == 3:
                    stall()
                super().__call__()

        timing.CapturedStep = StallingReplay  # type: ignore[misc]
    return bench.entry(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(stall_reference() if PHASE == "reference" else stall_bench())
