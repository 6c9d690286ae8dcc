"""A barrier between the ranks' device streams, through flags on the symmetric heap.

    barrier = DeviceBarrier(shmem)      # every rank, at the same point of its allocation sequence
    barrier()                           # on the current stream: later work starts once every rank is here

A call launches one single-warp kernel on the current stream. It writes the call's epoch into its
own word on every rank (release, system scope), then polls the words here (acquire) until every
rank's word has reached the epoch. Work queued after it on this stream therefore starts only once
every rank's stream has reached its own call: the ranks' device streams leave the barrier within
about one flag round trip of each other (~3 us on 2 x H200), whatever their host launches' skew.

With `slot` the kernel also stamps this device's clock (read_timer) into `stamps[slot]` as it
leaves (`wait=False`: stamp only). benchmark.py uses the stamp as each rank's time origin in tile
timelines: the ranks leave the barrier at nearly the same instant, while their GPUs' clocks may
disagree by far more than that (stamps compare within one GPU, not across GPUs). A wait that
outlives `timeout_s` records an error instead of hanging; `check()` raises it.

With `errors` (an iris_ops.error_state.ErrorState, the step's collective error words) a wait that gives
up records the error on every rank, and the barrier's waits give up at once once any rank has recorded
one: a barrier between back-to-back steps then costs no timeout of its own after a failed step.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from streamk_pgas.iris_ops.device import (
    ERR_PEER_READY,
    ERROR_KIND_SCALE,
    decode_error,
    default_timer_kind,
    notify,
    read_timer,
    record_error,
    record_error_all,
    spin_budget,
    wait_local,
    wait_local_or_error,
)

_ERR_PEER: tl.constexpr = tl.constexpr(ERR_PEER_READY)


@triton.jit(do_not_specialize=["epoch", "max_spins", "slot"])
def device_barrier_kernel(FLAGS, epoch, heap_bases, cur_rank, world_size: tl.constexpr, max_spins, ERRORS,
                          STAMPS, slot, CLOCK, WAIT: tl.constexpr, TIMER: tl.constexpr,
                          COLLECTIVE: tl.constexpr = False):
    if WAIT:
        for p in tl.static_range(world_size):
            notify(FLAGS + cur_rank, epoch, cur_rank, p, heap_bases, "sys")
        for p in tl.static_range(world_size):
            if COLLECTIVE:
                if not wait_local_or_error(FLAGS + p, epoch, max_spins, ERRORS, "sys"):
                    record_error_all(ERRORS, _ERR_PEER.value, p, cur_rank, heap_bases, world_size)
            else:
                if not wait_local(FLAGS + p, epoch, max_spins, "sys"):
                    record_error(ERRORS, _ERR_PEER.value, p)
    if STAMPS is not None:
        tl.store(STAMPS + slot, read_timer(CLOCK, TIMER))


class DeviceBarrier:
    """World-size int32 flags on the heap, an error word, and optional exit timestamps."""

    def __init__(self, shmem: Any, timeout_s: float = 30.0, max_stamps: int = 0, errors: Any = None) -> None:
        self.shmem = shmem
        self.rank = shmem.get_rank()
        self.world = shmem.get_num_ranks()
        device = shmem.get_device()
        self.flags = shmem.zeros(self.world, dtype=torch.int32)
        self.error_state = errors  # an ErrorState: the collective words, or None: a local word of its own
        self.errors = errors.words if errors is not None else torch.zeros(1, dtype=torch.int32, device=device)
        self.clock = torch.zeros(1, dtype=torch.int64, device=device)
        self.stamps = torch.zeros(max(1, max_stamps), dtype=torch.int64, device=device)
        self.max_spins = spin_budget(timeout_s)
        self.timeout_s = timeout_s
        self.epoch = 0
        shmem.barrier()  # every rank's flags are zeroed before any rank can raise a peer's

    def __call__(self, slot: int | None = None, wait: bool = True) -> None:
        if slot is not None and not 0 <= slot < self.stamps.numel():
            raise IndexError(f"stamp slot {slot} outside 0..{self.stamps.numel() - 1}")
        if wait:
            self.epoch += 1
        device_barrier_kernel[(1,)](
            self.flags, self.epoch, self.shmem.get_heap_bases(), self.rank, self.world, self.max_spins, self.errors,
            self.stamps if slot is not None else None, slot or 0, self.clock,
            WAIT=wait, TIMER=default_timer_kind(), COLLECTIVE=self.error_state is not None, num_warps=1,
        )

    def check(self) -> None:
        """Raise if a barrier wait timed out (its 'tile' is the rank that never arrived); with `errors`, the
        ErrorState's CollectiveError if any rank recorded an error (the words stay set until its reset)."""
        if self.error_state is not None:
            self.error_state.check(timeout_s=self.timeout_s)
            return
        code = int(self.errors.item())
        if code:
            self.errors.zero_()
            kind, peer = divmod(code, ERROR_KIND_SCALE)
            what = f"rank {peer - 1} did not arrive" if kind == ERR_PEER_READY else decode_error(code)
            raise RuntimeError(f"rank {self.rank}: device barrier: {what} (gave up after ~{self.timeout_s:g} s)")
