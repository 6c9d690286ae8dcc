"""Ahead-of-time compile of the overlap kernels for a GPU target, without a GPU.

    python -m overlap.aot [--arch 90] [--datatype bf16] [--algorithms ...] [--modes ...]

For every algorithm x mode it compiles the kernel(s) the mode launches with the default GPU
configuration and prints registers, spills and shared memory, so compile errors and spills show
up before any device time is spent. Run it with the Triton the target machine has (a virtual
environment with that triton version installed; triton compiles for a GPU target without a GPU).
The constexpr flags below mirror what overlap.op builds for each mode.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import triton
import triton.language as tl

import iris_ops.device as device
from overlap.algorithms import ALGORITHMS
from overlap.kernels import comm_kernel, overlap_kernel
from overlap.planner import MODES
from stream_k.aot import compile_for_target
from stream_k.configs import default_config

_ELEM = {"bf16": "bf16", "fp16": "fp16", "fp32": "fp32", "int8": "i8"}
_OUT = {"bf16": "bf16", "fp16": "fp16", "fp32": "fp32", "int8": "i32"}
_RUNTIME_INTS = {"sk_tiles", "max_spins", "cur_rank", "world_size", "gemm_programs", "comm_programs", "step_programs",
                 "zero_programs", "claim_rotate", "a_rows", "stride_lm", "stride_gm", "c_elems"}


def compile_mode(algorithm: str, mode: str, datatype: str, arch: int, trace: bool, tma: bool = False,
                 world_size: int = 2, sk_first: bool = False, sk_rounds: int = 1
                 ) -> dict[str, dict[str, Any]]:
    device._ARCH = tl.constexpr(1)  # the NVIDIA code paths, though no GPU is present
    cfg = default_config(datatype, f"sm{arch}")
    e, o = _ELEM[datatype], _OUT[datatype]
    acc = "i32" if datatype == "int8" else "fp32"
    alg = ALGORITHMS[algorithm]
    seq = mode == "fused_sequential"
    comm_ptrs = {"SRC": f"*{o}", "DST": f"*{o}", "READY": "*i32", "CTRL": "*i32", "heap_bases": "*i64",
                 "ERRORS": "*i32", "CLOCK": "*i64"}
    comm_const: dict[str, Any] = {
        "stride_sn": 1, "stride_dn": 1, "TILE_FN": alg.tile_fn,
        "READY_SCOPE": "sys" if alg.ready_from_every_rank else "gpu", "READY_SOURCES": alg.ready_sources(world_size),
        "BLK_M": cfg.BLK_M, "BLK_N": cfg.BLK_N, "GSIZE_M": cfg.gsize_m, "CTM": cfg.BLK_M,
        "CTN": cfg.BLK_N, "TIMER": device.TIMER_GLOBALTIMER, "world_size": world_size,
        "ZERO_C": alg.zeroes_c, "ANNOUNCE": alg.writes_peers and not alg.zeroes_c, "WAITS_ARRIVED": alg.writes_peers,
        "CLAIM_TILES": mode != "bulk_sync", "PEER_SYNC": True,
        "stride_lk": 1, "stride_gk": 1, "GATHER_A": alg.gathers_a, "GATHER_RM": min(cfg.BLK_M, 32),
        "GATHER_KB": min(cfg.BLK_N, 128),
    }
    if alg.gathers_a:  # all_gather_gemm: this rank's A rows, the gathered A and its row-ready words
        comm_ptrs.update(A_LOCAL=f"*{e}", AG=f"*{e}", A_READY="*i32")
    else:  # the op passes None for the gather's buffers (A_LOCAL: this rank's A, unused)
        comm_ptrs["A_LOCAL"] = f"*{e}"
        comm_const.update(AG=None, A_READY=None)
    if trace:
        comm_ptrs["COMM_TRACE"] = "*i64"
    else:
        comm_const["COMM_TRACE"] = None
    out: dict[str, dict[str, Any]] = {}
    gemm_ptrs = {"A": f"*{e}", "B": f"*{e}", "C": f"*{o}", "P": f"*{acc}", "LOCKS": "*i32", "TILE_FLAGS": "*i32"}
    if tma:
        gemm_ptrs["A"] = f"tensordesc<{e}[{cfg.BLK_M}, {cfg.BLK_K}]>"
        gemm_ptrs["B"] = f"tensordesc<{e}[{cfg.BLK_K}, {cfg.BLK_N}]>"
        gemm_ptrs["P_DESC"] = f"tensordesc<{acc}[{cfg.BLK_M}, {cfg.BLK_N // 2}]>"
    join = (mode in ("fused", "two_streams") or (seq and alg.push_epilogue is None)) and not alg.gathers_a
    comm_in_kernel = mode == "fused"
    epilogue = alg.push_epilogue if seq and alg.push_epilogue is not None else alg.epilogue
    gemm_const = {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1, "BLK_K": cfg.BLK_K, "EVEN_K": True,
                  "EPILOGUE": epilogue,
                  "INPUT_PRECISION": cfg.input_precision if datatype == "fp32" else None,
                  "NUM_XCDS": 1, "USE_TMA": tma, "SK_FIRST": sk_first, "SK_ROUNDS": sk_rounds,
                  "COMM_AFTER_GEMM": join, "GEMM_WAITS_ARRIVED": seq and alg.writes_peers,
                  "WAITS_ARRIVED": alg.writes_peers and (comm_in_kernel or join),
                  "ZERO_C": alg.zeroes_c and comm_in_kernel, "CLAIM_TILES": join or comm_in_kernel,
                  "GEMM_SCOPE": "sys" if join or alg.gemm_writes_peers(seq, world_size) else "gpu",
                  "GATHER_A": alg.gathers_a and comm_in_kernel, "GEMM_GATHERS": seq and alg.gathers_a,
                  "GEMM_WAITS_A": alg.gathers_a}
    if not tma:
        gemm_const["P_DESC"] = None
    if trace:
        gemm_ptrs["GEMM_TRACE"] = "*i64"
    else:
        gemm_const["GEMM_TRACE"] = None
    kernel_ptrs = {k: v for k, v in {**gemm_ptrs, **comm_ptrs}.items() if k in overlap_kernel.arg_names}
    kernel_const = {k: v for k, v in {**comm_const, **gemm_const}.items() if k in overlap_kernel.arg_names}
    out["overlap_kernel"] = compile_for_target(overlap_kernel, kernel_ptrs, kernel_const, _RUNTIME_INTS, arch,
                                               cfg.num_warps, cfg.num_stages)
    if mode in ("bulk_sync", "two_streams"):
        out["comm_kernel"] = compile_for_target(comm_kernel, comm_ptrs, comm_const, _RUNTIME_INTS, arch, 8, 1)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--datatype", default="bf16")
    ap.add_argument("--algorithms", default=",".join(ALGORITHMS))
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--trace", action="store_true")
    ap.add_argument("--tma", action="store_true", help="the GEMM loads A and B through tensor descriptors")
    ap.add_argument("--world_size", type=int, default=2)
    ap.add_argument("--sk_first", action="store_true", help="the GEMM runs its Stream-K share first")
    ap.add_argument("--sk_rounds", type=int, default=1, help="Stream-K rounds (plan.round_bounds)")
    args = ap.parse_args(argv)
    print(f"triton {triton.__version__}, sm_{args.arch}, {args.datatype}, trace={args.trace}, tma={args.tma}, "
          f"world_size={args.world_size}, sk_rounds={args.sk_rounds}")
    print(f"{'algorithm':12} {'mode':17} {'kernel':15} {'regs':>5} {'spill st/ld':>12} {'shared':>8}")
    status = 0
    for alg in args.algorithms.split(","):
        for mode in args.modes.split(","):
            try:
                kernels = compile_mode(alg, mode, args.datatype, args.arch, args.trace, args.tma, args.world_size,
                                       args.sk_first, args.sk_rounds)
            except Exception as exc:  # report and go on: one table for every combination
                print(f"{alg:12} {mode:17} FAILED: {type(exc).__name__}: {str(exc)[:400]}")
                status = 1
                continue
            for name, u in kernels.items():
                print(f"{alg:12} {mode:17} {name:15} {u['registers']:>5} "
                      f"{u['spill_stores']:>5}/{u['spill_loads']:<6} {u['shared']:>8}")
    return status


if __name__ == "__main__":
    sys.exit(main())
