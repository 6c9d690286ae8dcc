"""Back-to-back steps with a peer that stops (SIGSTOP), for tests/test_iris_error_state.py: the job must end
within about one wait timeout, following the pattern iris_ops.error_state documents (peek between steps,
check without meeting the peers).

    IRIS_OPS_TIMEOUT_S=60 TRITON_INTERPRET=1 mpirun -np 2 python tests/mpi/error_state_hang.py STEPS WAIT_S

Each step, every rank raises its flag on every rank to the step's epoch and waits (wait_or_error, a budget of
WAIT_S) for every peer's flag; a wait that gives up records the error on every rank (record_error_all).
Rank 1 stops itself before step 3. Prints "STEP rank R i" after each step it passed.
"""

from __future__ import annotations

import os
import signal
import sys

import torch
import triton
import triton.language as tl

from streamk_pgas import iris_ops
from streamk_pgas.iris_ops.device import ERR_PEER_READY, notify, record_error_all, spin_budget, wait_or_error
from streamk_pgas.iris_ops.entry import run_main
from streamk_pgas.iris_ops.error_state import ErrorState


@triton.jit
def step_kernel(FLAGS, ERRORS, epoch, cur_rank, heap_bases, world_size: tl.constexpr, max_spins,
                KIND: tl.constexpr):
    for p in tl.static_range(world_size):
        notify(FLAGS + cur_rank, epoch, cur_rank, p, heap_bases)
    for p in tl.static_range(world_size):
        if not wait_or_error(FLAGS + p, epoch, cur_rank, cur_rank, heap_bases, max_spins, ERRORS):
            record_error_all(ERRORS, KIND, p, cur_rank, heap_bases, world_size)


def main() -> int:
    steps, wait_s = int(sys.argv[1]), float(sys.argv[2])
    shmem = iris_ops.iris(1 << 20)
    rank, world = shmem.get_rank(), shmem.get_num_ranks()
    state = ErrorState(shmem)
    flags = shmem.zeros(world, dtype=torch.int32)
    shmem.barrier()
    for i in range(1, steps + 1):
        if rank == 1 and i == 3:
            os.kill(os.getpid(), signal.SIGSTOP)
        step_kernel[(1,)](flags, state.words, i, rank, shmem.get_heap_bases(), world, spin_budget(wait_s),
                          KIND=ERR_PEER_READY)
        if state.peek():
            state.check(timeout_s=wait_s)
        sys.stdout.write(f"STEP rank {rank} {i}\n")
        sys.stdout.flush()
    state.check(shmem)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main, "error_state_hang"))
