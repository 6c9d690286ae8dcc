"""The rates the planner's cost model is built from (overlap.modes: each mode's `cost`), measured on 2 x H200
(results/README.md, README "Facts"): the copy engines, device memory and the fixed costs of a step here; each
algorithm's own communication rates (per program, the link's ceiling, from an epilogue) in its record
(overlap.algorithms: `Rates`). The GEMM's own time is stream_k.select's."""

from __future__ import annotations

from streamk_pgas import spec
from streamk_pgas.overlap.algorithms import ALGORITHMS
from streamk_pgas.overlap.bands import BANDS
from streamk_pgas.overlap.candidates import Candidate, Problem

LOCAL_GBS = 3000.0  # device memory, for the share of the communication that stays on this rank
# peer barrier; a second kernel; the stream fork; the hand-off between the GEMM's programs and the communication
# programs that follow each other's flags (fused, two_streams; fused_sequential's programs move their own tiles):
# fused's step over fused_sequential's where there is nothing to overlap, M = 128 at W = 4, 6.6-7.4 us for
# all_reduce, one_shot and gemm_reduce_scatter (results/logs/h100x4)
STEP_US = {"sync": 6.0, "launch": 3.0, "two_streams": 5.0, "handoff": 6.0}
COMM_RESERVES = (4, 8, 12, 16, 20, 24, 32, 48)  # SMs tried for communication in the modes that split the SMs
# copy_engine: peer copies by the copy engines (~395 GB/s one way between 2 H200s over NVLink, no SM), and the bands
# the schedule cuts a region into
CE_PEER_GBS = 390.0
# peer copies at W > 2 (through NVSwitch, one copy after another, each rank to a different peer at a time), by device:
# 4 x H100: all_gather_gemm's 168 MiB of A's rows to its peers in ~0.74 ms of the copy stream's 0.78 at 4096 x 8192 x
# 28672 (results/logs/h100x4/diag-1087e00); 4 x H200: the same 168 MiB in 0.548 ms, 96 MiB in 0.310 ms at 8192^3
# (results/logs/h200x4/modes-a41f013). W = 2 keeps CE_PEER_GBS
CE_SWITCH_GBS = 240.0
CE_SWITCH_GBS_BY_DEVICE = {"NVIDIA H200": 320.0}
CE_BANDS = BANDS
CE_OP_US = 1.5  # the device's cost of one stream operation (a wait, a copy's start)
# What the copy-engine steps measured beyond this model: all_gather_gemm's (the step's start and finish kernels, the
# own slot's words on the main stream before the GEMM; the GEMM slowed by the copies' memory traffic) and the
# schedules that follow the GEMM's rows (gemm_reduce_scatter at W = 4 replayed from its graph: ~0.03 ms at 2048 x
# 4096 x 14336, within 0.03 of the model at 8192^3 .. 4096 x 57344 x 8192, results/logs/h100x4/ce-6f13f82)
CE_FIXED_MS = {"gather": 0.02, "follows_gemm": 0.03}
# all_gather_gemm's operations on the copy stream (a copy of a slot's rows or columns, then its ready words): the
# copy stream took 0.0855 ms for 24 of them carrying 3.75 MB, 0.0374 ms for 6 (one a slot and its words), 4 x H200
CE_GATHER_OP_US = 4.0


def ce_peer_gbs(target: spec.Target, world: int) -> float:
    """GB/s the copy engines move from one rank to its peers: CE_PEER_GBS at W = 2, the device's rate through the
    switch at W > 2."""
    return CE_PEER_GBS if world <= 2 else CE_SWITCH_GBS_BY_DEVICE.get(target.name, CE_SWITCH_GBS)


def release_ms(c: Candidate, us_per_wave: float) -> float:
    """What a GEMM epilogue that releases every finished tile at system scope adds to the GEMM's time: `us_per_wave`
    for each wave of tiles on its programs (algorithms.record.SYS_RELEASE_US)."""
    return us_per_wave / 1e3 * -(-c.gemm.plan.num_tiles // c.gemm_sms)


def comm_rate(p: Problem, programs: int, fused: bool = False) -> float:
    """Bytes per ms that `programs` communication programs move to or from peers (`fused`: inside the GEMM's
    kernel, at the algorithm's fused efficiency)."""
    if programs <= 0:
        return 1e-9
    r = ALGORITHMS[p.algorithm].rates
    per_program = r.per_program(p.world_size) * (r.fused_efficiency if fused else 1.0)
    return min(r.link(p.world_size), programs * per_program) * 1e6


def link_ms(p: Problem, nbytes: float) -> float:
    """`nbytes` at the algorithm's link ceiling per rank."""
    return nbytes / (ALGORITHMS[p.algorithm].rates.link(p.world_size) * 1e6)


def sync_ms(p: Problem) -> float:
    """The end-of-step peer barrier (none where the algorithm needs none: AlgorithmRecord.end_barrier)."""
    return STEP_US["sync"] / 1e3 if p.world_size > 1 and ALGORITHMS[p.algorithm].end_barrier else 0.0


def local_ms(p: Problem) -> float:
    """The share of the communication that stays on this rank, at device-memory speed."""
    return p.bytes_moved()[1] / (LOCAL_GBS * 1e6)
