"""Ahead-of-time compile of the Stream-K kernel for a GPU target, without a GPU: registers, spills, shared memory.

    python -m stream_k.aot [--arch 90] [--dtypes bf16,fp16,fp32,int8] [--trace]

Run it with the Triton that the target machine uses (3.6 on the H200s), from a virtual environment that has it.
Arguments are specialised as Triton's JIT would for large aligned shapes (row-major A, B, C; every
pointer, M, N, K and leading stride divisible by 16; unit strides constant), so the code is the code
the benchmark runs. `--trace` also turns on tile flags and the per-tile trace (the fused-kernel case).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import triton
import triton.language as tl

import iris_ops.device as device
from stream_k.configs import KernelConfig, default_config
from stream_k.gemm import c_store_columns
from stream_k.kernel import store_and_signal, store_tma_and_signal, streamk_gemm_kernel

_PTR = {"bf16": "*bf16", "fp16": "*fp16", "fp32": "*fp32", "int8": "*i8"}
_OUT = {"bf16": "*bf16", "fp16": "*fp16", "fp32": "*fp32", "int8": "*i32"}
_NOT_SPECIALISED = {"sk_tiles", "epoch", "max_spins",
                    "cur_rank", "world_size"}


def _tool(name: str) -> str:
    """A CUDA binary tool shipped with Triton (cuobjdump, ptxas)."""
    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name)


def compile_kernel(dtype_name: str, cfg: KernelConfig, arch: int = 90, trace: bool = False,
                   even_k: bool = True, sk_rounds: int = 1) -> dict[str, Any]:
    """Compile streamk_gemm_kernel for sm_<arch>; return registers, spills, shared bytes and the compiled kernel."""
    device._ARCH = tl.constexpr(1)  # compile the NVIDIA paths (acquire loads) though no GPU is present
    fn = streamk_gemm_kernel
    ptr_args = {"A": _PTR[dtype_name], "B": _PTR[dtype_name], "C": _OUT[dtype_name],
                "P": "*i32" if dtype_name == "int8" else "*fp32", "LOCKS": "*i32", "CLOCK": "*i64",
                "ERRORS": "*i32"}
    constexprs: dict[str, Any] = {
        "stride_ak": 1, "stride_bn": 1, "stride_cn": 1,
        "BLK_M": cfg.BLK_M, "BLK_N": cfg.BLK_N, "BLK_K": cfg.BLK_K, "GSIZE_M": cfg.gsize_m,
        "EVEN_K": even_k, "EPILOGUE": store_and_signal,
        "TIMER": device.TIMER_GLOBALTIMER if trace else device.TIMER_LOGICAL,
        "INPUT_PRECISION": cfg.input_precision if dtype_name == "fp32" else None,
        "NUM_XCDS": 1, "USE_TMA": cfg.tma, "SK_FIRST": False, "SK_ROUNDS": sk_rounds,
        "REDUCE_LOADS": cfg.reduce_loads,
    }
    if cfg.tma:
        elem = _PTR[dtype_name][1:]
        ptr_args["A"] = f"tensordesc<{elem}[{cfg.BLK_M}, {cfg.BLK_K}]>"
        ptr_args["B"] = f"tensordesc<{elem}[{cfg.BLK_K}, {cfg.BLK_N}]>"
        ptr_args["P_DESC"] = f"tensordesc<{'i32' if dtype_name == 'int8' else 'fp32'}[{cfg.BLK_M}, {cfg.BLK_N // 2}]>"
        if not trace:  # the stand-alone launch: C stored by the copy engine
            elem = 1 if dtype_name == "int8" else (4 if dtype_name == "fp32" else 2)
            cols = c_store_columns(cfg.BLK_M, cfg.BLK_N, 4 if dtype_name == "int8" else elem)
            ptr_args["C"] = f"tensordesc<{_OUT[dtype_name][1:]}[{cfg.BLK_M}, {cols}]>"
            constexprs["EPILOGUE"] = store_tma_and_signal
    else:
        constexprs["P_DESC"] = None
    ptr_args["LAUNCHES"] = "*i64"  # the device-counted epoch (StreamKGemm's default launch)
    if trace:
        ptr_args.update({"TILE_FLAGS": "*i32", "GEMM_TRACE": "*i64", "heap_bases": "*i64"})
    else:
        constexprs.update({"TILE_FLAGS": None, "GEMM_TRACE": None, "heap_bases": None})
    usage = compile_for_target(fn, ptr_args, constexprs, _NOT_SPECIALISED, arch, cfg.num_warps, cfg.num_stages)
    usage["wgmma"] = "wgmma" in usage["compiled"].asm.get("ptx", "")
    return usage


def compile_for_target(fn: Any, ptr_types: dict[str, str], constexprs: dict[str, Any], runtime_ints: set[str],
                       arch: int, num_warps: int, num_stages: int) -> dict[str, Any]:
    """Compile a @triton.jit kernel for sm_<arch> as Triton's JIT would specialise it for large aligned
    arguments (pointers and ints divisible by 16, except `runtime_ints`); registers, spills, shared bytes."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature: dict[str, str] = {}
    attrs: dict[tuple[int], list[list[Any]]] = {}
    for i, name in enumerate(fn.arg_names):
        if name in constexprs:
            signature[name] = "constexpr"
        elif name in ptr_types:
            signature[name] = ptr_types[name]
            if ptr_types[name].startswith("*"):
                attrs[(i,)] = [["tt.divisibility", 16]]
        else:
            signature[name] = "i32"
            if name not in runtime_ints:
                attrs[(i,)] = [["tt.divisibility", 16]]
    src = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    compiled = triton.compile(src, target=GPUTarget("cuda", arch, 32),
                              options={"num_warps": num_warps, "num_stages": num_stages})
    usage = resource_usage_of_cubin(compiled.asm["cubin"])
    usage.update(spills_of_ptx(compiled.asm["ptx"], arch))
    usage["shared"] = compiled.metadata.shared
    usage["compiled"] = compiled
    return usage


