"""fused_sequential: one kernel on every program; each GEMM program moves its own finished tiles from its
epilogue (remote stores into every rank's C), spending no SMs on communication. The reduce algorithms and
gemm_reduce_scatter publish their partial from the epilogue, then their GEMM programs reduce tiles once their
GEMM work is done; all_gather_gemm's GEMM programs push their share of A's rows first, then compute. In the
interpreter, whose programs run one after another, the second phase (the reduction, all_gather_gemm's push) is a
second launch.

World 1: the GEMM kernel alone on every program.
"""

from __future__ import annotations

import torch

from streamk_pgas import spec
from streamk_pgas.overlap.algorithms import ALGORITHMS
from streamk_pgas.overlap.candidates import Candidate, Problem
from streamk_pgas.overlap.modes.base import ModeSteps
from streamk_pgas.overlap.parts import Parts
from streamk_pgas.overlap.rates import comm_rate, link_ms, local_ms, sync_ms
from streamk_pgas.overlap.step import StepLaunches


class FusedSequential(ModeSteps):
    name = "fused_sequential"
    slow_because = "the GEMM's programs move the data before or after their own GEMM work, so little of it overlaps"
    pushes = True

    def step(self, parts: Parts, a: torch.Tensor, b: torch.Tensor, traced: bool) -> StepLaunches:
        T, alg, interpreted = parts.cfg.total_sms, parts.alg, parts.target.interpreted
        assert T is not None
        gemm = parts.gemm(T)
        step = StepLaunches("step")
        if alg.gathers_a:
            if not interpreted:  # each GEMM program pushes its share of A's rows, then computes
                step.main = [("fused", [parts.overlap(gemm, a, b, step_programs=T, traced=traced, push=True,
                                                      gemm_gathers=True)])]
            else:  # a program would wait on rows a later program pushes: the push first, a launch of its own
                step.main = [("fused", [parts.comm(T, claim=False, step_programs=2 * T, traced=traced, a=a),
                                        parts.overlap(gemm, a, b, step_programs=2 * T, traced=traced, push=True)])]
            return step
        if alg.push_epilogue is not None:  # the epilogue moves every tile
            step.main = [("fused", [parts.overlap(gemm, a, b, step_programs=T, traced=traced, push=True)])]
        elif not interpreted:  # publish from the epilogue, then reduce after the GEMM work
            step.main = [("fused", [parts.overlap(gemm, a, b, join=True, claim=True, step_programs=T,
                                                  traced=traced, push=True)])]
        else:  # a program would wait on a tile of a later one: the reduce phase is a second launch
            step.main = [("fused", [parts.overlap(gemm, a, b, step_programs=2 * T, traced=traced, push=True),
                                    parts.comm(T, claim=True, step_programs=2 * T, traced=traced)])]
        return step

    def auto_candidate(self, p: Problem) -> bool:
        """Not for all_gather_gemm: its GEMM programs push A, then compute, which is bulk_sync's work without the
        kernel boundary, and it measured behind bulk_sync on most cells (results/README.md, the sequence-parallel
        pair), a difference the model does not see."""
        return p.spec.family.a != "rows"

    def peer_cost(self, p: Problem, target: spec.Target, c: Candidate, g: float) -> float:
        remote, _ = p.bytes_moved()
        T = c.total_sms
        alg = ALGORITHMS[p.algorithm]
        if alg.push_epilogue is None:  # publish from the epilogue, move after the GEMM work
            return g + remote / comm_rate(p, T) + local_ms(p) + sync_ms(p)
        assert alg.rates.epilogue_gbs is not None, f"{p.algorithm} pushes from its epilogue: give its rate"
        # each program pushes its own tiles between tiles
        tiles = c.gemm.plan.num_tiles
        stall = -(-tiles // T) * remote / max(1, tiles) / (alg.rates.epilogue_gbs * 1e6)
        return max(g + stall, link_ms(p, remote)) + sync_ms(p)
