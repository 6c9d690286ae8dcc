"""What every mode shares: the dispatch from a step's kind to the mode's own step, the world of one rank, the
GEMM and the communication timed alone, the SM split's check and options, the cost model's common terms."""

from __future__ import annotations

from typing import Any

import torch

from streamk_pgas import spec
from streamk_pgas.overlap.candidates import Candidate, Problem
from streamk_pgas.overlap.config import InvalidConfig, OverlapConfig
from streamk_pgas.overlap.parts import Parts
from streamk_pgas.overlap.rates import COMM_RESERVES
from streamk_pgas.overlap.step import StepLaunches


class ModeSteps:
    """One mode: its programs, its step, its cost, its checks. Subclasses write `step` and `peer_cost`."""

    name = ""
    second_stream = False  # the step forks a second stream on a GPU (with peers)
    copies = False  # the copy engines move the data: the op allocates their counts and buffers
    pushes = False  # the GEMM programs move their own tiles from the epilogue (no communication programs)
    # What one step launches with one rank (nothing to communicate): every mode's step is then the stand-alone
    # GEMM (stream_k's kernel, the epoch counted on the device) on all of the mode's programs, A and B read where
    # they are, C written by the GEMM's epilogue; no zeroing, flags, waits or copies.
    world_one = "the GEMM kernel alone, on every program"
    # what makes this mode slow where the planner predicts it far behind the best (overlap.resolution: SLOW_MODE)
    slow_because = ""

    @property
    def spec(self) -> spec.Mode:
        return spec.MODES[self.name]

    def auto_candidate(self, p: Problem) -> bool:
        """Whether `auto` may choose this mode for p (it always runs when asked for)."""
        return True

    # ---- the step ---------------------------------------------------------------------------------------
    def build(self, parts: Parts, kind: str, a: torch.Tensor, b: torch.Tensor) -> StepLaunches:
        """The launches of one step of `kind` (overlap.step.KINDS) on inputs a and b."""
        if parts.world == 1:
            return self.alone_step(parts, kind, a, b)
        if kind == "gemm_alone":
            cfg = parts.cfg
            assert cfg.gemm_sms is not None
            gemm = parts.gemm(cfg.gemm_sms)
            launch = parts.overlap(gemm, a, b, step_programs=gemm.plan.num_programs, peer_sync=False, wait_a=False)
            return StepLaunches(kind, main=[("gemm_alone", [launch])])
        if kind == "comm_alone":
            return self.comm_alone(parts, a)
        step = self.step(parts, a, b, traced=kind == "traced")
        if parts.bufs.wide_c and not step.post:
            step.post = [parts.compaction()]
        return step

    def alone_step(self, parts: Parts, kind: str, a: torch.Tensor, b: torch.Tensor) -> StepLaunches:
        """One rank: the GEMM alone (self.world_one); the communication timed alone has nothing to move."""
        if kind == "comm_alone":
            return StepLaunches(kind)
        programs = parts.cfg.gemm_sms if kind == "gemm_alone" else parts.main_programs
        assert programs is not None
        name = "gemm_alone" if kind == "gemm_alone" else "gemm"
        return StepLaunches(kind, main=[(name, [parts.alone(programs, a, b, traced=kind == "traced")])])

    def comm_alone(self, parts: Parts, a: torch.Tensor) -> StepLaunches:
        """The communication on the programs the GEMM leaves, every tile taken as ready."""
        cfg = parts.cfg
        assert cfg.total_sms is not None and cfg.gemm_sms is not None
        programs = cfg.total_sms - cfg.gemm_sms
        comm = parts.comm(programs, claim=False, step_programs=programs, wait_ready=False, a=a)
        return StepLaunches("comm_alone", main=[("comm_alone", [comm])])

    def step(self, parts: Parts, a: torch.Tensor, b: torch.Tensor, traced: bool) -> StepLaunches:
        raise NotImplementedError

    # ---- the SM split -------------------------------------------------------------------------------------
    def unavailable(self, target: spec.Target) -> str | None:
        """Why this mode cannot run on `target` at all (None: it can); the planner plans only modes that can."""
        return None

    def check(self, cfg: OverlapConfig, world: int, target: spec.Target) -> None:
        """Refuse what this mode cannot run (overlap.config.InvalidConfig): here, an SM split that leaves no SM to
        communicate."""
        total, gemm = cfg.total_sms, cfg.gemm_sms
        assert total is not None and gemm is not None
        if not 1 <= gemm < total:
            raise InvalidConfig("gemm_sms", f"gemm_sms must be in [1, {total - 1}] (below total_sms={total}, leaving "
                                            f"SMs to communicate), got {gemm}")

    def gemm_sms_options(self, total: int, fixed: dict[str, Any], world: int) -> list[int]:
        """The gemm_sms values the planner tries (one: the modes that run every program as both)."""
        if "gemm_sms" in fixed:
            return [fixed["gemm_sms"]]
        if self.spec.splits_sms and world > 1:
            return [total - c for c in COMM_RESERVES if 1 <= total - c < total]
        return [max(1, total - 16)]

    # ---- the cost model -------------------------------------------------------------------------------------
    def cost(self, p: Problem, target: spec.Target, c: Candidate) -> float:
        """The model's step time in ms (one rank: the GEMM's)."""
        g = c.gemm.time_us / 1e3
        if p.world_size == 1:
            return g
        return self.peer_cost(p, target, c, g)

    def peer_cost(self, p: Problem, target: spec.Target, c: Candidate, g: float) -> float:
        raise NotImplementedError
