"""Eight ranks, the size of one NVLink node: every algorithm validates at W = 8 on one small shape (the CPU
interpreter in CI; eight GPUs where the machine has them), and the planner's choices at W = 8 on an H100 and an
H200 for the 4-GPU grid's shapes (no device needed)."""

from __future__ import annotations

import math
import re

import pytest
from conftest import REPO_ROOT, on_gpu, run_mpi

from streamk_pgas import spec
from streamk_pgas.overlap.algorithms.record import reduce_elements_in_flight
from streamk_pgas.overlap.planner import Problem, plan
from streamk_pgas.overlap.rates import COMM_RESERVES

SHAPES = ((128, 8192, 8192), (512, 8192, 28672), (1024, 8192, 8192), (2048, 8192, 8192), (4096, 8192, 28672),
          (4864, 4096, 8256), (8192, 8192, 8192), (16384, 8192, 8192))


@pytest.mark.slow
def test_every_algorithm_validates_on_eight_ranks() -> None:
    """One launch, every algorithm in fused mode (the mode every algorithm has), C validated on every rank after an
    isolated step and a step back to back. 64^3 fp32 in the interpreter (every split dimension divides by 8; 16
    tiles of 16 x 16, so all_reduce's owners are ranks 0-7 twice over)."""
    shape = ["-m", "8192", "-n", "8192", "-k", "8192"] if on_gpu() else ["-m", "64", "-n", "64", "-k", "64",
                                                                        "--datatype", "fp32"]
    result = run_mpi(8, str(REPO_ROOT / "benchmark.py"), "--algorithm", ",".join(spec.ALGORITHMS), "--mode", "fused",
                     *shape, "--validate", "--quiet", timeout=900)
    assert f"PASS: {len(spec.ALGORITHMS)} of {len(spec.ALGORITHMS)} run(s) validated on every rank" in result.stdout, \
        result.stdout[-3000:]
    assert len(re.findall(r"validation passed on every rank", result.stdout)) == len(spec.ALGORITHMS)


@pytest.mark.slow
@pytest.mark.parametrize("pull", ["0", "1"])
def test_copy_engine_on_eight_ranks(pull: str) -> None:
    """The copy engine's schedules at W = 8 (NVIDIA and the CPU backend): all_scatter, all_gather_gemm (its rows
    pushed, or pulled with STREAMK_PGAS_CE_PULL=1) and gemm_reduce_scatter (each rank's GEMM rotated to start at the
    next rank's rows), C validated on every rank."""
    shape = ["-m", "8192", "-n", "8192", "-k", "8192"] if on_gpu() else ["-m", "64", "-n", "64", "-k", "64",
                                                                        "--datatype", "fp32"]
    algorithms = [a for a in spec.ALGORITHMS if spec.ALGORITHMS[a].has_mode("copy_engine")]
    result = run_mpi(8, str(REPO_ROOT / "benchmark.py"), "--algorithm", ",".join(algorithms), "--mode", "copy_engine",
                     *shape, "--validate", "--quiet", timeout=900, env={"STREAMK_PGAS_CE_PULL": pull})
    assert f"PASS: {len(algorithms)} of {len(algorithms)} run(s) validated on every rank" in result.stdout, \
        result.stdout[-3000:]


@pytest.mark.slow
def test_all_gather_gemm_copy_engine_in_columns_on_eight_ranks() -> None:
    """all_gather_gemm's copy engine at W = 8 where K has two GEMM wait segments and a slot is 16 MiB, so it pushes A
    in chunks of columns (overlap.copy_steps.gathers_a_in_columns; the own slot before the GEMM), C validated on every
    rank."""
    from streamk_pgas.overlap.algorithms.all_gather_gemm import a_segment_cols
    from streamk_pgas.overlap.copy_steps import gathers_a_in_columns

    k = 8192
    assert a_segment_cols(k) < k and gathers_a_in_columns(8192, k, 8, 2)
    # on the CPU the slots are small, so STREAMK_PGAS_CE_A_COLUMNS=1 asks for the columns
    dims = ["-m", "8192", "-n", "8192"] if on_gpu() else ["-m", "64", "-n", "64", "--datatype", "fp32"]
    result = run_mpi(8, str(REPO_ROOT / "benchmark.py"), "--algorithm", "all_gather_gemm", "--mode", "copy_engine",
                     *dims, "-k", str(k), "--validate", "--quiet", timeout=900,
                     env=None if on_gpu() else {"STREAMK_PGAS_CE_A_COLUMNS": "1"})
    assert "PASS: 1 of 1 run(s) validated on every rank" in result.stdout, result.stdout[-3000:]


@pytest.mark.parametrize("target", ["h100", "h200"])
def test_planner_at_eight_ranks(target: str) -> None:
    """At W = 8 every algorithm gets a plan the op can run (a mode it has, communication programs from the tried
    reserves, a finite predicted step); the reduce family's sub-tile keeps reduce_elements_in_flight(8) over its
    8 loads, and all_reduce (2(W-1)/W |C| a rank) is predicted faster than one_shot ((W-1)|C|) on every shape."""
    t = spec.KNOWN_TARGETS[target]
    for shape in SHAPES:
        predicted = {}
        for alg in spec.ALGORITHMS:
            c = plan(Problem(alg, *shape, "bf16", 8), t).choice
            assert spec.ALGORITHMS[alg].has_mode(c.mode), (alg, shape, c.describe())
            assert c.total_sms == t.sms and 1 <= c.gemm_sms <= t.sms, c.describe()
            if spec.MODES[c.mode].splits_sms:
                assert t.sms - c.gemm_sms in COMM_RESERVES, c.describe()
            assert math.isfinite(c.predicted_ms) and c.predicted_ms > 0, c.describe()
            if alg in ("all_reduce", "one_shot"):
                k = c.gemm.config
                assert c.comm_tile_m == min(k.BLK_M, max(1, reduce_elements_in_flight(8) // 8 // k.BLK_N)), \
                    c.describe()
            predicted[alg] = c.predicted_ms
        assert predicted["all_reduce"] < predicted["one_shot"], (shape, predicted)
