"""What a compiled kernel uses of one SM / CU, read from the compiler's own reports, and the occupancy that follows.

NVIDIA: `ptxas -v` (registers per thread, stack frame, spill stores / loads in bytes). AMD: the AMDGPU metadata
that LLVM writes into the kernel's assembly and code object (`.vgpr_count`, `.agpr_count`, `.sgpr_count`,
`.vgpr_spill_count`, `.sgpr_spill_count`, `.private_segment_fixed_size`: scratch bytes per lane) and its
`; Occupancy:` remark (waves per SIMD). Shared memory / LDS is Triton's (metadata.shared: it allocates it
dynamically, so the code object's static size is 0).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from streamk_pgas.tools.compile_check.targets import BuildTarget


@dataclass
class Usage:
    """Resources of one compiled kernel (None: not reported by this vendor's compiler)."""

    num_warps: int
    shared: int  # bytes of shared memory / LDS per program
    registers: int | None = None  # NVIDIA registers per thread; AMD VGPRs per lane (arch and AGPRs together)
    agprs: int | None = None  # AMD: the AGPRs among them
    sgprs: int | None = None
    spill_stores: int | None = None  # NVIDIA: bytes
    spill_loads: int | None = None
    vgpr_spills: int | None = None  # AMD: registers
    sgpr_spills: int | None = None
    scratch: int | None = None  # NVIDIA stack frame / AMD private segment, bytes per thread
    llvm_waves_per_simd: int | None = None  # AMD: LLVM's own occupancy remark

    @property
    def spills(self) -> bool:
        """Registers go to memory: NVIDIA spill stores / loads; AMD VGPR spills or scratch (SGPRs spill into VGPR
        lanes first, which costs no memory traffic: reported, not counted, unless they reach scratch)."""
        if self.vgpr_spills is not None:  # AMD
            return bool(self.vgpr_spills or self.scratch)
        return bool(self.spill_stores or self.spill_loads)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


def parse_ptxas_log(text: str) -> dict[str, int]:
    """registers, scratch (stack frame), spill_stores, spill_loads from `ptxas -v` output (one kernel)."""
    out: dict[str, int] = {}
    for key, pattern in (("registers", r"Used (\d+) registers"), ("scratch", r"(\d+) bytes stack frame"),
                         ("spill_stores", r"(\d+) bytes spill stores"), ("spill_loads", r"(\d+) bytes spill loads")):
        m = re.search(pattern, text)
        if m:
            out[key] = int(m.group(1))
    if "registers" not in out:
        raise ValueError(f"no register count in the ptxas log: {text.strip()[:300]!r}")
    return out


_AMD_FIELDS = {"vgpr_count": "registers", "agpr_count": "agprs", "sgpr_count": "sgprs",
               "vgpr_spill_count": "vgpr_spills", "sgpr_spill_count": "sgpr_spills",
               "private_segment_fixed_size": "scratch"}


def parse_amdgcn(asm: str) -> dict[str, int]:
    """The kernel's AMDGPU metadata (the `.amdgpu_metadata` block of its assembly) and LLVM's occupancy remark."""
    block = re.search(r"^\s*\.amdgpu_metadata\s*$(.*?)^\s*\.end_amdgpu_metadata", asm, re.S | re.M)
    if block is None:
        raise ValueError("no .amdgpu_metadata block in the AMDGCN assembly")
    out: dict[str, int] = {}
    for field, name in _AMD_FIELDS.items():
        m = re.search(rf"^[\s-]*\.{field}:\s+(\d+)\s*$", block.group(1), re.M)
        if m:
            out[name] = int(m.group(1))
    if "registers" not in out:
        raise ValueError("no .vgpr_count in the AMDGPU metadata")
    occ = re.search(r"^; Occupancy: (\d+)", asm, re.M)
    if occ:
        out["llvm_waves_per_simd"] = int(occ.group(1))
    return out


def _up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def occupancy(target: BuildTarget, u: Usage) -> tuple[int, str]:
    """Programs one SM / CU holds at once, and what limits it ("regs", "sgprs", "shared", "warps", "programs")."""
    limits: dict[str, int] = {}
    if target.amd:
        # waves per SIMD that each resource allows; a program's waves spread over the CU's SIMDs
        vgprs = _up(max(1, u.registers or 0), target.vgpr_granule)  # .vgpr_count: arch VGPRs and AGPRs together
        per_simd = {"regs": target.vgprs_per_simd_lane // vgprs, "waves": target.max_waves_per_simd}
        if u.sgprs:
            per_simd["sgprs"] = target.sgprs_per_simd // _up(u.sgprs, target.sgpr_granule)
        limits = {k: min(v, target.max_waves_per_simd) * target.simds_per_unit // u.num_warps
                  for k, v in per_simd.items()}
    else:
        regs_per_warp = _up(_up(max(1, u.registers or 0), 8) * target.warp_size, 256)
        limits["regs"] = (target.regs_per_unit // regs_per_warp) // u.num_warps
        limits["warps"] = target.max_warps_per_unit // u.num_warps
        limits["programs"] = target.max_programs_per_unit
    if u.shared:
        limits["shared"] = target.shared_per_unit // (u.shared + target.shared_reserved_per_program)
    which = min(limits, key=lambda k: limits[k])
    return limits[which], which
