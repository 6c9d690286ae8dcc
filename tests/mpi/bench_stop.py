"""benchmark.py's main on every rank, with rank 1 stopping itself (SIGSTOP) as it is about to launch step STOP_AT
of a back-to-back loop, after writing the time into STOP_FILE: the job must still end, on every rank, within
about one wait (tests/test_faults.py).

    STOP_AT=3 STOP_FILE=/tmp/stopped mpirun -np 2 python tests/mpi/bench_stop.py [benchmark.py flags]
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

import benchmark
from harness.fixture import OverlapFixture
from iris_ops.bootstrap import launcher_rank

STOP_AT = int(os.environ["STOP_AT"])
_back_to_back = OverlapFixture.back_to_back


def back_to_back(self: OverlapFixture, launch: Callable[[], object]) -> Callable[[], None]:
    step = _back_to_back(self, launch)
    launched = 0

    def stopping() -> None:
        nonlocal launched
        launched += 1
        if launcher_rank() == 1 and launched == STOP_AT:
            Path(os.environ["STOP_FILE"]).write_text(f"{time.time()}\n")
            os.kill(os.getpid(), signal.SIGSTOP)
        step()

    return stopping


OverlapFixture.back_to_back = back_to_back  # type: ignore[method-assign]
sys.exit(benchmark.main(sys.argv[1:]))
