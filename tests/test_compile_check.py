"""tools.compile_check, the compile check for GPU targets, on the CPU: a few small kernels compiled for one AMD and
one NVIDIA target through the command line (table, JSON, cache), a kernel that does not compile (exit 1, one line
per failure), bad flags (exit 2, one line), and the pure parts in-process (the compilers' reports, occupancy, the
failure rules). The check itself runs in CI (.ci/run) for every kernel and target."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import REPO_ROOT

from streamk_pgas.tools.compile_check import known_issues
from streamk_pgas.tools.compile_check.known_issues import KNOWN_ISSUES, KnownIssue, known_issue
from streamk_pgas.tools.compile_check.report import Row, failure_lines
from streamk_pgas.tools.compile_check.resources import Usage, occupancy, parse_amdgcn, parse_ptxas_log
from streamk_pgas.tools.compile_check.spec import LaunchSpec
from streamk_pgas.tools.compile_check.targets import TARGETS


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)  # the kernels are compiled, not interpreted
    env["PYTHONPATH"] = str(REPO_ROOT)
    return env


def _run(args: list[str], timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=REPO_ROOT, env=_env(), capture_output=True, text=True,
                          timeout=timeout)


def test_small_kernels_for_an_amd_and_an_nvidia_target(tmp_path: Path) -> None:
    out, cache = tmp_path / "check.json", tmp_path / "cache"
    args = ["-m", "tools.compile_check", "--targets", "gfx942,sm90", "--groups", "timer,barrier", "--json", str(out),
            "--cache", str(cache), "--jobs", "1"]
    r = _run(args)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "gfx942 (MI300X, 304 CUs, wave 64)" in r.stdout and "sm90 (H100/H200, 132 SMs, warp 32)" in r.stdout
    assert "VGPR" in r.stdout and "spill st/ld" in r.stdout
    doc = json.loads(out.read_text())
    assert doc["failures"] == [] and set(doc["targets"]) == {"gfx942", "sm90"}
    for name, target in doc["targets"].items():
        builds = target["builds"]
        kernels = {b["kernel"] for b in builds}
        assert kernels == {"timer_probe", "device_barrier_kernel"}
        for b in builds:
            assert b["status"] == "ok" and b["failure"] is None and not b["spills"], b
            u = b["usage"]
            assert u["registers"] > 0 and b["programs_per_unit"] >= 1
            if name == "gfx942":
                assert {"sgprs", "vgpr_spills", "sgpr_spills", "scratch"} <= set(u)
                # waves per SIMD from the VGPR count, as LLVM itself works them out for the kernel
                assert min(8, 512 // -(-u["registers"] // 8 * 8)) == u["llvm_waves_per_simd"]
            else:
                assert {"spill_stores", "spill_loads", "scratch"} <= set(u)
        # each vendor's own timer: s_memrealtime on AMD (kind 2), %globaltimer on NVIDIA (kind 1), beside the logical
        assert {b["config"] for b in builds if b["kernel"] == "timer_probe"} == (
            {"kind 2", "kind 0"} if name == "gfx942" else {"kind 1", "kind 0"})
    again = _run(args)
    assert again.returncode == 0 and ", 0 compiled," in again.stdout  # every result from the cache


BROKEN = '''
import os
import sys

os.environ["TRITON_INTERPRET"] = "0"

import torch
import triton
import triton.language as tl

from streamk_pgas.tools.compile_check import kernels
from streamk_pgas.tools.compile_check.cli import main
from streamk_pgas.tools.compile_check.spec import LaunchSpec


@triton.jit
def broken_kernel(X, BLOCK: tl.constexpr):
    x = tl.load(X + tl.arange(0, BLOCK))
    tl.store(X + tl.arange(0, BLOCK), undefined_function(x))  # noqa: F821


def broken(target):
    yield LaunchSpec("broken_kernel", "fp32", broken_kernel, {"X": torch.zeros(16), "BLOCK": 16}, {"num_warps": 1})


kernels.GROUPS["broken"] = broken
sys.exit(main(sys.argv[1:]))
'''


def test_a_kernel_that_does_not_compile_fails_with_one_line_per_failure(tmp_path: Path) -> None:
    script = tmp_path / "broken_check.py"
    script.write_text(textwrap.dedent(BROKEN))
    out = tmp_path / "check.json"
    r = _run([str(script), "--targets", "gfx942,sm100", "--groups", "broken,timer", "--json", str(out), "--no_cache",
              "--jobs", "2"])
    assert r.returncode == 1, r.stdout + r.stderr
    fails = [line for line in r.stderr.splitlines() if line.startswith("FAIL ")]
    assert len(fails) == 2, r.stderr
    for target, line in zip(("gfx942", "sm100"), fails):
        assert line.startswith(f"FAIL {target} broken_kernel [fp32]: does not compile:")
        assert "undefined_function" in line
    doc = json.loads(out.read_text())
    assert len(doc["failures"]) == 2
    assert all(b["failure"] is None for t in doc["targets"].values() for b in t["builds"]
               if b["kernel"] == "timer_probe")


@pytest.mark.parametrize(("flag", "value"), [("--targets", "gfx942,gfx1100"), ("--groups", "gemm,ops"),
                                             ("--jobs", "0")])
def test_bad_flag_is_one_line_and_exit_2(flag: str, value: str) -> None:
    r = _run(["-m", "tools.compile_check", flag, value, "--list"], timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and flag in r.stderr, r.stderr


def test_every_launch_specialises_on_every_target() -> None:
    r = _run(["-m", "tools.compile_check", "--list"], timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    for target in TARGETS:
        assert f"{target} " in r.stdout
    assert "streamk_gemm_kernel" in r.stdout and "atomic_probe" in r.stdout and "overlap_kernel" in r.stdout
    for target in ("gfx942", "gfx950"):
        assert f"{target:7} not built (the target cannot run it): all_scatter copy_engine: " in r.stdout
    assert "sm90    not built" not in r.stdout and "ce_start_kernel" in r.stdout


PTXAS = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'streamk_gemm_kernel' for 'sm_90a'
ptxas info    : Function properties for streamk_gemm_kernel
    160 bytes stack frame, 164 bytes spill stores, 208 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 160 bytes cumulative stack size
"""

