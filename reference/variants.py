"""The baselines: how each shards C = A @ B, what one timed step launches, and its float64 answer.

Every step launches only device work (no host syncs): the timing harness drains the device and
meets the other ranks on the host before each iteration. Buffers are allocated once, contiguous,
before timing; the GEMM writes straight into the buffer the collective reads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from streamk_pgas import spec
from streamk_pgas.harness.runlog import problem_sizes
from streamk_pgas.harness.timing import StepTimer
from streamk_pgas.reference.config import RefConfig
from streamk_pgas.reference.inputs import empty_output, gemm_out, product64, rank_inputs
from streamk_pgas.reference.world import World
from streamk_pgas.stream_k.dtypes import output_dtype


@dataclass
class Prepared:
    """A variant ready to time: one step, and this rank's output after the last step."""

    step: Callable[[StepTimer], None]
    output: Callable[[], torch.Tensor]
    extra: dict[str, Any] = field(default_factory=dict)


def blas_library(device: torch.device) -> str:
    if device.type != "cuda":
        return "torch-cpu"
    if getattr(torch.version, "hip", None):
        try:
            preferred = str(torch.backends.cuda.preferred_blas_library()).rsplit(".", 1)[-1].lower()
        except Exception:
            preferred = "cublaslt"
        return {"cublas": "rocblas", "ck": "composable-kernel"}.get(preferred, "hipblaslt")
    return "cublas"


def _symm_mem_problem(world: World, ops: tuple[str, ...]) -> str | None:
    if world.device.type != "cuda":
        return "torch symmetric memory needs a CUDA or ROCm GPU; this run is on the CPU (gloo)"
    import torch.distributed._symmetric_memory  # registers the torch.ops.symm_mem ops

    missing = [op for op in ops if not hasattr(torch.ops.symm_mem, op)]
    if missing:
        return f"torch {torch.__version__} has no torch.ops.symm_mem.{missing[0]}"
    return None


class Variant:
    """One baseline (spec.BASELINES[key]: its family, its record's "algorithm", whether it is its family's vendor
    pair). Subclasses say in words how the inputs are sharded and what a step launches."""

    key: str = ""
    sharding: str = ""

    @property
    def spec(self) -> spec.Baseline:
        return spec.BASELINES[self.key]

    @property
    def algorithm(self) -> str:
        """The collective, as the record's "algorithm"."""
        return self.spec.collective

    @property
    def vendor_baseline(self) -> bool:
        """The library GEMM + collective that plot.py measures speed-ups against."""
        return self.spec.vendor_pair

    @property
    def shared_a(self) -> bool:
        """Every rank holds the same whole A (B is split)."""
        fam = self.spec.family
        return fam.a == "whole" and fam.b != "whole"

    def implementation(self, world: World) -> str:
        return f"{blas_library(world.device)}+{world.comm_library}"

    def unavailable(self, world: World, cfg: RefConfig) -> str | None:
        return None

    def shard_shapes(self, cfg: RefConfig, w: int) -> tuple[tuple[int, int], tuple[int, int]]:
        """(A shape, B shape) each rank holds (spec.sharding)."""
        fam = self.spec.family
        return fam.a_shape(cfg.m, cfg.k, w), fam.b_shape(cfg.k, cfg.n, w)

    def sizes(self, cfg: RefConfig, w: int) -> dict[str, Any]:
        return problem_sizes(self.spec.family, cfg.m, cfg.n, cfg.k, cfg.datatype, w)

    def inputs(self, cfg: RefConfig, world_size: int, rank: int, device: torch.device
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rank `rank`'s A and B shards (any rank can make any rank's: the seeds are known)."""
        a_shape, b_shape = self.shard_shapes(cfg, world_size)
        return rank_inputs(a_shape, b_shape, cfg.datatype, cfg.seed, rank, device, self.shared_a)

    def prepare(self, world: World, cfg: RefConfig, a: torch.Tensor, b: torch.Tensor) -> Prepared:
        raise NotImplementedError

    def expected(self, world: World, cfg: RefConfig) -> torch.Tensor:
        """This rank's output in float64, from every rank's regenerated inputs."""
        raise NotImplementedError

    def as_output(self, out: torch.Tensor, cfg: RefConfig) -> torch.Tensor:
        """The step's output in the shape `expected` has."""
        return out


def _sum_of_partials(variant: Variant, world: World, cfg: RefConfig) -> torch.Tensor:
    total = None
    for q in range(world.world_size):
        a, b = variant.inputs(cfg, world.world_size, q, world.device)
        part = product64(a, b)
        total = part if total is None else total.add_(part)
        del a, b
    assert total is not None
    return total


