"""A launch spec: one kernel launch as the code makes it (kernel, argument values, options, grid), not run.

The compile check derives everything Triton needs (signature, constexprs, specialisation attributes) from the
argument values, as Triton's JIT does at a launch, so a kernel whose parameters change needs no edit here.
CPU tensors stand in for device ones: the JIT looks only at their dtype, alignment and size.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class LaunchSpec:
    """kernel[grid](**args, **options), described.

    name: the kernel's row label; config: what distinguishes this build (tile, datatype, variant); use: where the
    launch comes from (a shape and schedule, an operation); group: the family the check reports it under.
    default: the configuration the library picks by default (a spill there fails the check).
    forbid: (regular expression, why) pairs that must not match the kernel's assembly (AMDGCN or PTX)."""

    name: str
    config: str
    kernel: Any
    args: Mapping[str, Any]
    options: Mapping[str, Any]
    grid: tuple[int, ...] = (1,)
    group: str = ""
    use: str = ""
    default: bool = True
    extra: Mapping[str, Any] = field(default_factory=dict)  # facts for the report (plan, config fields)
    forbid: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, launch: Any, *, config: str, group: str, use: str = "", default: bool = True,
           name: str | None = None, extra: Mapping[str, Any] | None = None) -> LaunchSpec:
        """From a bound launch (stream_k.launch.BoundLaunch, or anything with kernel, programs, args, options)."""
        programs = launch.programs
        grid = tuple(programs) if isinstance(programs, tuple) else (int(programs),)
        return cls(name or launch.kernel.fn.__name__, config, launch.kernel, dict(launch.args), dict(launch.options),
                   grid, group, use, default, dict(extra or {}))


def describe_constexpr(value: Any) -> str:
    """A compile-time value as the report shows it: a kernel or function by its name, anything else by repr
    (tl.constexpr unwrapped)."""
    inner = getattr(value, "value", value) if type(value).__name__ == "constexpr" else value
    fn = getattr(inner, "fn", inner)  # a JIT or interpreted function: its Python function
    name = getattr(fn, "__qualname__", None) if callable(fn) else None
    return name if isinstance(name, str) else repr(inner)


def named_constexprs(kernel: Any, args: Mapping[str, Any], paths: Mapping[tuple[int, ...], Any]) -> dict[str, str]:
    """Triton's constexprs of a build ({argument path: value}, the path indexing the kernel's parameters, then a
    tuple's elements) by name: "BLK_M", "STEP_FLAGS.COMM" (a named tuple's field), "T[1]"."""
    names = [p.name for p in kernel.params]
    out: dict[str, str] = {}
    for path, value in paths.items():
        name, arg = names[path[0]], args.get(names[path[0]])
        for i in path[1:]:
            fields = getattr(arg, "_fields", None)
            name += f".{fields[i]}" if fields else f"[{i}]"
            arg = arg[i] if isinstance(arg, tuple) else None
        out[name] = describe_constexpr(value)
    return dict(sorted(out.items()))