def resource_usage_of_cubin(cubin: bytes) -> dict[str, Any]:
    """Registers, stack and local bytes of a cubin, read with cuobjdump."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([_tool("cuobjdump"), "--dump-resource-usage", f.name], capture_output=True, text=True,
                              check=True).stdout
    regs = re.search(r"REG:(\d+)", text)
    stack = re.search(r"STACK:(\d+)", text)
    local = re.search(r"LOCAL:(\d+)", text)
    return {
        "registers": int(regs.group(1)) if regs else None,
        "stack": int(stack.group(1)) if stack else None,
        "local": int(local.group(1)) if local else None,
        "raw": text.strip(),
    }


def spills_of_ptx(ptx: str, arch: int) -> dict[str, int]:
    """Spill stores / loads in bytes, from `ptxas -v` on the kernel's PTX (cuobjdump does not report them)."""
    gpu = f"sm_{arch}a" if arch >= 90 else f"sm_{arch}"
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "k.ptx"
        src.write_text(ptx)
        out = subprocess.run([_tool("ptxas"), f"-arch={gpu}", "-v", str(src), "-o", str(Path(d) / "k.cubin")],
                             capture_output=True, text=True, check=True)
    text = out.stdout + out.stderr
    st = re.search(r"(\d+) bytes spill stores", text)
    ld = re.search(r"(\d+) bytes spill loads", text)
    return {"spill_stores": int(st.group(1)) if st else 0, "spill_loads": int(ld.group(1)) if ld else 0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", type=int, default=90, help="CUDA compute capability, e.g. 90 or 80")
    ap.add_argument("--dtypes", default="bf16,fp16,fp32,int8")
    ap.add_argument("--trace", action="store_true", help="tile flags and trace on")
    ap.add_argument("--ragged_k", action="store_true", help="EVEN_K=False (peeled masked last K block)")
    ap.add_argument("--tma", action="store_true", help="tensor-descriptor loads (KernelConfig.tma)")
    ap.add_argument("--sk_rounds", type=int, default=1, help="Stream-K rounds (plan.round_bounds)")
    args = ap.parse_args(argv)
    print(f"triton {triton.__version__}, sm_{args.arch}, trace={args.trace}, even_k={not args.ragged_k}, "
          f"sk_rounds={args.sk_rounds}")
    print(f"{'dtype':6} {'config':28} {'regs':>5} {'spill st/ld':>12} {'stack':>6} {'shared':>8} wgmma")
    worst = 0
    for name in args.dtypes.split(","):
        cfg = default_config(name, f"sm{args.arch}").replace(tma=args.tma)
        u = compile_kernel(name, cfg, args.arch, args.trace, even_k=not args.ragged_k, sk_rounds=args.sk_rounds)
        desc = f"{cfg.BLK_M}x{cfg.BLK_N}x{cfg.BLK_K} s{cfg.num_stages} w{cfg.num_warps}"
        print(f"{name:6} {desc:28} {u['registers']:>5} {u['spill_stores']:>5}/{u['spill_loads']:<6} "
              f"{u['stack']:>6} {u['shared']:>8} {u['wgmma']}")
        if u["shared"] > 227 * 1024 or (u["spill_stores"] or 0) > 0:
            worst = 1
    return worst


if __name__ == "__main__":
    sys.exit(main())
