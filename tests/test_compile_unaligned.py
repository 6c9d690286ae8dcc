"""An unaligned shape of the model grid, compiled for sm_90 without a GPU: at 1000 x 3000 x 2500 on 4 ranks (N = 3000
not a multiple of 16) the step kernel of every algorithm that moves C's tiles builds without spilling. Their moves
mask columns at the buffers' padded row width (Move.n_cols), not at N, which would split their 16-element vectors
and cost registers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO_ROOT

SHAPE = (1000, 3000, 2500)
CASES = (("all_reduce", "fused"), ("one_shot", "fused"), ("gemm_reduce_scatter", "fused"), ("all_scatter", "fused"))


def spills(algorithm: str, mode: str) -> list[tuple[str, int, int]]:
    """(kernel, spill stores, spill loads) of the step's GEMM-bearing launches, built for sm_90."""
    from streamk_pgas.overlap.listing import every_launch, op_for
    from streamk_pgas.tools.compile_check.build import compile_build, specialise
    from streamk_pgas.tools.compile_check.spec import LaunchSpec
    from streamk_pgas.tools.compile_check.targets import TARGETS

    target = TARGETS["sm90"]
    op = op_for(algorithm, mode, *SHAPE, "bf16", target.device, world_size=4)
    out = []
    for _, launch in every_launch(op, ("step",)):
        if "TILING" in launch.args:
            usage, _, _ = compile_build(specialise(LaunchSpec.of(launch, config="unaligned", group="op"), target),
                                        target)
            out.append((launch.kernel.fn.__name__, usage.spill_stores or 0, usage.spill_loads or 0))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("algorithm,mode", CASES)
def test_unaligned_step_builds_without_spills(algorithm: str, mode: str, tmp_path: Path) -> None:
    # in a process of its own: building needs the JIT's kernels, not the interpreter's (TRITON_INTERPRET=1)
    env = {**os.environ, "TRITON_INTERPRET": "0", "TRITON_DEFAULT_FP_FUSION": "1", "PYTHONPATH": str(REPO_ROOT),
           "STREAMK_PGAS_TUNING_CACHE": str(tmp_path / "tuning.json"), "TRITON_CACHE_DIR": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, __file__, algorithm, mode], cwd=REPO_ROOT, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    built = [line.split() for line in r.stdout.splitlines() if line.startswith("BUILT ")]
    assert built and all(int(stores) == 0 and int(loads) == 0 for _, _, stores, loads in built), r.stdout


if __name__ == "__main__":
    for name, stores, loads in spills(sys.argv[1], sys.argv[2]):
        print(f"BUILT {name} {stores} {loads}")
