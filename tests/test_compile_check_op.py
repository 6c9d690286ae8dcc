"""The compile check's op launches, on the CPU (nothing compiled): the planner, on a faked MI300X (304 CUs, gfx942)
and a faked H100/H200 (132 SMs, sm_90), plans every algorithm x mode the target runs at world sizes 2 and 8, and
the check's op group specialises to exactly the builds (kernel, constexprs, signature, options) of the launches
those ops make; the modes a target cannot run are reported as not built."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO_ROOT

from streamk_pgas import spec
from streamk_pgas.overlap.config import InvalidConfig
from streamk_pgas.overlap.listing import ListingHeap, every_mode, op_for
from streamk_pgas.overlap.op import OverlapOp
from streamk_pgas.stream_k.kernel_args import unwrapped
from streamk_pgas.tools.compile_check.build import Build, specialise
from streamk_pgas.tools.compile_check.cli import collect
from streamk_pgas.tools.compile_check.kernels import OP_DATATYPE, OP_SHAPE, OP_WORLDS, not_built
from streamk_pgas.tools.compile_check.spec import LaunchSpec
from streamk_pgas.tools.compile_check.targets import TARGETS

GEMM_BEARING = {"streamk_gemm_kernel", "overlap_kernel"}


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The planner reads no tuning cache but its own (empty): the model's choices."""
    monkeypatch.setenv("STREAMK_PGAS_TUNING_CACHE", str(tmp_path / "tuning.json"))


def _runnable(target: spec.Target) -> list[tuple[str, str]]:
    return [(alg, mode) for alg, mode, why in every_mode(target) if why is None]


def test_the_planner_plans_every_mode_a_faked_mi300x_runs() -> None:
    mi300x = spec.known_target("mi300x")
    modes = {(alg, mode): why for alg, mode, why in every_mode(mi300x)}
    assert len(modes) == sum(len(a.modes) for a in spec.ALGORITHMS.values())
    refused = {am for am, why in modes.items() if why is not None}
    assert refused == {(a, "copy_engine") for a, alg in spec.ALGORITHMS.items() if alg.has_mode("copy_engine")}
    for alg, mode in refused:
        with pytest.raises(InvalidConfig, match="NVIDIA-only"):
            OverlapOp.create(ListingHeap(2), alg, *OP_SHAPE, OP_DATATYPE, mode, target=mi300x)
    m, n, k = OP_SHAPE
    for alg, mode in _runnable(mi300x):
        for world in (2, 8):
            op = op_for(alg, mode, m, n, k, OP_DATATYPE, mi300x, world_size=world)
            cfg = op.cfg
            assert (cfg.mode, cfg.total_sms, cfg.kernel.BLK_M, cfg.kernel.tma) == (mode, 304, 256, False), (alg, mode)
            launches = [*op.launches("step"), *op.preload_launches()]
            assert launches and all(1 <= x.programs <= 304 for x in launches)
            gemm = [x for x in launches if x.name in GEMM_BEARING]
            assert len(gemm) == 1, (alg, mode, [x.name for x in launches])
            args, options = gemm[0].args, gemm[0].options
            tiling = unwrapped(args["TILING"])
            assert (tiling["BLK_M"], tiling["BLK_N"], tiling["BLK_K"]) == (cfg.kernel.BLK_M, cfg.kernel.BLK_N,
                                                                           cfg.kernel.BLK_K)
            # AMD's launch options, as the op's own launch on an MI300X passes them
            assert {"waves_per_eu", "matrix_instr_nonkdim", "kpack"} <= set(options)
        # mode auto plans only modes the target runs
        auto = op_for(alg, "auto", m, n, k, OP_DATATYPE, mi300x, world_size=2)
        assert modes[(alg, auto.cfg.mode)] is None


def _build_set(builds: list[Build]) -> set[tuple[str, tuple, str]]:
    """Each build as its kernel, constexprs by name and signature."""
    return {(b.src.fn.__name__, tuple(sorted(b.constexprs.items())), repr(sorted(b.src.signature.items())))
            for b in builds}


def check_builds(target_name: str) -> None:
    """The op group's builds on a target against the launches the ops make, specialised one by one."""
    target = TARGETS[target_name]
    m, n, k = OP_SHAPE
    want, keys, uses = [], set(), set()
    for alg, mode in _runnable(target.device):
        for world in OP_WORLDS[target_name]:
            op = op_for(alg, mode, m, n, k, OP_DATATYPE, target.device, world_size=world)
            for launch in [*op.launches("step"), *op.preload_launches()]:
                build = specialise(LaunchSpec.of(launch, config="", group=""), target)
                want.append(build)
                keys.add(build.key)
                uses.add((alg, mode, world))
    rows, broken = collect([target], ["op"])
    assert broken == []
    assert {r.build.key for r in rows} == keys  # the same compilations, each once
    assert len(rows) == len(keys) and _build_set([r.build for r in rows]) == _build_set(want)
    assert {tuple(s.use.split()[:3]) for r in rows for s in r.specs} == {(a, md, f"w{w}") for a, md, w in uses}
    kernels = {r.head.name for r in rows}
    base = {"streamk_gemm_kernel", "overlap_kernel", "comm_kernel", "announce_kernel"}
    if target.amd:
        assert kernels == base
        assert not_built(target, ["op"]) == [
            f"{a} copy_engine: copy_engine is NVIDIA-only for now (HIP's stream wait-value path is not built)"
            for a, alg in spec.ALGORITHMS.items() if alg.has_mode("copy_engine")]
        assert not any("copy_engine" in s.use for r in rows for s in r.specs)
    else:
        # copy_engine: its step protocol, and gemm_reduce_scatter's sum of the slots after the copies
        assert kernels == base | {"ce_start_kernel", "ce_finish_kernel", "sum_slots_kernel"}
        assert not_built(target, ["op"]) == []
    # world 1 is the GEMM alone: the stand-alone GEMM kernel, one build for every mode
    alone = [r for r in rows if any(" w1 " in s.use for s in r.specs)]
    assert [r.head.name for r in alone] == ["streamk_gemm_kernel"]


@pytest.mark.parametrize("target_name", ["gfx942", "sm90"])
def test_the_check_builds_exactly_what_the_op_launches(target_name: str, tmp_path: Path) -> None:
    # in a process of its own: specialising needs the JIT's kernels, not the interpreter's (TRITON_INTERPRET=1)
    env = {**os.environ, "TRITON_INTERPRET": "0"}  # unset, a machine without a GPU would choose the interpreter
    env.update(PYTHONPATH=str(REPO_ROOT), STREAMK_PGAS_TUNING_CACHE=str(tmp_path / "tuning.json"))
    r = subprocess.run([sys.executable, __file__, target_name], cwd=REPO_ROOT, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


if __name__ == "__main__":
    check_builds(sys.argv[1])
