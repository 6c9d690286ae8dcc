"""The rates the planner's cost model is built from (overlap.modes: each mode's `cost`), measured on 2 x H200
(results/README.md, README "Facts"): communication per program and the link's ceiling, the same work from a GEMM
program's epilogue, the copy engines, and the fixed costs of a step. The GEMM's own time is stream_k.select's."""

from __future__ import annotations

from overlap.candidates import Problem

# Communication per program (GB/s) and the link's ceiling per rank (GB/s). one_shot reads remote tiles (its
# communication alone on 14 programs moved a 4864 x 4096 bf16 partial in 0.176 ms: ~16 GB/s per program),
# all_scatter stores them (no reply to wait for), all_reduce adds them atomically. all_gather_gemm's pushes of A's
# rows: 40 MB in 0.58 ms from 12 programs, 0.16 ms from 132 (4864 x 4096 x 8256 on 2 x H200); gemm_reduce_scatter's
# atomic adds: 20 MB in 0.24 ms from 8 programs.
PER_PROGRAM_GBS = {"one_shot": 16.0, "all_scatter": 22.0, "all_reduce": 14.0, "all_gather_gemm": 6.0,
                   "gemm_reduce_scatter": 10.0}
LINK_GBS = {"one_shot": 300.0, "all_scatter": 360.0, "all_reduce": 300.0, "all_gather_gemm": 250.0,
            "gemm_reduce_scatter": 300.0}
# The same work from a GEMM program's epilogue (fused_sequential), which stalls that program: all_reduce 0.477 ms
# against a 0.242 ms GEMM at 4864 x 4096 x 8256 on 2 x H200 (~2.6 GB/s per program, its own C included);
# all_scatter 0.272 ms (~5 GB/s).
EPILOGUE_GBS = {"all_reduce": 2.6, "all_scatter": 5.0, "gemm_reduce_scatter": 2.6}
# Communication programs inside the fused kernel run with the GEMM's warps and registers: one_shot's reads were
# ~10% slower there than in two_streams' kernel of their own (1.24-1.27x its bound against 1.09-1.15x).
FUSED_COMM_EFFICIENCY = {"one_shot": 0.7}
LOCAL_GBS = 3000.0  # device memory, for the share of the communication that stays on this rank
STEP_US = {"sync": 6.0, "launch": 3.0, "two_streams": 5.0}  # peer barrier; a second kernel; the stream fork
COMM_RESERVES = (4, 8, 12, 16, 20, 24, 32, 48)  # SMs tried for communication in the modes that split the SMs
# copy_engine: peer copies by the copy engines (~395 GB/s one way between 2 H200s over NVLink, no SM), local
# device-to-device copies, and the bands the schedule cuts a region into (overlap.copy_steps.BANDS)
CE_PEER_GBS = 390.0
CE_LOCAL_GBS = 1500.0
CE_BANDS = 8
CE_OP_US = 1.5  # the device's cost of one stream operation (a wait, a copy's start)
# What the copy-engine steps measured beyond this model on 2 x H200 (0.10-0.15 ms at 4864 x 4096 x 8256, 8192^3,
# 16384 x 8192 x 8192 and 8192 x 8192 x 28672, one wait per tile row, no graph): the GEMM slowed by the copies'
# memory traffic, the last copies.
CE_FIXED_MS = 0.1


def comm_rate(p: Problem, programs: int, efficiency: float = 1.0) -> float:
    """Bytes per ms that `programs` communication programs move to or from peers."""
    if programs <= 0:
        return 1e-9
    return min(LINK_GBS[p.algorithm], programs * PER_PROGRAM_GBS[p.algorithm] * efficiency) * 1e6


def sync_ms(p: Problem) -> float:
    """The end-of-step peer barrier."""
    return STEP_US["sync"] / 1e3 if p.world_size > 1 else 0.0


def local_ms(p: Problem) -> float:
    """The share of the communication that stays on this rank, at device-memory speed."""
    return p.bytes_moved()[1] / (LOCAL_GBS * 1e6)