AMDGCN = """; NumVgprs: 154
; Occupancy: 3
	.amdgpu_metadata
---
amdhsa.kernels:
  - .agpr_count:     0
    .group_segment_fixed_size: 0
    .private_segment_fixed_size: 0
    .sgpr_count:     75
    .sgpr_spill_count: 2
    .vgpr_count:     154
    .vgpr_spill_count: 0
    .wavefront_size: 64
...
	.end_amdgpu_metadata
"""


def test_the_compilers_reports_are_read() -> None:
    assert parse_ptxas_log(PTXAS) == {"registers": 255, "scratch": 160, "spill_stores": 164, "spill_loads": 208}
    assert parse_amdgcn(AMDGCN) == {"registers": 154, "agprs": 0, "sgprs": 75, "vgpr_spills": 0, "sgpr_spills": 2,
                                    "scratch": 0, "llvm_waves_per_simd": 3}
    with pytest.raises(ValueError):
        parse_ptxas_log("ptxas fatal")
    with pytest.raises(ValueError):
        parse_amdgcn("s_endpgm")


def test_occupancy() -> None:
    gfx942, sm90 = TARGETS["gfx942"], TARGETS["sm90"]
    # 154 VGPRs: 3 waves per SIMD, 12 per CU, one 8-wave program; 40 KiB of LDS of 64 would allow one as well
    assert occupancy(gfx942, Usage(num_warps=8, shared=40960, registers=154, sgprs=75)) == (1, "regs")
    assert occupancy(gfx942, Usage(num_warps=1, shared=0, registers=10, sgprs=28)) == (32, "regs")
    assert occupancy(gfx942, Usage(num_warps=4, shared=48 * 1024, registers=64))[0] == 1
    assert occupancy(sm90, Usage(num_warps=8, shared=147456, registers=255)) == (1, "regs")
    assert occupancy(sm90, Usage(num_warps=4, shared=64 * 1024, registers=128)) == (3, "shared")
    assert occupancy(sm90, Usage(num_warps=1, shared=0, registers=24)) == (32, "programs")
    assert Usage(num_warps=8, shared=0, registers=200, vgpr_spills=0, sgpr_spills=5, scratch=0).spills is False
    assert Usage(num_warps=8, shared=0, registers=256, vgpr_spills=3, sgpr_spills=0, scratch=32).spills is True
    assert Usage(num_warps=8, shared=0, registers=255, spill_stores=4, spill_loads=4, scratch=8).spills is True


