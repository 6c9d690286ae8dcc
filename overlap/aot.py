"""Ahead-of-time compile of the overlap kernels for an NVIDIA GPU target, without a GPU.

    python -m overlap.aot [--arch 90] [--datatype bf16] [--algorithms ...] [--modes ...] [--trace] [--tma]

For every algorithm x mode it builds the op for the target on a stand-in heap of --world_size ranks
(overlap.listing), lists the kernel launches of one step and compiles each as Triton's JIT would specialise
those very arguments (overlap.listing's values: pointers and integers divisible by 16 get the divisibility
attribute, integers equal to 1 become constants, a tuple's elements likewise), then prints registers, spills and
shared memory, so compile errors and spills show up before any device time is spent. Run it with the Triton the
target machine has (triton compiles for a GPU target without a GPU).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import torch
import triton
import triton.language as tl

import iris_ops.device as device
import spec
from overlap.listing import op_launches
from stream_k.aot import resource_usage_of_cubin, spills_of_ptx
from stream_k.launch import BoundLaunch

_TORCH_TYPES = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32", torch.int8: "i8",
                torch.int32: "i32", torch.int64: "i64", torch.float64: "fp64"}


def _type_of(value: Any, specialize: bool) -> tuple[Any, Any, bool]:
    """(signature type, constexpr value or None, divisible by 16) of one argument value, as Triton's JIT types it.
    A tuple gives a tuple (its namedtuple class kept) of its elements' types."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    if isinstance(value, tl.constexpr):
        return "constexpr", value.value, False
    if value is None or isinstance(value, (bool, str)) or (callable(value) and not isinstance(value, torch.Tensor)):
        return "constexpr", value, False
    if isinstance(value, torch.Tensor):
        return f"*{_TORCH_TYPES[value.dtype]}", None, value.data_ptr() % 16 == 0
    if isinstance(value, TensorDescriptor):
        block = ", ".join(str(x) for x in value.block_shape)
        return f"tensordesc<{_TORCH_TYPES[value.base.dtype]}[{block}]>", None, False
    if isinstance(value, int):
        if specialize and value == 1:
            return "constexpr", 1, False
        return ("i32" if -(2**31) <= value < 2**31 else "i64"), None, specialize and value % 16 == 0
    if isinstance(value, float):
        return "fp32", None, False
    raise TypeError(f"no Triton type for {type(value).__name__}")


def source_of(launch: BoundLaunch) -> Any:
    """The launch as an ASTSource: its signature, constants and attributes from its argument values."""
    from triton.compiler import ASTSource

    kernel = launch.kernel
    signature: dict[str, Any] = {}
    constexprs: dict[tuple[int, ...], Any] = {}
    attrs: dict[tuple[int, ...], list[list[Any]]] = {}
    for i, param in enumerate(kernel.params):
        value = launch.args[param.name]
        if param.is_constexpr:
            signature[param.name] = "constexpr"
            constexprs[(i,)] = value.value if isinstance(value, tl.constexpr) else value
            continue
        if isinstance(value, tuple):
            types = []
            for j, element in enumerate(value):
                ty, const, div = _type_of(element, True)
                types.append(ty)
                if ty == "constexpr":
                    constexprs[(i, j)] = const
                elif div:
                    attrs[(i, j)] = [["tt.divisibility", 16]]
            signature[param.name] = type(value)(*types) if hasattr(value, "_fields") else tuple(types)
            continue
        ty, const, div = _type_of(value, not param.do_not_specialize)
        signature[param.name] = ty
        if ty == "constexpr":
            constexprs[(i,)] = const
        elif div:
            attrs[(i,)] = [["tt.divisibility", 16]]
    return ASTSource(fn=kernel, signature=signature, constexprs=constexprs, attrs=attrs)


def compile_launch(launch: BoundLaunch, arch: int) -> dict[str, Any]:
    """Compile one listed launch for sm_<arch>: registers, spills, shared bytes."""
    from triton.backends.compiler import GPUTarget

    options = {k: v for k, v in launch.options.items() if k in ("num_warps", "num_stages")}
    compiled = triton.compile(source_of(launch), target=GPUTarget("cuda", arch, 32), options=options)
    usage = resource_usage_of_cubin(compiled.asm["cubin"])
    usage.update(spills_of_ptx(compiled.asm["ptx"], arch))
    usage["shared"] = compiled.metadata.shared
    return usage


def compile_mode(algorithm: str, mode: str, datatype: str, arch: int, trace: bool, tma: bool = False,
                 world_size: int = 2, shape: tuple[int, int, int] = (4864, 4096, 8192), **options: Any
                 ) -> dict[str, dict[str, Any]]:
    """Every kernel one step of algorithm x mode launches on sm_<arch>, compiled: name -> resource usage."""
    device._ARCH = tl.constexpr(1)  # the NVIDIA code paths, though no GPU is present
    target = spec.Target(f"sm_{arch}", "cuda", f"sm{arch}", 132, 232448)
    from stream_k.configs import default_config

    kernel = default_config(datatype, target.arch).replace(tma=tma)
    launches = op_launches(algorithm, mode, *shape, datatype, target, world_size=world_size,
                           kind="traced" if trace else "step", kernel=kernel, **options)
    out: dict[str, dict[str, Any]] = {}
    for launch in launches:
        if launch.name not in out:
            out[launch.name] = compile_launch(launch, arch)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--datatype", default="bf16", choices=tuple(spec.DATATYPES))
    ap.add_argument("--algorithms", default=",".join(spec.ALGORITHMS))
    ap.add_argument("--modes", default=",".join(spec.MODES))
    ap.add_argument("--trace", action="store_true")
    ap.add_argument("--tma", action="store_true", help="the GEMM loads A and B through tensor descriptors")
    ap.add_argument("--world_size", type=int, default=2)
    ap.add_argument("--sk_first", action="store_true", help="the GEMM runs its Stream-K share first")
    ap.add_argument("--sk_rounds", type=int, default=1, help="Stream-K rounds (plan.round_bounds)")
    args = ap.parse_args(argv)
    print(f"triton {triton.__version__}, sm_{args.arch}, {args.datatype}, trace={args.trace}, tma={args.tma}, "
          f"world_size={args.world_size}, sk_rounds={args.sk_rounds}")
    print(f"{'algorithm':20} {'mode':17} {'kernel':20} {'regs':>5} {'spill st/ld':>12} {'shared':>8}")
    status = 0
    for alg in args.algorithms.split(","):
        for mode in args.modes.split(","):
            if not spec.ALGORITHMS[alg].has_mode(mode):
                continue
            try:
                kernels = compile_mode(alg, mode, args.datatype, args.arch, args.trace, args.tma, args.world_size,
                                       sk_first=args.sk_first, sk_rounds=args.sk_rounds, schedule="hybrid")
            except Exception as exc:  # report and go on: one table for every combination
                print(f"{alg:20} {mode:17} FAILED: {type(exc).__name__}: {str(exc)[:400]}")
                status = 1
                continue
            for name, u in kernels.items():
                print(f"{alg:20} {mode:17} {name:20} {u['registers']:>5} "
                      f"{u['spill_stores']:>5}/{u['spill_loads']:<6} {u['shared']:>8}")
    return status


if __name__ == "__main__":
    sys.exit(main())
