"""Jobs that go wrong on purpose, for tests/test_iris_launch.py: they must end, non-zero and clean.

    IRIS_OPS_TIMEOUT_S=5 TRITON_INTERPRET=1 mpirun -np 2 python tests/mpi/heap_failures.py MODE

MODE (rank 1 misbehaves; every rank prints "HEAP_FILE <path>" when its shm heap file is created):
    raise_after_heap    raises after iris() returned
    exit1_after_heap    sys.exit(1) after iris() returned
    raise_while_mapping raises inside iris(), after creating its heap file, before mapping the peers'
    os_exit_after_heap  os._exit(3) after iris() returned: no cleanup, no MPI_Finalize
    kill_after_heap     SIGKILL to itself after iris() returned
    hang_after_heap     never reaches the barrier after iris() (sleeps 600 s)
    late                sleeps 120 s before iris(): never arrives within the timeout
    exit_before_heap    exits (code 0) before iris()
    never_starts        sleeps 600 s before MPI starts (before mpi4py is imported): the others wait in
                        MPI_Init, which only the start-up watchdog bounds
    ok                  nothing goes wrong (control)
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

from streamk_pgas.iris_ops import backends
from streamk_pgas.iris_ops.bootstrap import get_bootstrap, launcher_rank

MODES = ("raise_after_heap", "exit1_after_heap", "raise_while_mapping", "os_exit_after_heap", "kill_after_heap",
         "hang_after_heap", "late", "exit_before_heap", "never_starts", "ok")


def main() -> int:
    mode = sys.argv[1]
    if mode not in MODES:
        raise SystemExit(f"mode must be one of {MODES}")
    if mode == "never_starts" and launcher_rank() == 1:
        print("rank 1 never starts", flush=True)
        time.sleep(600)
    boot = get_bootstrap()
    rank = boot.rank
    print(f"rank {rank} pid {os.getpid()} mode {mode}", flush=True)

    make_backend = backends.make_backend

    def traced_make_backend(*args: Any, **kwargs: Any) -> Any:
        backend = make_backend(*args, **kwargs)
        allocate, open_peer = backend.allocate, backend.open

        def allocate_traced(heap_size: int) -> Any:
            heap = allocate(heap_size)
            if getattr(backend, "path", None) is not None:
                print(f"HEAP_FILE {backend.path}", flush=True)
            return heap

        def open_failing(handle: Any, peer: int) -> int:
            if mode == "raise_while_mapping" and rank == 1:
                raise RuntimeError("injected failure while mapping a peer's heap")
            return open_peer(handle, peer)

        backend.allocate, backend.open = allocate_traced, open_failing
        return backend

    from streamk_pgas.iris_ops import heap as heap_module

    heap_module.make_backend = traced_make_backend

    if rank == 1 and mode == "late":
        time.sleep(120)
    if rank == 1 and mode == "exit_before_heap":
        sys.exit(0)
    sh = heap_module.iris(1 << 20)
    if rank == 1 and mode == "raise_after_heap":
        raise RuntimeError("injected crash after creating the heap")
    if rank == 1 and mode == "exit1_after_heap":
        sys.exit(1)
    if rank == 1 and mode == "os_exit_after_heap":
        os._exit(3)
    if rank == 1 and mode == "kill_after_heap":
        os.kill(os.getpid(), signal.SIGKILL)
    if rank == 1 and mode == "hang_after_heap":
        time.sleep(600)
    sh.barrier()
    print(f"rank {rank} finished", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