def _row(target: str, config: str, result: dict, default: bool = True) -> Row:
    spec = LaunchSpec("streamk_gemm_kernel", config, None, {}, {}, default=default)
    return Row(TARGETS[target], [spec], result=result)


def test_failure_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    def spilling(n: int) -> dict:
        return {"status": "ok", "spills": True, "usage": {"spill_stores": n, "spill_loads": n}, "unfit": None}

    # a known issue: the builds its pattern names, within its bound (this test's own entry, not the real list)
    monkeypatch.setattr(known_issues, "KNOWN_ISSUES", (
        KnownIssue("sm90", r"one_shot fused world8 bf16 128x256x64/s3/w8/tma r1 ragged_k", "a test's reason",
                   spill_bytes=108),))
    assert _row("sm90", "bf16 128x128x64/s4/w8/tma r1", spilling(500)).failure().startswith(
        "a default configuration spills")
    assert _row("sm90", "bf16 128x128x64/s4/w8 r1", spilling(500), default=False).failure() is None
    one_shot = "one_shot fused world8 bf16 128x256x64/s3/w8/tma r1 ragged_k"
    assert _row("sm90", one_shot, spilling(108)).failure() is None  # known, in bound
    assert _row("sm90", one_shot, spilling(4096)).failure() is not None  # above it
    assert _row("sm90", one_shot.replace("world8", "world2"), spilling(108)).failure() is not None  # not named
    assert _row("sm100", one_shot, spilling(108)).failure() is not None  # another target
    assert _row("gfx942", "x", {"status": "error", "error": "boom"}).failure() == "does not compile: boom"
    unfit = {"status": "ok", "spills": False, "usage": {"shared": 70000}, "unfit": "needs 70000 bytes of LDS, the CU "
             "has 65536"}
    assert _row("gfx942", "y", unfit, default=False).failure() is None  # reported, outside the defaults
    rows = [_row("gfx942", "y", unfit)]
    assert failure_lines(rows) == ["gfx942 streamk_gemm_kernel [y]: needs 70000 bytes of LDS, the CU has 65536"]
    too_big = {"status": "ok", "spills": False, "usage": {"shared": 262144}, "unfit": "needs 262144 bytes"}
    assert _row("sm100", "int8 128x256x128/s3/w8/tma r1", too_big).failure() == "needs 262144 bytes"
    assert _row("sm100", "int8 128x256x128/s3/w8/tma r1", too_big, default=False).failure() is None
    forbidden = {"status": "ok", "spills": False, "usage": {}, "unfit": None, "forbidden": ["a buffer op: buffer_x"]}
    assert _row("gfx950", "z", forbidden, default=False).failure() == "a buffer op: buffer_x"
    # AMD: any scratch in a default build fails
    def scratch(n: int) -> dict:
        return {"status": "ok", "spills": True, "usage": {"vgpr_spills": 128, "scratch": n}, "unfit": None}

    amd = "one_shot fused world8 bf16 256x64x64/s2/w8 r1 ragged_k"
    assert _row("gfx942", amd, scratch(352)).failure() == "a default configuration spills (128 VGPRs, 352 bytes of " \
                                                          "scratch)"


def test_known_issues_name_the_op_alone_with_a_reason_and_a_bound() -> None:
    """The real list: every entry has a target of the check, a reason and a bound; the GEMM's own defaults have
    none (they must not spill at all), nor has AMD."""
    import re

    assert all(any(re.fullmatch(k.target, t) for t in TARGETS) and k.why and (k.spill_bytes or k.shared_bytes)
               for k in KNOWN_ISSUES)
    for dtype in ("bf16", "fp16", "fp32", "int8"):
        assert known_issue("sm90", f"{dtype} 128x128x32/s4/w8 r1 ragged_k unaligned NK%16", 1, 0) is None
    assert not any(re.fullmatch(k.target, t) for k in KNOWN_ISSUES for t in TARGETS if t.startswith("gfx"))
    assert all(k.spill_bytes <= 24 for k in KNOWN_ISSUES)  # a few words, never a tile's worth
