"""copy_engine: the GEMM on every SM; the copy engines move its finished rows (all_scatter's columns,
gemm_reduce_scatter's partial rows to their owners) or A's rows (all_gather_gemm), waiting on the GEMM's tile
counts per band of tile rows, with no SM spent (overlap.copy_steps). A step: ce_start (arrival), the GEMM and the
copy schedule on the op's second stream, ce_finish (the step's close), then gemm_reduce_scatter's add of the
received rows. From its third call a step replays from one CUDA graph. NVIDIA only.

World 1: the GEMM kernel alone on every program.
"""

from __future__ import annotations

import torch

from streamk_pgas import spec
from streamk_pgas.overlap.algorithms.record import GPU_RELEASE_US
from streamk_pgas.overlap.candidates import Candidate, Problem
from streamk_pgas.overlap.config import InvalidConfig, OverlapConfig
from streamk_pgas.overlap.copy_steps import gather_copies_per_slot, gathers_a_in_columns
from streamk_pgas.overlap.modes.base import ModeSteps
from streamk_pgas.overlap.parts import Parts
from streamk_pgas.overlap.rates import (
    CE_BANDS,
    CE_FIXED_MS,
    CE_GATHER_OP_US,
    CE_OP_US,
    LOCAL_GBS,
    ce_peer_gbs,
    release_ms,
    sync_ms,
)
from streamk_pgas.overlap.step import StepLaunches


class CopyEngine(ModeSteps):
    name = "copy_engine"
    slow_because = "every step pays the copy engines' fixed cost (tens of stream operations, the add after the copies)"
    second_stream = True
    copies = True

    def step(self, parts: Parts, a: torch.Tensor, b: torch.Tensor, traced: bool) -> StepLaunches:
        T, alg = parts.cfg.total_sms, parts.alg
        assert T is not None
        # all_gather_gemm's GEMM waits by segments where the schedule pushes A in chunks of columns
        gemm = parts.overlap(parts.gemm(T), a, b, step_programs=T + 1, traced=traced, counts=not alg.gathers_a,
                             a_segments=parts.a_in_columns())
        schedule = parts.copy_schedule(a, parts.ce_finish(T + 1))
        # pre: ce_start, then what goes on the main stream before the GEMM (all_gather_gemm: the own slot; in
        # columns also the source of the peers' ready words)
        step = StepLaunches("step", pre=[*parts.copy_pre(a), parts.ce_start(), *parts.copy_start(a)],
                            main=[("gemm", [gemm])],
                            side=schedule, side_name="copy", side_first=alg.gathers_a, post_name="add")
        if alg.copy_schedule == "reduce_rows":
            step.post = [parts.reduce_rows_post()]
        return step

    def comm_alone(self, parts: Parts, a: torch.Tensor) -> StepLaunches:
        """The copies and the protocol, nothing waited for."""
        schedule = parts.copy_schedule(a, parts.ce_finish(1), wait=False)
        return StepLaunches("comm_alone", pre=[*parts.copy_pre(a), parts.ce_start(), *parts.copy_start(a)],
                            main=[("comm_alone", [schedule])])

    def check(self, cfg: OverlapConfig, world: int, target: spec.Target) -> None:
        if cfg.gemm_sms != cfg.total_sms:
            raise InvalidConfig("gemm_sms", f"{self.name} runs the GEMM on every SM: gemm_sms must equal total_sms "
                                            f"({cfg.total_sms}), got {cfg.gemm_sms}")

    def unavailable(self, target: spec.Target) -> str | None:
        if target.backend == "hip":
            return f"{self.name} is NVIDIA-only for now (HIP's stream wait-value path is not built)"
        return None

    def gemm_sms_options(self, total: int, fixed: dict, world: int) -> list[int]:
        return [fixed.get("gemm_sms", total)]

    @staticmethod
    def _gather_cost(p: Problem, c: Candidate, g: float, slot: float, peer: float) -> float:
        """all_gather_gemm: the GEMM (g ms alone, tiles in row order) on A's slots as the copy stream lands them:
        slot 0 (this rank's rows) before the GEMM, then slot after slot (copy_steps: gather_a_ops, gather_a_column_ops),
        each in `copies` copies (row chunks, or wait segments of columns), each followed by its ready words: two
        operations of CE_GATHER_OP_US. A tile waits for its rows, and a wave's tiles run side by side, so a slot's last
        row chunk takes a wave after it lands (a GEMM of one wave waits for the last slot, then runs whole). In columns
        every copy holds all the slot's rows: the slot's tiles start on its first copy (and take a wave at least), its
        last copy's columns take a wave's share."""
        w = p.world_size
        element_bytes = spec.DATATYPES[p.datatype].bytes
        columns = gathers_a_in_columns(p.m, p.k, w, element_bytes)
        copies = gather_copies_per_slot(p.m, p.k, w, element_bytes)
        per_copy = slot / copies / peer + 2 * CE_GATHER_OP_US / 1e3
        wave = g / max(1, -(-c.gemm.plan.num_tiles // c.total_sms))
        t = g / w  # slot 0
        for j in range(1, w):  # slot j's copies: ((j - 1) * copies + 1) .. j * copies
            first, last = ((j - 1) * copies + 1) * per_copy, j * copies * per_copy
            if columns:
                t = max(max(t, first) + g / w, first + wave, last + wave / copies)
            else:
                t = max(t + g / w, last + wave)
        return t

    def peer_cost(self, p: Problem, target: spec.Target, c: Candidate, g: float) -> float:
        remote, local = p.bytes_moved(via_owner=False)
        peer = ce_peer_gbs(target, p.world_size) * 1e6
        if p.spec.family.a == "rows":
            return self._gather_cost(p, c, g, local, peer) + CE_FIXED_MS["gather"] + sync_ms(p)
        ops = CE_OP_US / 1e3 * CE_BANDS * max(1, p.world_size - 1)
        g += release_ms(c, GPU_RELEASE_US)  # store_and_count's releases
        # scatter / reduce_rows: bands follow the GEMM's rows; all_scatter's last band's copy is not hidden, while
        # gemm_reduce_scatter's GEMM ends with the rank's own rows (nothing to copy: overlap.bands.reduce_rows_shift)
        rows = p.spec.family.output == "rows"
        tail = 0.0 if rows else remote / peer / CE_BANDS
        # gemm_reduce_scatter's sum after the copies: W slots read, its rows written (copy_steps.reduce_rows_post)
        add = (p.world_size + 1) * local / (LOCAL_GBS * 1e6) if rows else 0.0
        return max(g, remote / peer) + tail + add + ops + CE_FIXED_MS["follows_gemm"] + sync_ms(p)
