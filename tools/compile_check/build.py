"""Compile one launch spec for one target without a GPU, as Triton's JIT would at that launch, and read what the
kernel uses.

Specialisation is Triton's own: the binder the JIT generates for the kernel's signature (argument values ->
types, constexprs, alignment / divisibility attributes, with the target backend's rules) and JITFunction's
packing of it into a signature, constexprs and attributes for `triton.compile(ASTSource(...))`. The device
functions take the target vendor's code paths (iris_ops.device.set_compile_arch).

Results are cached under Triton's own cache key (Triton version, kernel source with everything it calls, target,
options, cache-invalidating environment), plus the vendor code path and this module's RESULT_VERSION, so a kernel
is compiled again exactly when something that shapes its code changed.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import subprocess
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamk_pgas.tools.compile_check.resources import Usage, occupancy, parse_amdgcn, parse_ptxas_log
from streamk_pgas.tools.compile_check.spec import LaunchSpec, named_constexprs
from streamk_pgas.tools.compile_check.targets import BuildTarget

RESULT_VERSION = 3  # bump when what a cached result holds changes


@dataclass
class Build:
    """A spec specialised for a target: what triton.compile takes, and the cache key."""

    src: Any  # triton.compiler.ASTSource
    options: dict[str, Any]
    key: str
    forbid: tuple[tuple[str, str], ...] = ()  # the spec's forbidden assembly patterns
    constexprs: dict[str, str] = field(default_factory=dict)  # what the JIT made compile-time, by name


def specialise(spec: LaunchSpec, target: BuildTarget) -> Build:
    """Signature, constexprs and attributes of `spec` on `target`, derived from its argument values by the JIT's
    own binder; the key under which its result is cached."""
    from triton.compiler import ASTSource, make_backend
    from triton.compiler.compiler import get_cache_invalidating_env_vars
    from triton.runtime.cache import get_cache_key
    from triton.runtime.jit import create_function_from_signature

    kernel = spec.kernel
    backend = make_backend(target.gpu_target())
    binder = create_function_from_signature(kernel.signature, kernel.params, backend)
    bound, specialization, options = binder(**spec.args, **spec.options)
    parsed, signature, constexprs, attrs = kernel._pack_args(backend, dict(spec.options), bound, specialization,
                                                             options)
    src = ASTSource(kernel, signature, constexprs, attrs)
    key = get_cache_key(src, backend, parsed, env_vars=get_cache_invalidating_env_vars())
    key += f"-vendor{target.vendor_code}-result{RESULT_VERSION}-forbid{spec.forbid!r}"
    return Build(src, dict(parsed.__dict__), hashlib.sha256(key.encode()).hexdigest(), tuple(spec.forbid),
                 named_constexprs(kernel, spec.args, constexprs))


def _ptxas(target: BuildTarget) -> str:
    from triton.backends.nvidia.compiler import get_ptxas

    return get_ptxas(target.arch).path


def _ptxas_log(ptx: str, target: BuildTarget) -> str:
    """`ptxas -v` on the kernel's PTX (when Triton took the cubin from its cache, so its own log was not seen)."""
    from triton.backends.nvidia.compiler import sm_arch_from_capability

    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "k.ptx"
        src.write_text(ptx)
        out = subprocess.run([_ptxas(target), "-v", f"--gpu-name={sm_arch_from_capability(target.arch)}", str(src),
                              "-o", str(Path(d) / "k.cubin")], capture_output=True, text=True, check=True)
    return out.stdout + out.stderr


def usage_of(compiled: Any, target: BuildTarget, ptxas_log: str) -> Usage:
    """What a compiled kernel uses (see resources.py)."""
    md = compiled.metadata
    u = Usage(num_warps=md.num_warps, shared=int(md.shared))
    if target.amd:
        fields = parse_amdgcn(compiled.asm["amdgcn"])
    else:
        if "bytes spill stores" not in ptxas_log:
            ptxas_log = _ptxas_log(compiled.asm["ptx"], target)
        fields = parse_ptxas_log(ptxas_log)
    for name, value in fields.items():
        setattr(u, name, value)
    return u


def compile_build(build: Build, target: BuildTarget) -> tuple[Usage, float, list[str]]:
    """triton.compile for the target; its resource usage, the seconds it took, and why each forbidden pattern
    that its assembly matches is forbidden."""
    import triton
    from triton import knobs

    from streamk_pgas.iris_ops import device

    device.set_compile_arch(target.vendor_code)
    log = io.StringIO()
    t0 = time.perf_counter()
    if target.amd:
        compiled = triton.compile(build.src, target=target.gpu_target(), options=build.options)
    else:
        # Triton runs `ptxas -v` itself and prints its log when asked to: keep it rather than run ptxas again
        with knobs.nvidia.scope(), contextlib.redirect_stdout(log):
            knobs.nvidia.dump_ptxas_log = True
            compiled = triton.compile(build.src, target=target.gpu_target(), options=build.options)
    seconds = time.perf_counter() - t0
    asm = compiled.asm["amdgcn" if target.amd else "ptx"]
    found = [f"{why}: {m.group(0).strip()}" for pattern, why in build.forbid if (m := re.search(pattern, asm, re.M))]
    return usage_of(compiled, target, log.getvalue()), seconds, found


def check_fit(u: Usage, target: BuildTarget) -> str | None:
    """Why a program of this kernel cannot run on the target (None: it can)."""
    if u.shared > target.shared_per_program:
        return f"needs {u.shared} bytes of {'LDS' if target.amd else 'shared memory'}, the {target.unit} has " \
               f"{target.shared_per_program}"
    if occupancy(target, u)[0] < 1:
        return f"does not fit one {target.unit} ({occupancy(target, u)[1]})"
    return None


def _compiled(build: Build, target: BuildTarget, cache_dir: Path | None) -> dict[str, Any]:
    """The compiler's facts of a build (usage and seconds, or the error), from the cache when they are there."""
    path = cache_dir / f"{build.key}.json" if cache_dir is not None else None
    if path is not None and path.exists():
        try:
            return {**json.loads(path.read_text()), "cached": True}
        except (OSError, json.JSONDecodeError):
            pass
    try:
        u, seconds, forbidden = compile_build(build, target)
    except Exception as exc:  # a kernel that does not compile is a result, reported with the others
        lines = [x for x in traceback.format_exception_only(type(exc), exc) if x.strip()]
        return {"status": "error", "error": " ".join(" ".join(lines).split())[:2000], "cached": False}
    facts = {"status": "ok", "usage": u.as_dict(), "compile_s": round(seconds, 2), "forbidden": forbidden}
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(facts))
        tmp.replace(path)
    return {**facts, "cached": False}


def result_for(build: Build, target: BuildTarget, cache_dir: Path | None) -> dict[str, Any]:
    """The build's result: the compiler's facts (compile_s, usage; or the error) and what follows from them on the
    target (spills, programs per unit and what limits it, why it cannot run there)."""
    facts = _compiled(build, target, cache_dir)
    if facts["status"] != "ok":
        return facts
    u = Usage(**facts["usage"])
    programs, limiter = occupancy(target, u)
    return {**facts, "spills": u.spills, "programs_per_unit": programs, "occupancy_limit": limiter,
            "unfit": check_fit(u, target)}
