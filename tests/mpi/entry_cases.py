"""A command-line entry wrapped in iris_ops.entry.run_main, failing on purpose, for tests/test_iris_entry.py
and tests/test_iris_heap_reserve.py. Runs under mpirun, torchrun (or iris_ops.torchrun) and plain python.

    python -m iris_ops.torchrun --nproc-per-node 2 tests/mpi/entry_cases.py MODE [HEAP_BYTES [HOLD_S]]
    mpirun -np 2 python tests/mpi/entry_cases.py MODE [HEAP_BYTES [HOLD_S]]

MODE:
    ok              start, meet, exit 0
    env             iris_ops.env.check() first (the test sets a bad variable), then start
    config_before   a ConfigError on every rank before the ranks start talking
    config_after    a ConfigError on every rank after start-up
    interrupt       every rank is interrupted (SIGINT to itself) after start-up
    peer_fails      rank 1 raises after start-up; rank 0 waits at a barrier
    late            rank 1 starts 60 s late (past IRIS_OPS_TIMEOUT_S)
    sleep           start, then sleep 60 s (a test interrupts the launcher meanwhile)
    heap            make a heap of HEAP_BYTES, zero it, print HEAP_OK rank R, hold it HOLD_S (default 2) s, meet
Every rank prints "STARTED rank R" once its world is up.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from streamk_pgas.iris_ops import env
from streamk_pgas.iris_ops.bootstrap import get_bootstrap, launcher_rank
from streamk_pgas.iris_ops.entry import run_main
from streamk_pgas.iris_ops.errors import ConfigError

MODES = ("ok", "env", "config_before", "config_after", "interrupt", "peer_fails", "late", "sleep", "heap")


def main() -> int:
    mode = sys.argv[1]
    if mode not in MODES:
        raise ConfigError("MODE", f"must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "env":
        env.check()
    if mode == "config_before":
        raise ConfigError("--size", "must be an integer in [1, 10], got 'abc'")
    if mode == "late" and launcher_rank() == 1:
        time.sleep(60)
    boot = get_bootstrap()
    sys.stdout.write(f"STARTED rank {boot.rank}\n")  # one write: ranks share the launcher's pipe
    sys.stdout.flush()
    if mode == "config_after":
        raise ConfigError("--size", "must be an integer in [1, 10], got 'abc'")
    if mode == "interrupt":
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    if mode == "sleep":
        time.sleep(60)
    if mode == "peer_fails" and boot.rank == 1:
        raise RuntimeError("injected failure on rank 1")
    if mode == "heap":
        from streamk_pgas import iris_ops

        shmem = iris_ops.iris(int(sys.argv[2]))
        shmem.memory_pool.zero_()  # every page touched: a heap that was not reserved would fail here (SIGBUS)
        print(f"HEAP_OK rank {boot.rank}", flush=True)
        time.sleep(float(sys.argv[3]) if len(sys.argv) > 3 else 2.0)
    boot.barrier()
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main, "entry_cases"))
