"""fused: one kernel; programs below gemm_sms compute GEMM tiles, the others move them as they finish
(workgroup specialisation); GEMM programs done with their own tiles join them (gemm_joins_comm, GPU only).
all_gather_gemm's communication programs push A's rows, which the GEMM programs wait for.

World 1: the GEMM kernel alone on every program (the communication has no work, so its SMs compute too).
"""

from __future__ import annotations

import torch

from streamk_pgas import spec
from streamk_pgas.overlap.algorithms import ALGORITHMS
from streamk_pgas.overlap.candidates import Candidate, Problem
from streamk_pgas.overlap.modes.base import ModeSteps
from streamk_pgas.overlap.parts import Parts
from streamk_pgas.overlap.rates import STEP_US, comm_rate, local_ms, release_ms, sync_ms
from streamk_pgas.overlap.step import StepLaunches


def joins(parts: Parts) -> bool:
    """GEMM programs join the communication once done with their tiles: on a GPU only (in the interpreter,
    programs run one after another, so an early program would wait on a later one's tile), and not where the
    communication moves A's rows."""
    return parts.cfg.gemm_joins_comm and not parts.target.interpreted and not parts.alg.gathers_a


class Fused(ModeSteps):
    name = "fused"
    slow_because = "the SMs given to the communication slow the GEMM, or the communication cannot keep up on them"

    def step(self, parts: Parts, a: torch.Tensor, b: torch.Tensor, traced: bool) -> StepLaunches:
        T, G = parts.cfg.total_sms, parts.cfg.gemm_sms
        assert T is not None and G is not None
        join = joins(parts)
        launch = parts.overlap(parts.gemm(G), a, b, comm_programs=T - G, join=join, claim=not parts.alg.gathers_a,
                               step_programs=T, traced=traced)
        return StepLaunches("step", main=[("fused", [launch])])

    def peer_cost(self, p: Problem, target: spec.Target, c: Candidate, g: float) -> float:
        return overlapped_cost(p, c, g, fused=True)


def overlapped_cost(p: Problem, c: Candidate, g: float, fused: bool) -> float:
    """fused / two_streams: communication programs follow the GEMM's tiles; GEMM programs join when done."""
    remote, _ = p.bytes_moved()
    T, G = c.total_sms, c.gemm_sms
    rates = ALGORITHMS[p.algorithm].rates
    if fused:  # the GEMM programs beside the communication programs in one kernel
        g *= 1.0 + rates.fused_gemm_cost
    g += release_ms(c, rates.signal_us)
    extra = (0.0 if fused else STEP_US["two_streams"] / 1e3) + STEP_US["handoff"] / 1e3
    base = local_ms(p) + sync_ms(p) + extra
    if p.spec.family.a == "rows":  # the other way round: the GEMM waits for the rows the programs push
        # Each GEMM program's Stream-K range spans every slot of A, so most programs wait for the last slots: the
        # step measures about the GEMM alone plus the push alone (results/README.md, "The sequence-parallel pair on
        # 4 GPUs"), modelled as no overlap.
        return g + remote / comm_rate(p, T - G, fused) + base
    plan = c.gemm.plan
    tiles = plan.num_tiles
    first = g / max(1.0, tiles / G)  # the first wave of tiles is ready
    during = comm_rate(p, T - G, fused) * max(0.0, g - first)
    rest = max(0.0, remote - during) / comm_rate(p, T, fused)
    tail = plan.final_tiles() * (remote / max(1, tiles)) / comm_rate(p, T, fused)
    return g + rest + tail + base
