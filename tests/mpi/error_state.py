"""The collective error state on 2 ranks, for tests/test_iris_error_state.py.

    TRITON_INTERPRET=1 mpirun -np 2 python tests/mpi/error_state.py

Rank 1's kernel waits for a flag that never comes, gives up and records the error with record_error_all.
Rank 0 then sees it without waiting (peek), its own wait_or_error gives up at once although its budget is
~2**30 polls, and both ranks' check() raise CollectiveError naming rank 1. After reset() both pass;
record_error (local) still reaches only the rank that recorded it. Then a DeviceBarrier on the collective
words that rank 1 never enters: rank 0 gives up once (0.5 s), rank 1 sees the error, and rank 0's next
barrier gives up at once. Prints one line per fact:
    PEEK rank 0 code C              WAIT rank 0 reached R seconds S
    RAISED rank R <message>         CLEAR rank R                     LOCAL rank R code C
    BARRIER rank R raised <message> seconds S (rank 0: the first call, then AGAIN for the second)
"""

from __future__ import annotations

import sys
import time

import torch
import triton
import triton.language as tl

from streamk_pgas import iris_ops
from streamk_pgas.iris_ops.device import (
    ERR_PEER_READY,
    record_error,
    record_error_all,
    wait_local_or_error,
    wait_or_error,
)
from streamk_pgas.iris_ops.device_barrier import DeviceBarrier
from streamk_pgas.iris_ops.error_state import CollectiveError, ErrorState

TILE = 7


@triton.jit
def give_up_kernel(ERRORS, FLAG, OUT, cur_rank, peer, heap_bases, world_size, max_spins, KIND: tl.constexpr,
                   TILE_ID: tl.constexpr):
    """Wait for the peer's FLAG to reach 1 (it never does); on giving up record the error on every rank."""
    reached = wait_or_error(FLAG, 1, cur_rank, peer, heap_bases, max_spins, ERRORS)
    tl.store(OUT, reached.to(tl.int32))
    if not reached:
        record_error_all(ERRORS, KIND, TILE_ID, cur_rank, heap_bases, world_size)


@triton.jit
def local_wait_kernel(ERRORS, FLAG, OUT, max_spins):
    reached = wait_local_or_error(FLAG, 1, max_spins, ERRORS)
    tl.store(OUT, reached.to(tl.int32))


@triton.jit
def record_local_kernel(ERRORS, KIND: tl.constexpr, TILE_ID: tl.constexpr):
    record_error(ERRORS, KIND, TILE_ID)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main() -> int:
    shmem = iris_ops.iris(1 << 20)
    rank, world = shmem.get_rank(), shmem.get_num_ranks()
    if world != 2:
        raise SystemExit("run on 2 ranks")
    peer = 1 - rank
    state = ErrorState(shmem)
    flag = shmem.zeros(1, dtype=torch.int32)
    out = shmem.full((1,), -1, dtype=torch.int32)
    bases = shmem.get_heap_bases()
    shmem.barrier()

    if rank == 1:  # gives up after a few polls and records the error everywhere
        give_up_kernel[(1,)](state.words, flag, out, rank, peer, bases, world, 3, KIND=ERR_PEER_READY, TILE_ID=TILE)
        sync(shmem.get_device())
    shmem.barrier()

    if rank == 0:
        deadline = time.monotonic() + 10
        while not state.peek() and time.monotonic() < deadline:  # a GPU's first peek only starts the copy
            time.sleep(0.01)
        print(f"PEEK rank 0 code {state.peek()}", flush=True)
        start = time.monotonic()
        give_up_kernel[(1,)](state.words, flag, out, rank, peer, bases, world, 2**30, KIND=ERR_PEER_READY,
                             TILE_ID=TILE + 1)
        local_wait_kernel[(1,)](state.words, flag, out[0:1], 2**30)
        sync(shmem.get_device())
        print(f"WAIT rank 0 reached {int(out.item())} seconds {time.monotonic() - start:.2f}", flush=True)

    try:
        state.check(shmem, timeout_s=0.01)
        print(f"NOT_RAISED rank {rank}", flush=True)
    except CollectiveError as exc:
        print(f"RAISED rank {rank} origin {exc.origin} code {exc.code} {exc}", flush=True)

    state.reset(shmem)
    state.check(shmem)
    print(f"CLEAR rank {rank} peek {state.peek()}", flush=True)

    if rank == 0:  # the old recorder stays local
        record_local_kernel[(1,)](state.words, KIND=ERR_PEER_READY, TILE_ID=TILE)
    sync(shmem.get_device())
    shmem.barrier()
    code, origin = state.failed()
    print(f"LOCAL rank {rank} code {code} origin {origin}", flush=True)
    state.reset(shmem)

    barrier = DeviceBarrier(shmem, timeout_s=0.5, errors=state)
    if rank == 0:
        for label in ("BARRIER", "AGAIN"):
            start = time.monotonic()
            barrier()
            sync(shmem.get_device())
            try:
                barrier.check()
                print(f"{label} rank 0 passed", flush=True)
            except CollectiveError as exc:
                print(f"{label} rank 0 raised {exc} seconds {time.monotonic() - start:.2f}", flush=True)
    shmem.barrier()
    if rank == 1:
        try:
            state.check()
            print("BARRIER rank 1 passed", flush=True)
        except CollectiveError as exc:
            print(f"BARRIER rank 1 raised {exc}", flush=True)
    state.reset(shmem)
    return 0


if __name__ == "__main__":
    sys.exit(main())
