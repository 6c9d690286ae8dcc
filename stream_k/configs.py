"""Default kernel configurations (tile sizes, pipeline depth, warps), the one place they are chosen.

Measured / checked:
- sm_90 (H100/H200) bf16/fp16: 128x256x64, 3 stages, 8 warps reached 0.96-0.99x cuBLAS with an unmasked
  main loop (measured on one H200; masked loads in the main loop ran at 0.44x cuBLAS); 4 stages does not
  fit shared memory.
- sm_90 / sm_100 int8 and fp32 (through pointers, stream_k.select.default_tma): among the tiles none of whose builds
  in the compile check (tools/compile_check, Triton 3.9: ragged K, a caller's rows that are not a multiple of 16
  elements, traced, 1 and 2 Stream-K rounds) spills on sm_90 or sm_100, the fastest on one H200 (tools.gemm_sweep,
  4 shapes; the runs: results/README.md). int8 128x128x32, 4 stages, 8 warps: 168-250
  registers; 0.84-1.03x cuBLAS, as fast as the spilling 128x256x128 or faster (1.9x at 256x8192x4096, 4.5x at 3000^3).
  Spilling (worst build): 128x256x128 (4 KB), 128x256x64 (1.8 KB), 128x256x32 (740 B), 128x128x128 (1.7 KB),
  128x128x64 (540 B), 64x128x128 on 4 warps (4.7 KB), mostly on the unaligned rows. fp32 128x64x32, 3 stages, 8
  warps: 106-194 registers; geomean 0.79x cuBLAS (128x128x16 / 2 stages 0.67x, 128x64x32 / 4 stages 0.79x; the
  spilling 128x128x32 / 3 stages 0.87x). Spilling: 128x128x32 (140-350 B), 128x128x16 with 3 stages (108 B),
  128x64x64 (28 B), 64x128x32 and 128x64x32 on 4 warps (600-830 B). Both read one partial at a time in the Stream-K
  fix-up (max_reduce_loads 1): the rule's count spilled up to 216 B.
- The Stream-K fix-up's order (fixup_by_half, off everywhere): summing one column half over every piece, then the
  other, brings sm_90's 128x256 builds from 253-255 registers to 233-250 (Triton 3.9; no spill in any world of the
  op, also with Triton 3.6 except gemm_reduce_scatter fused_sequential) and validated in the GPU tests, but with it
  all_gather_gemm's copy_engine step on two ranks sharing one H200 hung in 4 tries of 4 (without it: 3 of 3 passed;
  cause not found). On sm_100 the same order spills 256 B in most of the op's 128x256 builds.
- "interpreter": small tiles so Triton's CPU interpreter finishes quickly.
- int8 needs BLK_K >= 32 (tl.dot's minimum K for 8-bit inputs on NVIDIA).
- AMD CDNA3 / CDNA4 (gfx942 MI300X, gfx950 MI355X): Iris's own Stream-K GEMM examples on MI300X (256x64x64
  tiles, 2 stages, 8 warps, waves_per_eu 0, matrix_instr_nonkdim 16, kpack 1, group height 6, the XCD remap over
  8 XCDs). Wider tiles do not fit this kernel: its fix-up keeps a contributor's partial tile beside the live
  accumulator, and the compile check (tools/compile_check) finds 256x256x64 spilling ~300 VGPRs and 256x128x64
  ~45 on gfx942 and gfx950, while 256x64x64 takes ~150 VGPRs, 40 KiB of LDS and no scratch. fp32 halves BLK_K
  (256x64x64 fp32 needs 80 KiB of LDS, the CU has 64 KiB on gfx942); int8 keeps BLK_K 64 (with 128 a ragged K
  spills a VGPR on gfx942). Compiled only: not yet run on an AMD GPU.
- sm_80 and older NVIDIA GPUs (_NVIDIA_SM80): not built by the compile check.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from streamk_pgas.iris_ops.env import interpreted
from streamk_pgas.spec import sm90_or_newer


@dataclass(frozen=True)
class KernelConfig:
    """Compile-time choices of the Stream-K kernel.

    input_precision: tl.dot's input_precision for fp32 inputs ("ieee" matches torch.matmul in fp32;
    "tf32" / "tf32x3" trade accuracy for tensor-core speed); ignored for other types.
    num_xcds: AMD chiplet count for the XCD-aware pid remap (1: no remap).
    waves_per_eu, matrix_instr_nonkdim, kpack: AMD launch options, used only on HIP.
    tma: load A and B through tensor descriptors (NVIDIA sm_90+; inputs need a unit last stride and
    16-byte aligned rows). Off by default: the pointer path is the one measured and the one the
    interpreter runs.
    max_reduce_loads: the most partials the Stream-K fix-up reads at once (reduce_loads); a table lowers it where
    the rule's count spills.
    BLK_N: the tile's width, a power of two or 3 or 5 times one (two column blocks: stream_k.tiles.width_parts;
    data-parallel plans with TMA only).
    fixup_by_half: the Stream-K fix-up sums the tile's left column half over every piece, then the right half
    (True), or adds each piece's two halves in turn (False): the same sums; a table picks the order that fits its
    target's registers.
    """

    BLK_M: int = 128
    BLK_N: int = 256
    BLK_K: int = 64
    num_stages: int = 3
    num_warps: int = 8
    gsize_m: int = 8
    input_precision: str = "ieee"
    num_xcds: int = 1
    waves_per_eu: int | None = None
    matrix_instr_nonkdim: int | None = None
    kpack: int | None = None
    tma: bool = False
    max_reduce_loads: int = 8
    fixup_by_half: bool = False

    def replace(self, **changes: Any) -> KernelConfig:
        return replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def reduce_loads(self) -> int:
        """Partials the Stream-K fix-up reads at once: as many half-tile loads as fit beside the tile's two half sums
        in ~160 registers a thread (one for 128 x 256 on 8 warps, three for 64 x 128 on 4, eight for 64 x 64 on 4), and
        no more than max_reduce_loads."""
        regs_per_half = max(1, self.BLK_M * self.BLK_N // 2 // (32 * self.num_warps))
        return max(1, min(self.max_reduce_loads, (160 - 2 * regs_per_half) // regs_per_half))


_NVIDIA_SM90 = {
    "bf16": KernelConfig(128, 256, 64, 3, 8),
    "fp16": KernelConfig(128, 256, 64, 3, 8),
    "fp32": KernelConfig(128, 64, 32, 3, 8, max_reduce_loads=1),
    "int8": KernelConfig(128, 128, 32, 4, 8, max_reduce_loads=1),
}
_NVIDIA_SM80 = {
    "bf16": KernelConfig(128, 128, 64, 3, 8),
    "fp16": KernelConfig(128, 128, 64, 3, 8),
    "fp32": KernelConfig(128, 128, 32, 3, 8),
    "int8": KernelConfig(128, 128, 128, 3, 8),
}
_AMD = {"gsize_m": 6, "num_xcds": 8, "waves_per_eu": 0, "matrix_instr_nonkdim": 16, "kpack": 1}
_AMD_CDNA3 = {  # and CDNA4: the same register file per SIMD lane; nothing here is tuned for gfx950's 160 KiB LDS
    "bf16": KernelConfig(256, 64, 64, 2, 8, **_AMD),
    "fp16": KernelConfig(256, 64, 64, 2, 8, **_AMD),
    "fp32": KernelConfig(256, 64, 32, 2, 8, **_AMD),
    "int8": KernelConfig(256, 64, 64, 2, 8, **_AMD),
}
_INTERPRETER = {name: KernelConfig(32, 32, 32 if name == "int8" else 16, 1, 4)
                for name in ("bf16", "fp16", "fp32", "int8")}


def current_arch() -> str:
    """"interpreter", "sm<major><minor>" (NVIDIA), the gfx name (AMD), or "cpu" without a GPU."""
    if interpreted():
        return "interpreter"
    import torch

    if not torch.cuda.is_available():
        return "cpu"
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    if getattr(torch.version, "hip", None):
        return str(getattr(props, "gcnArchName", "gfx")).split(":")[0]
    return f"sm{props.major}{props.minor}"


def default_config(dtype_name: str, arch: str | None = None) -> KernelConfig:
    """The default KernelConfig for a datatype ("bf16", "fp16", "fp32", "int8") on an arch (see current_arch)."""
    arch = current_arch() if arch is None else arch
    if dtype_name not in _NVIDIA_SM90:
        raise ValueError(f"dtype_name must be one of {', '.join(_NVIDIA_SM90)}; got {dtype_name!r}")
    if arch in ("interpreter", "cpu"):
        table = _INTERPRETER
    elif arch.startswith("gfx9"):
        table = _AMD_CDNA3
    elif sm90_or_newer(arch):
        table = _NVIDIA_SM90
    else:
        table = _NVIDIA_SM80
    return table[dtype_name]
