"""The GPUs the compile check builds for, and the per-unit limits their occupancy follows.

Each is a device the library plans for (spec.KNOWN_TARGETS: its arch, SMs / CUs and shared memory per program, the
planner's own facts). Limits are the vendors' published figures: NVIDIA's occupancy calculator (65,536 32-bit
registers per SM, allocated per warp in units of 256; at most 64 warps and 32 blocks per SM; 228 KiB of shared
memory per SM, at most 227 KiB per block, 1 KiB of it reserved per block) and AMD's CDNA3 / CDNA4 ISA guides (4
SIMDs per CU; 512 vector registers per lane of a SIMD shared by the arch VGPRs and AGPRs of its waves, allocated in
units of 8; at most 8 waves per SIMD; 800 scalar registers per SIMD, in units of 16; 64 KiB of LDS per CU on CDNA3,
160 KiB on CDNA4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamk_pgas import spec
from streamk_pgas.spec import KNOWN_TARGETS


@dataclass(frozen=True)
class BuildTarget:
    """One GPU target: the device the library plans for (a spec.KNOWN_TARGETS entry: its arch, SMs / CUs, shared
    memory per program) and what a program may use of one SM / CU."""

    device: spec.Target
    label: str  # the GPUs it stands for
    shared_per_unit: int  # bytes of shared memory / LDS per SM / CU
    # NVIDIA
    regs_per_unit: int = 65536
    max_warps_per_unit: int = 64
    max_programs_per_unit: int = 32
    shared_reserved_per_program: int = 0
    # AMD
    simds_per_unit: int = 4
    vgprs_per_simd_lane: int = 512
    vgpr_granule: int = 8
    sgprs_per_simd: int = 800
    sgpr_granule: int = 16
    max_waves_per_simd: int = 8

    @property
    def name(self) -> str:
        """The check's name for it: the arch as stream_k.configs.current_arch names it ("gfx942", "sm90", ...)."""
        return self.device.arch

    @property
    def backend(self) -> str:
        """Triton backend: "cuda" or "hip"."""
        return self.device.backend

    @property
    def arch(self) -> int | str:
        """GPUTarget.arch: compute capability (90) or gfx name."""
        return self.device.capability if self.backend == "cuda" else self.device.arch

    @property
    def warp_size(self) -> int:
        return 64 if self.amd else 32

    @property
    def units(self) -> int:
        """SMs or CUs: the persistent GEMM's default program count."""
        return self.device.sms

    @property
    def tma(self) -> bool:
        """Tensor descriptors are loaded by a copy engine (NVIDIA sm_90+)."""
        return self.device.tma

    @property
    def shared_per_program(self) -> int:
        """The most shared memory / LDS one program may use."""
        return self.device.shared_mem

    @property
    def amd(self) -> bool:
        return self.backend == "hip"

    @property
    def unit(self) -> str:
        return "CU" if self.amd else "SM"

    @property
    def vendor_code(self) -> int:
        """iris_ops.device.ARCH's code of the vendor (1 NVIDIA, 2 AMD)."""
        return 2 if self.amd else 1

    def gpu_target(self) -> Any:
        from triton.backends.compiler import GPUTarget

        return GPUTarget(self.backend, self.arch, self.warp_size)

    def describe(self) -> str:
        lanes = "wave" if self.amd else "warp"
        return f"{self.name} ({self.label}, {self.units} {self.unit}s, {lanes} {self.warp_size})"


_NV = {"shared_per_unit": 228 * 1024, "shared_reserved_per_program": 1024}
TARGETS: dict[str, BuildTarget] = {
    t.name: t
    for t in (
        BuildTarget(KNOWN_TARGETS["mi300x"], "MI300X", 64 * 1024),
        BuildTarget(KNOWN_TARGETS["mi355x"], "MI355X", 160 * 1024),
        BuildTarget(KNOWN_TARGETS["h200"], "H100/H200", **_NV),
        BuildTarget(KNOWN_TARGETS["b200"], "B200", **_NV),
    )
}
