"""DeviceBarrier on every rank, for tests/test_iris_device_barrier.py.

    TRITON_INTERPRET=1 mpirun -np 2 python tests/mpi/device_barrier.py MODE

MODE ok: every rank passes the barrier three times, stamping slots 0..2; prints
    "BARRIER_OK rank R flags F stamps S" (F: every rank's word here, S: the three stamps).
MODE absent: rank 1 builds the barrier but never calls it; rank 0 calls it with a 0.5 s timeout
and prints "BARRIER_TIMEOUT <the error>" once the wait has given up (it must give up, not hang).
"""

from __future__ import annotations

import sys
import time

import torch

from streamk_pgas import iris_ops
from streamk_pgas.iris_ops.device_barrier import DeviceBarrier


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main() -> int:
    mode = sys.argv[1]
    shmem = iris_ops.iris(1 << 20)
    rank = shmem.get_rank()
    if mode == "ok":
        barrier = DeviceBarrier(shmem, timeout_s=30.0, max_stamps=3)
        for slot in range(3):
            barrier(slot=slot)
        _sync(shmem.get_device())
        barrier.check()
        print(f"BARRIER_OK rank {rank} flags {barrier.flags.tolist()} stamps {barrier.stamps.tolist()}", flush=True)
    elif mode == "absent":
        barrier = DeviceBarrier(shmem, timeout_s=0.5)
        if rank == 0:
            start = time.monotonic()
            barrier()
            _sync(shmem.get_device())
            try:
                barrier.check()
                print("BARRIER_PASSED_WITHOUT_PEER", flush=True)
            except RuntimeError as exc:
                print(f"BARRIER_TIMEOUT after {time.monotonic() - start:.1f} s: {exc}", flush=True)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    shmem.barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
