"""bulk_sync: the GEMM on every program, then the communication on every program (the baseline schedule); for
all_gather_gemm the other way round (A's rows first, then the GEMM that reads them).

World 1: the GEMM kernel alone on every program.
"""

from __future__ import annotations

import torch

from streamk_pgas import spec
from streamk_pgas.overlap.candidates import Candidate, Problem
from streamk_pgas.overlap.modes.base import ModeSteps
from streamk_pgas.overlap.parts import Parts
from streamk_pgas.overlap.rates import STEP_US, comm_rate, local_ms, sync_ms
from streamk_pgas.overlap.step import StepLaunches


class BulkSync(ModeSteps):
    name = "bulk_sync"
    slow_because = "the communication starts after the whole GEMM (or the GEMM after the whole push), nothing overlaps"

    def step(self, parts: Parts, a: torch.Tensor, b: torch.Tensor, traced: bool) -> StepLaunches:
        T = parts.cfg.total_sms
        assert T is not None
        gemm = parts.overlap(parts.gemm(T), a, b, step_programs=2 * T, traced=traced, a_segments=False)
        comm = parts.comm(T, claim=False, step_programs=2 * T, traced=traced, a=a)
        if parts.alg.gathers_a:
            return StepLaunches("step", main=[("comm", [comm]), ("gemm", [gemm])])
        return StepLaunches("step", main=[("gemm", [gemm]), ("comm", [comm])])

    def peer_cost(self, p: Problem, target: spec.Target, c: Candidate, g: float) -> float:
        remote, _ = p.bytes_moved()
        return g + remote / comm_rate(p, c.total_sms) + local_ms(p) + sync_ms(p) + STEP_US["launch"] / 1e3
