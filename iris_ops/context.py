"""The device context: what a multi-rank kernel's device functions need of their world, as one Triton tuple (the
shape of Iris's newer DeviceContext), so that a function takes `CTX` instead of heap_bases, cur_rank, world_size,
error words, clock and spin budget as separate arguments.

    ctx = device_context(shmem.get_heap_bases(), rank, world, errors, clock, max_spins, timer)
    kernel[grid](..., ctx, ...)                      # in the kernel: translate(p, CTX.cur_rank, r, CTX.heap_bases)

It is a kernel argument built on the host, as the groups of stream_k.kernel_args and overlap.kernel_args are:
TIMER (and world_size, where loops over ranks unroll) are wrapped in tl.constexpr and read by field, never unpacked,
and the tuple holds no None (Triton 3.6 can type neither). A world of one rank passes `one_rank_bases`: heap base 0,
so that translating to rank 0 is the identity. Iris's device API itself (iris_ops.device) keeps its signatures; the
helpers here only pass the context's fields on to it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
import triton
import triton.language as tl

from streamk_pgas.iris_ops.device import read_timer, record_error_all, wait_local_or_error, wait_range_or_error


class DeviceContext(NamedTuple):
    heap_bases: Any  # int64 [world_size]: every rank's heap base address (Iris.get_heap_bases)
    cur_rank: Any  # this rank
    world_size: Any  # ranks (tl.constexpr in the overlap kernels: their loops over ranks unroll)
    ERRORS: Any  # int32 error words (iris_ops.error_state; on the heap where the errors are collective)
    CLOCK: Any  # int64 [1]: the logical timer's counter (read_timer with TIMER_LOGICAL: the interpreter)
    max_spins: Any  # poll budget of a bounded wait (iris_ops.device.spin_budget)
    TIMER: Any  # tl.constexpr: the iris_ops.device.TIMER_* kind of read_timer


def device_context(heap_bases: torch.Tensor, cur_rank: int, world_size: int, errors: torch.Tensor,
                   clock: torch.Tensor, max_spins: int, timer: int, *, world_constexpr: bool = False
                   ) -> DeviceContext:
    """A DeviceContext with its compile-time fields wrapped (world_size too with `world_constexpr`)."""
    return DeviceContext(heap_bases, cur_rank, tl.constexpr(world_size) if world_constexpr else world_size, errors,
                         clock, max_spins, tl.constexpr(timer))


def one_rank_bases(device: torch.device | str) -> torch.Tensor:
    """The heap bases of a world of one rank: [0], so that translate(ptr, 0, 0, bases) is ptr."""
    return torch.zeros(1, dtype=torch.int64, device=device)


@triton.jit
def now(CTX):
    """A timestamp of the context's timer (iris_ops.device.read_timer)."""
    return read_timer(CTX.CLOCK, CTX.TIMER)


@triton.jit
def wait_or_record(CTX, flag_ptr, value, kind, tile_id, scope: tl.constexpr):
    """Wait (bounded by CTX.max_spins, acquire at `scope`) until *flag_ptr >= value; a wait that gives up records
    (kind, tile_id) in every rank's error words (iris_ops.device.wait_local_or_error, record_error_all)."""
    if not wait_local_or_error(flag_ptr, value, CTX.max_spins, CTX.ERRORS, scope):
        record_error_all(CTX.ERRORS, kind, tile_id, CTX.cur_rank, CTX.heap_bases, CTX.world_size)


@triton.jit
def wait_range_or_record(CTX, ptr, n, value, kind, tile_id, scope: tl.constexpr):
    """wait_or_record on the n consecutive words ptr[0 .. n - 1] at once (iris_ops.device.wait_range_or_error)."""
    if not wait_range_or_error(ptr, n, value, CTX.max_spins, CTX.ERRORS, scope):
        record_error_all(CTX.ERRORS, kind, tile_id, CTX.cur_rank, CTX.heap_bases, CTX.world_size)
