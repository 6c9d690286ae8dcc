"""Jobs that go wrong on purpose, for tests/test_iris_launch.py: they must end, non-zero and clean.

    IRIS_OPS_TIMEOUT_S=5 TRITON_INTERPRET=1 mpirun -np 2 python tests/mpi/heap_failures.py MODE

MODE (rank 1 misbehaves; every rank prints "HEAP_FILE <path>" when its shm heap file is created):
    raise_after_heap    raises after iris() returned
    exit1_after_heap    sys.exit(1) after iris() returned
    raise_while_mapping raises inside iris(), after creating its heap file, before mapping the peers'
    late                sleeps 120 s before iris(): never arrives within the timeout
    exit_before_heap    exits (code 0) before iris()
    ok                  nothing goes wrong (control)
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import iris_ops.backends as backends
from iris_ops.bootstrap import get_bootstrap

MODES = ("raise_after_heap", "exit1_after_heap", "raise_while_mapping", "late", "exit_before_heap", "ok")


def main() -> int:
    mode = sys.argv[1]
    if mode not in MODES:
        raise SystemExit(f"mode must be one of {MODES}")
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

    import iris_ops.heap

    iris_ops.heap.make_backend = traced_make_backend

    if rank == 1 and mode == "late":
        time.sleep(120)
    if rank == 1 and mode == "exit_before_heap":
        sys.exit(0)
    sh = iris_ops.heap.iris(1 << 20)
    if rank == 1 and mode == "raise_after_heap":
        raise RuntimeError("injected crash after creating the heap")
    if rank == 1 and mode == "exit1_after_heap":
        sys.exit(1)
    sh.barrier()
    print(f"rank {rank} finished", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
