"""An op's launches listed without a device or peers: the op planned and bound for any target (spec.Target) and
world size, its launches (kernel, grid, argument values, options) returned, nothing run. What a compile check for
a GPU target that is not on this machine needs (tools.compile_check).

    launches = op_launches("all_reduce", "fused", 4864, 4096, 8256, "bf16", KNOWN_TARGETS["h200"], world_size=2)
    every = every_launch(op_for("all_reduce", "two_streams", 4864, 4096, 8256, "bf16", KNOWN_TARGETS["mi300x"]))
    runnable = [(alg, mode) for alg, mode, why in every_mode(KNOWN_TARGETS["mi300x"]) if why is None]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from streamk_pgas.overlap.modes import MODE_STEPS
from streamk_pgas.overlap.op import OverlapOp
from streamk_pgas.overlap.step import KINDS
from streamk_pgas.spec import ALGORITHMS, Target
from streamk_pgas.stream_k.launch import BoundLaunch

_HEAP_BASE = 1 << 40  # where the stand-in heaps of the ranks start (each 1 TiB apart), as addresses go


class ListingHeap:
    """Rank `rank` of a world of `world_size` with no peers: host memory for the op's buffers, heap bases that
    only mean something to a kernel that is never run. It has what OverlapOp asks of an iris_ops.Iris heap."""

    def __init__(self, world_size: int, rank: int = 0) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in [0, {world_size}); got {rank}")
        self.world_size, self.rank = world_size, rank
        self.free_bytes = 1 << 62

    def get_rank(self) -> int:
        return self.rank

    def get_num_ranks(self) -> int:
        return self.world_size

    def get_device(self) -> torch.device:
        return torch.device("cpu")

    def get_heap_bases(self) -> torch.Tensor:
        return torch.tensor([_HEAP_BASE * (r + 1) for r in range(self.world_size)], dtype=torch.int64)

    def zeros(self, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        # not zeroed: nothing reads the buffers of an op that is never run (at 8 ranks they are GBs to write)
        return torch.empty(*shape, dtype=dtype)

    def require_on_heap(self, tensor: torch.Tensor, name: str = "tensor") -> None:
        return None  # every buffer of the stand-in heap counts as on it

    def barrier(self) -> None:
        return None


def every_mode(target: Target) -> list[tuple[str, str, str | None]]:
    """Every algorithm x mode of the spec, each with why `target` cannot run it (None: it can; the planner plans
    only those, overlap.modes' `unavailable`)."""
    return [(alg.name, mode, MODE_STEPS[mode].unavailable(target)) for alg in ALGORITHMS.values()
            for mode in alg.modes]


def op_for(algorithm: str, mode: str, m: int, n: int, k: int, datatype: str, target: Target, *,
           world_size: int = 2, rank: int = 0, **options: Any) -> OverlapOp:
    """The op of rank `rank` in a world of `world_size`, planned and bound for `target` (not runnable here)."""
    return OverlapOp.create(ListingHeap(world_size, rank), algorithm, m, n, k, datatype, mode, target=target,
                            **options)


def op_launches(algorithm: str, mode: str, m: int, n: int, k: int, datatype: str, target: Target, *,
                world_size: int = 2, kind: str = "step", **options: Any) -> list[BoundLaunch]:
    """The Triton launches of one step of `kind` (overlap.step.KINDS), in queue order."""
    return op_for(algorithm, mode, m, n, k, datatype, target, world_size=world_size, **options).launches(kind)


# what an op launches: a step of each kind (overlap.step.KINDS), and the two-stream preload's own launches
LAUNCH_KINDS = (*KINDS, "preload")


def every_launch(op: OverlapOp, kinds: Sequence[str] = LAUNCH_KINDS) -> list[tuple[str, BoundLaunch]]:
    """The Triton launches the op makes, each with its kind (LAUNCH_KINDS: a step's kind, in queue order, or the
    preload's), for the kinds asked for."""
    for kind in kinds:
        if kind not in LAUNCH_KINDS:
            raise ValueError(f"kinds must be among {', '.join(LAUNCH_KINDS)}; got {kind!r}")
    return [(kind, launch) for kind in kinds
            for launch in (op.preload_launches() if kind == "preload" else op.launches(kind))]