class AllReduce(Variant):
    key = "all_reduce"
    sharding = "A column-sharded (M x K/W), B row-sharded (K/W x N); each rank's M x N partial is all-reduced"

    def prepare(self, world: World, cfg: RefConfig, a: torch.Tensor, b: torch.Tensor) -> Prepared:
        c = empty_output((cfg.m, cfg.n), cfg.datatype, world.device)
        group = world.group

        def step(t: StepTimer) -> None:
            with t.span("gemm"):
                gemm_out(a, b, c)
            with t.span("comm"):
                dist.all_reduce(c, group=group)

        return Prepared(step, lambda: c)

    def expected(self, world: World, cfg: RefConfig) -> torch.Tensor:
        return _sum_of_partials(self, world, cfg)


class AllGather(Variant):
    key = "all_gather"
    sharding = ("A replicated (M x K), B column-sharded (K x N/W); each rank's M x N/W block is "
                "all-gathered into a [W, M, N/W] buffer")


    def prepare(self, world: World, cfg: RefConfig, a: torch.Tensor, b: torch.Tensor) -> Prepared:
        w, r, m = world.world_size, world.rank, cfg.m
        n_loc = cfg.n // w
        # The concatenated form ([W * M, N/W], i.e. [W, M, N/W] blocks), which every backend accepts.
        gathered = empty_output((w * m, n_loc), cfg.datatype, world.device)
        # NCCL/RCCL gather in place (the GEMM writes this rank's slot of the gather buffer, saving a
        # copy); gloo gets a separate input, since it copies the input onto its slot.
        in_place = world.backend == "nccl"
        local = gathered[r * m:(r + 1) * m] if in_place else empty_output((m, n_loc), cfg.datatype, world.device)
        row_major = cfg.gather_layout == "row_major"
        c = empty_output((m, cfg.n), cfg.datatype, world.device) if row_major else None
        group = world.group
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

        def step(t: StepTimer) -> None:
            with t.span("gemm"):
                gemm_out(a, b, local)
            with t.span("comm"):
                gather(gathered, local, group=group)
            if c is not None:
                with t.span("layout"):  # [W, M, N/W] -> M x N: one strided copy kernel
                    c.view(m, w, n_loc).copy_(gathered.view(w, m, n_loc).permute(1, 0, 2))

        extra = {"gather_layout": cfg.gather_layout, "layout_copy_in_e2e": row_major, "in_place_gather": in_place}
        blocked = gathered.view(w, m, n_loc)
        return Prepared(step, (lambda: c) if c is not None else (lambda: blocked), extra)

    def as_output(self, out: torch.Tensor, cfg: RefConfig) -> torch.Tensor:
        if out.dim() == 3:  # rank-blocked [W, M, N/W]
            return out.permute(1, 0, 2).reshape(cfg.m, cfg.n)
        return out

    def expected(self, world: World, cfg: RefConfig) -> torch.Tensor:
        blocks = []
        for q in range(world.world_size):
            a, b = self.inputs(cfg, world.world_size, q, world.device)
            blocks.append(product64(a, b))
        return torch.cat(blocks, dim=1)


class Gemm(Variant):
    key = "gemm"
    sharding = "none: every rank multiplies its own whole M x K by K x N (no communication)"

    def implementation(self, world: World) -> str:
        return blas_library(world.device)


    def prepare(self, world: World, cfg: RefConfig, a: torch.Tensor, b: torch.Tensor) -> Prepared:
        c = empty_output((cfg.m, cfg.n), cfg.datatype, world.device)

        def step(t: StepTimer) -> None:
            with t.span("gemm"):
                gemm_out(a, b, c)

        return Prepared(step, lambda: c)

    def expected(self, world: World, cfg: RefConfig) -> torch.Tensor:
        a, b = self.inputs(cfg, world.world_size, world.rank, world.device)
        return product64(a, b)


class SymmMemAllReduce(Variant):
    """GEMM into a symmetric-memory buffer, then torch's P2P all-reduce kernels (no multicast)."""

    sharding = AllReduce.sharding.replace("all-reduced", "all-reduced through torch symmetric memory")
    op = ""
    impl = ""

    def implementation(self, world: World) -> str:
        return self.impl

    def unavailable(self, world: World, cfg: RefConfig) -> str | None:
        return _symm_mem_problem(world, (self.op,))

    def prepare(self, world: World, cfg: RefConfig, a: torch.Tensor, b: torch.Tensor) -> Prepared:
        import torch.distributed._symmetric_memory as symm_mem

        buf = symm_mem.empty(cfg.m, cfg.n, dtype=output_dtype(cfg.datatype), device=world.device)
        handle = symm_mem.rendezvous(buf, world.group)
        group_name = world.group.group_name
        return self._prepare(a, b, buf, handle, group_name)

    def _prepare(self, a: torch.Tensor, b: torch.Tensor, buf: torch.Tensor, handle: Any, group_name: str) -> Prepared:
        raise NotImplementedError

    def expected(self, world: World, cfg: RefConfig) -> torch.Tensor:
        return _sum_of_partials(self, world, cfg)


