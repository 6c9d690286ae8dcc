"""How long a run takes in Triton's interpreter, said before it starts: the interpreter runs a GEMM block (one
BLK_M x BLK_N x BLK_K step of one tile) in about a millisecond of Python, whatever the block's size, so 16384^3 takes
hours a step where 48^3 takes a tenth of a second.

    seconds = interpreter_seconds(cfg, world_size)      # the whole run, rough
    line = interpreter_note(cfg, world_size)            # a note when it is long (None otherwise)
"""

from __future__ import annotations

import math
from typing import Any

from streamk_pgas import spec

# Measured on a 2-core CPU machine (Triton 3.9, one rank, fp32, 32 x 32 x 16 blocks): 64^3 70 ms a step (16 blocks),
# 128^3 220 ms (128 blocks), 256^3 1.06 s (1024 blocks): about 50 ms a step plus 1 ms a block.
STEP_S = 0.05
BLOCK_S = 1e-3
NOTE_ABOVE_S = 60.0  # a run expected to take longer than this gets a note


def steps(cfg: Any, world_size: int) -> int:
    """The steps a run launches: validation (1 isolated + --validate_iters back to back), timing (isolated, back-to-back
    loops, host cost, and with communication the overlap bound's two parts), the traced step."""
    if not cfg.validate and not cfg.benchmark:
        return 1 + (2 if cfg.trace_tiles else 0)
    n = 1 + cfg.validate_iters if cfg.validate else 0
    if cfg.benchmark:
        n += cfg.warmup + cfg.iters + cfg.warmup + 5 * cfg.iters + min(cfg.iters, 100)
        if spec.MODES[cfg.mode].overlapped and world_size > 1:
            n += 2 * (cfg.warmup + cfg.iters)
    return n + (2 if cfg.trace_tiles else 0)


def interpreter_seconds(cfg: Any, world_size: int) -> float:
    """Rough seconds of the whole run in the interpreter, on one core per rank."""
    kc = cfg.op.kernel
    m, n, k = spec.ALGORITHMS[cfg.algorithm].family.gemm_shape(cfg.m, cfg.n, cfg.k, world_size)
    blocks = math.ceil(m / kc.BLK_M) * math.ceil(n / kc.BLK_N) * math.ceil(k / kc.BLK_K)
    return steps(cfg, world_size) * (STEP_S + BLOCK_S * blocks)


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} days"


def interpreter_note(cfg: Any, world_size: int) -> str | None:
    """One line for a run the interpreter will take long over (NOTE_ABOVE_S), else None."""
    seconds = interpreter_seconds(cfg, world_size)
    if seconds <= NOTE_ABOVE_S:
        return None
    per_step = seconds / steps(cfg, world_size)
    return (f"note: Triton's interpreter runs a GEMM block in about {BLOCK_S * 1e3:g} ms of CPU: {cfg.m}x{cfg.n}x"
            f"{cfg.k} takes about {duration(per_step)} a step here, so this run ({steps(cfg, world_size)} steps) about "
            f"{duration(seconds)}, more where ranks share a core; pass a smaller -m/-n/-k for a run of seconds")
