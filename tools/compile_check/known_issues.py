"""Failures of default configurations that the check reports but does not fail on, each with its reason and bound.

Each entry names builds of the GEMM's config tables (stream_k/configs.py, tuned by the GEMM's owner) or of the op's
kernels as the planner configures them, as measured with the Triton CI installs. A spill (bytes of spill stores
on NVIDIA, of scratch on AMD) above an entry's bound, shared memory above its bound, or a spill or overflow in a
build no entry names, fails the check; delete an entry once its builds are right. Other Triton versions differ
(the H100/H200s run 3.6: the README's Targets section has its numbers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SM90_TABLE = "sm_100 takes sm_90's table (stream_k/configs.py), not tuned for B200"
_POINTER = ("int8 and fp32 go through pointers by default (stream_k.select.default_tma); the NVIDIA tables' int8 "
            "128x256x128 and fp32 128x128x32 tiles spill there: with a ragged K (the masked last K block beside the "
            "accumulator) or in the fix-up")
_ONE_SHOT = ("one_shot's reduction at world 8 (overlap/communication/one_shot.py, two ranks' loads of a sub-tile in "
             "flight at a time, the sub-tiles of a tile unrolled): the NVIDIA builds spill a little, AMD's do not")
_RS_EPILOGUE = ("gemm_reduce_scatter fused_sequential adds the finished 128x256 tile into its owners' rows from the "
                "GEMM program's epilogue (overlap/communication/reduce_scatter.py: a column quarter at a time, "
                "atomics in a loop over the owners); sm_90 spills 8 B there")
_ERROR_WAITS = ("the waits that give up once any rank recorded an error (iris_ops.device.wait_or_error: the error "
                "word read beside the flag) keep a few more registers live in the fused kernels, at the edge of the "
                "register file already")
_UNALIGNED = ("the stand-alone GEMM on a caller's contiguous rows that are not a multiple of 16 elements (no "
              "vectorised loads; the op pads such rows)")


@dataclass(frozen=True)
class KnownIssue:
    target: str
    config: str  # a regular expression the build's config label matches in full
    why: str
    spill_bytes: int = 0  # bytes of spill stores allowed
    shared_bytes: int = 0  # shared memory allowed although it exceeds what a program may have (cannot launch)


KNOWN_ISSUES: tuple[KnownIssue, ...] = (
    KnownIssue("sm90", r"(int8 128x256x128|fp32 128x128x32)/s3/w8 r[12]( ragged_k)?( NK%16)?( traced)?", _POINTER,
               spill_bytes=256),
    KnownIssue("sm90", r"(int8 128x256x128|fp32 128x128x32)/s3/w8 r[12] ragged_k unaligned NK%16",
               f"{_POINTER}; {_UNALIGNED}", spill_bytes=4 * 1024),
    KnownIssue("sm100", r"(int8 128x256x128|fp32 128x128x32)/s3/w8 r[12]( ragged_k)?( NK%16)?( traced)?",
               f"{_POINTER}; {_SM90_TABLE}", spill_bytes=256),
    KnownIssue("sm100", r"(int8 128x256x128|fp32 128x128x32)/s3/w8 r[12] ragged_k unaligned NK%16",
               f"{_POINTER}; {_UNALIGNED}; {_SM90_TABLE}", spill_bytes=5 * 1024),
    # the op's launches (tools.compile_check.kernels.op_specs)
    *(KnownIssue(t, r"one_shot \w+ world8 bf16( 128x256x64/s3/w8/tma r1 ragged_k)?", _ONE_SHOT, spill_bytes=256)
      for t in ("sm90", "sm100")),
    KnownIssue("sm90", r"one_shot fused world2 bf16 128x256x64/s3/w8/tma r1 ragged_k", _ERROR_WAITS, spill_bytes=32),
    KnownIssue("gfx950", r"all_reduce fused_sequential world2 bf16 256x64x64/s2/w8 r1 ragged_k", _ERROR_WAITS,
               spill_bytes=16),
    *(KnownIssue(t, r"gemm_reduce_scatter fused_sequential world\d+ bf16 128x256x64/s3/w8/tma r[12] ragged_k",
                 _RS_EPILOGUE, spill_bytes=64) for t in ("sm90", "sm100")),
)


def known_issue(target: str, config: str, spill_bytes: int, shared_bytes: int) -> KnownIssue | None:
    """The entry that accepts a build's spill stores and its shared memory beyond the target's limit (0 for none
    of either), if one does."""
    for k in KNOWN_ISSUES:
        if (k.target == target and re.fullmatch(k.config, config) and spill_bytes <= k.spill_bytes
                and shared_bytes <= k.shared_bytes):
            return k
    return None