class SymmMemTwoShot(SymmMemAllReduce):
    key = "symm_mem_two_shot"
    op = "two_shot_all_reduce_"
    impl = "torch-symm-mem-two-shot"

    def _prepare(self, a: torch.Tensor, b: torch.Tensor, buf: torch.Tensor, handle: Any, group_name: str) -> Prepared:
        op = torch.ops.symm_mem.two_shot_all_reduce_

        def step(t: StepTimer) -> None:
            with t.span("gemm"):
                gemm_out(a, b, buf)
            with t.span("comm"):
                op(buf, "sum", group_name)  # in place: reduce-scatter, then all-gather, over P2P loads/stores

        return Prepared(step, lambda: buf, {"symm_mem_handle": type(handle).__name__})


class SymmMemOneShot(SymmMemAllReduce):
    key = "symm_mem_one_shot"
    op = "one_shot_all_reduce_out"
    impl = "torch-symm-mem-one-shot"

    def _prepare(self, a: torch.Tensor, b: torch.Tensor, buf: torch.Tensor, handle: Any, group_name: str) -> Prepared:
        op = torch.ops.symm_mem.one_shot_all_reduce_out
        out = torch.empty_like(buf)  # preallocated: the _out form allocates nothing per step

        def step(t: StepTimer) -> None:
            with t.span("gemm"):
                gemm_out(a, b, buf)
            with t.span("comm"):
                op(buf, "sum", group_name, out)  # every rank reads every peer's whole buffer

        return Prepared(step, lambda: out, {"symm_mem_handle": type(handle).__name__})


def _fused_problem(world: World, cfg: RefConfig, op: str) -> str | None:
    problem = _symm_mem_problem(world, (op,))
    if problem is None and cfg.datatype == "int8":
        problem = f"torch.ops.symm_mem.{op} multiplies with aten.mm, which has no int8 GPU kernel"
    if problem is None:
        problem = _enable_symm_mem(world)
    return problem


def _enable_symm_mem(world: World) -> str | None:
    """Turn torch symmetric memory on for the group where this torch needs it (older versions do; newer ones
    deprecate the call or drop it): None if the fused ops may run, else why not."""
    try:
        import torch.distributed._symmetric_memory as symm_mem
    except Exception as exc:  # any import failure means no fused ops here
        return f"torch {torch.__version__}: torch.distributed._symmetric_memory does not import ({exc})"
    enable = getattr(symm_mem, "enable_symm_mem_for_group", None)
    if enable is not None:
        try:
            enable(world.group.group_name)
        except Exception as exc:  # reported as the variant's reason to skip
            return f"torch {torch.__version__}: enable_symm_mem_for_group failed: {type(exc).__name__}: {exc}"
    return None


def _schema_has(op: Any, argument: str) -> bool:
    """Whether a torch op's (default overload's) schema names `argument` (keyword arguments come and go)."""
    try:
        return any(a.name == argument for a in op.default._schema.arguments)
    except Exception:  # no schema to read: assume the oldest form
        return False


class FusedAllGatherMatmul(Variant):
    key = "fused_all_gather_matmul"
    sharding = ("A row-sharded (M/W x K) and all-gathered while multiplied (the collective moves A, not C); "
                "B column-sharded (K x N/W); each rank ends with C[:, rank's N/W columns] (M x N/W)")

    def implementation(self, world: World) -> str:
        return "torch-symm-mem-fused-all-gather-matmul"

    def unavailable(self, world: World, cfg: RefConfig) -> str | None:
        return _fused_problem(world, cfg, "fused_all_gather_matmul")



    def prepare(self, world: World, cfg: RefConfig, a: torch.Tensor, b: torch.Tensor) -> Prepared:
        op = torch.ops.symm_mem.fused_all_gather_matmul
        group_name = world.group.group_name
        box: dict[str, torch.Tensor] = {}
        # Schema (torch 2.11 / main): fused_all_gather_matmul(Tensor A, Tensor[] Bs, int gather_dim, str group_name,
        # *, bool return_A=True) -> (Tensor?, Tensor[]); older versions have no return_A. return_A=True keeps
        # torch off its multimem (NVLink multicast) path.
        kwargs = {"return_A": True} if _schema_has(op, "return_A") else {}

        def step(t: StepTimer) -> None:
            with t.span("fused"):
                _, outs = op(a, [b], 0, group_name, **kwargs)
            box["c"] = outs[0]

        return Prepared(step, lambda: box["c"], {"return_A": kwargs.get("return_A")})

    def expected(self, world: World, cfg: RefConfig) -> torch.Tensor:
        shards = []
        for q in range(world.world_size):
            a, _ = self.inputs(cfg, world.world_size, q, world.device)
            shards.append(a)
        _, b = self.inputs(cfg, world.world_size, world.rank, world.device)
        return product64(torch.cat(shards, dim=0), b)


