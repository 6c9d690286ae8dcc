"""The device a problem is planned and built for. `target_from_properties` turns a device's properties into one
(overlap.target reads them from torch for a live device); `KNOWN_TARGETS` names devices that need not be present,
so the op can be planned and its launches listed for them on any machine (e.g. an MI300X on the CPU)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    name: str  # e.g. "NVIDIA H200"; "interpreter" on the CPU
    backend: str  # "cuda", "hip" or "interpreter"
    arch: str  # "sm90", "sm80", "gfx942", ... or "interpreter"
    sms: int  # SMs (CUs); the interpreter's default program count
    shared_mem: int = 0  # bytes of shared memory a program may use (0: not known)
    memory: int = 0  # bytes of device memory (0: not known)

    @property
    def interpreted(self) -> bool:
        """Triton's CPU interpreter: programs run one after another, any number of them."""
        return self.backend == "interpreter"

    @property
    def tma(self) -> bool:
        """The tensor-memory accelerator (tensor descriptors): NVIDIA sm_90 and newer."""
        return self.backend == "cuda" and sm90_or_newer(self.arch)

    @property
    def capability(self) -> int:
        """NVIDIA compute capability as major * 10 + minor (90 on Hopper); 0 elsewhere."""
        return _sm(self.arch) if self.backend == "cuda" else 0

    @property
    def max_programs(self) -> int:
        """Programs one launch may have: all must be resident at once (they wait on each other)."""
        return 1024 if self.interpreted else self.sms


def _sm(arch: str) -> int:
    return int(arch[2:]) if arch.startswith("sm") and arch[2:].isdigit() else 0


def sm90_or_newer(arch: str) -> bool:
    """An NVIDIA arch name ("sm90", "sm100") of compute capability 9.0 or newer: TMA and Hopper's tables."""
    return _sm(arch) >= 90


def target_from_properties(name: str, *, hip: bool, major: int = 0, minor: int = 0, gcn_arch: str = "",
                           sms: int, shared_mem: int = 0, memory: int = 0) -> Target:
    """A live device's target from its properties (torch.cuda.get_device_properties's fields)."""
    if hip:
        return Target(name, "hip", (gcn_arch or "gfx").split(":")[0], sms, shared_mem, memory)
    return Target(name, "cuda", f"sm{major}{minor}", sms, shared_mem, memory)


INTERPRETER = Target("interpreter", "interpreter", "interpreter", 4, 1 << 30, 0)
KNOWN_TARGETS: dict[str, Target] = {
    "h100": Target("NVIDIA H100 80GB HBM3", "cuda", "sm90", 132, 232448, 80 << 30),
    "h200": Target("NVIDIA H200", "cuda", "sm90", 132, 232448, 141 << 30),
    "a100": Target("NVIDIA A100-SXM4-80GB", "cuda", "sm80", 108, 166912, 80 << 30),
    "mi300x": Target("AMD Instinct MI300X", "hip", "gfx942", 304, 65536, 192 << 30),
    "mi355x": Target("AMD Instinct MI355X", "hip", "gfx950", 256, 163840, 288 << 30),
    "b200": Target("NVIDIA B200", "cuda", "sm100", 148, 232448, 180 << 30),
    "interpreter": INTERPRETER,
}


def known_target(name: str) -> Target:
    if name not in KNOWN_TARGETS:
        raise ValueError(f"target must be one of {', '.join(KNOWN_TARGETS)}; got {name!r}")
    return KNOWN_TARGETS[name]
