"""two_streams: the GEMM kernel on gemm_sms programs and the communication kernel on the others, on two streams
(the communication on the op's second stream, forked from and joined back to the current one). GEMM programs
done with their own tiles join the communication (gemm_joins_comm, GPU only). all_gather_gemm's communication
pushes A's rows, which the GEMM waits for. From its third call a step replays from one CUDA graph.

World 1: the GEMM kernel alone on every program (the communication has no work, so its SMs compute too).
"""

from __future__ import annotations

import torch

from streamk_pgas import spec
from streamk_pgas.overlap.candidates import Candidate, Problem
from streamk_pgas.overlap.modes.base import ModeSteps
from streamk_pgas.overlap.modes.fused import joins, overlapped_cost
from streamk_pgas.overlap.parts import Parts
from streamk_pgas.overlap.step import StepLaunches


class TwoStreams(ModeSteps):
    name = "two_streams"
    slow_because = "the SMs given to the communication slow the GEMM, or the communication cannot keep up on them"
    second_stream = True

    def step(self, parts: Parts, a: torch.Tensor, b: torch.Tensor, traced: bool) -> StepLaunches:
        T, G = parts.cfg.total_sms, parts.cfg.gemm_sms
        assert T is not None and G is not None
        gathers = parts.alg.gathers_a
        join = joins(parts)
        gemm = parts.overlap(parts.gemm(G), a, b, join=join, claim=join, step_programs=T, traced=traced)
        comm = parts.comm(T - G, claim=not gathers, step_programs=T, traced=traced, a=a)
        # all_gather_gemm: the GEMM waits on the rows the communication pushes, so it goes first wherever
        # launches run in order (the interpreter, the preload)
        return StepLaunches("step", main=[("gemm", [gemm])], side=comm, side_first=gathers)

    def peer_cost(self, p: Problem, target: spec.Target, c: Candidate, g: float) -> float:
        return overlapped_cost(p, c, g, fused=False)