class FusedMatmulReduceScatter(Variant):
    key = "fused_matmul_reduce_scatter"
    sharding = ("A column-sharded (M x K/W), B row-sharded (K/W x N); the M x N partials are reduce-scattered "
                "by rows while computed: each rank ends with C[rank's M/W rows] (M/W x N)")

    def implementation(self, world: World) -> str:
        return "torch-symm-mem-fused-matmul-reduce-scatter"

    def unavailable(self, world: World, cfg: RefConfig) -> str | None:
        return _fused_problem(world, cfg, "fused_matmul_reduce_scatter")

    def prepare(self, world: World, cfg: RefConfig, a: torch.Tensor, b: torch.Tensor) -> Prepared:
        op = torch.ops.symm_mem.fused_matmul_reduce_scatter
        group_name = world.group.group_name
        box: dict[str, torch.Tensor] = {}

        def step(t: StepTimer) -> None:
            with t.span("fused"):
                # fused_matmul_reduce_scatter(Tensor A, Tensor B, str reduce_op, int scatter_dim, str group_name)
                box["c"] = op(a, b, "sum", 0, group_name)

        return Prepared(step, lambda: box["c"])

    def expected(self, world: World, cfg: RefConfig) -> torch.Tensor:
        rows = cfg.m // world.world_size
        return _sum_of_partials(self, world, cfg)[world.rank * rows:(world.rank + 1) * rows]


class AllGatherThenGemm(FusedAllGatherMatmul):
    """The vendor pair for all_gather_gemm: all_gather_into_tensor of the A row shards, then the GEMM of the
    gathered A with this rank's B columns (the output of torch's fused op and of all_gather_gemm)."""

    key = "all_gather_then_gemm"
    sharding = ("A row-sharded (M/W x K), all-gathered into M x K, then multiplied; B column-sharded (K x N/W); "
                "each rank ends with C[:, rank's N/W columns] (M x N/W)")

    def implementation(self, world: World) -> str:
        return Variant.implementation(self, world)

    def unavailable(self, world: World, cfg: RefConfig) -> str | None:
        return None

    def prepare(self, world: World, cfg: RefConfig, a: torch.Tensor, b: torch.Tensor) -> Prepared:
        gathered = torch.empty((cfg.m, cfg.k), dtype=a.dtype, device=world.device)
        c = empty_output((cfg.m, cfg.n // world.world_size), cfg.datatype, world.device)
        group = world.group
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        a = a.contiguous()

        def step(t: StepTimer) -> None:
            with t.span("comm"):
                gather(gathered, a, group=group)  # rank order along rows: the whole A
            with t.span("gemm"):
                gemm_out(gathered, b, c)

        return Prepared(step, lambda: c)


class GemmThenReduceScatter(FusedMatmulReduceScatter):
    """The vendor pair for gemm_reduce_scatter: the GEMM of this rank's K slice into an M x N partial, then
    reduce_scatter_tensor by rows (the output of torch's fused op and of gemm_reduce_scatter)."""

    key = "gemm_then_reduce_scatter"
    sharding = ("A column-sharded (M x K/W), B row-sharded (K/W x N); each rank's M x N partial is "
                "reduce-scattered by rows: each rank ends with C[rank's M/W rows] (M/W x N)")

    def implementation(self, world: World) -> str:
        return Variant.implementation(self, world)

    def unavailable(self, world: World, cfg: RefConfig) -> str | None:
        return None

    def prepare(self, world: World, cfg: RefConfig, a: torch.Tensor, b: torch.Tensor) -> Prepared:
        partial = empty_output((cfg.m, cfg.n), cfg.datatype, world.device)
        out = empty_output((cfg.m // world.world_size, cfg.n), cfg.datatype, world.device)
        group = world.group
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

        def step(t: StepTimer) -> None:
            with t.span("gemm"):
                gemm_out(a, b, partial)
            with t.span("comm"):
                scatter(out, partial, group=group)  # rows in rank order: rank r keeps rows r*M/W..

        return Prepared(step, lambda: out)


VARIANTS: dict[str, Variant] = {
    v.key: v
    for v in (AllReduce(), AllGather(), Gemm(), SymmMemTwoShot(), SymmMemOneShot(), FusedAllGatherMatmul(),
              FusedMatmulReduceScatter(), AllGatherThenGemm(), GemmThenReduceScatter())
}
