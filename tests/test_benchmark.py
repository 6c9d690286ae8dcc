"""benchmark.py end to end: every algorithm x mode validates on 2 and 4 ranks, back-to-back
iterations stay correct, the JSON log and the tile trace are well formed (bad flags: test_bad_inputs.py).

On the CPU these run the real kernels in Triton's interpreter on the shm heap, at small shapes
that still have several tiles, split (Stream-K) tiles and edge tiles.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REPO_ROOT, on_gpu, run_mpi, skip_unless_ranks

from streamk_pgas.harness.runlog import check_record

ALGORITHMS = ("all_reduce", "all_scatter", "one_shot")
MODES = ("bulk_sync", "two_streams", "fused", "fused_sequential")
BENCH = str(REPO_ROOT / "benchmark.py")
# 80 x 96 x 64 with 32 x 32 x 16 tiles: ragged edges in M, 9 tiles (6 for all_scatter's N/2) on 2
# GEMM programs, so the hybrid schedule has Stream-K tiles whose partials are fixed up.
SMALL = ["-m", "80", "-n", "96", "-k", "64", "--BLK_M", "32", "--BLK_N", "32", "--BLK_K", "16",
         "--COMMUNICATION_TILE_M", "16", "--COMMUNICATION_TILE_N", "32", "--total_sms", "4", "--gemm_sms", "2",
         "--num_stages", "1", "--num_warps", "4", "--datatype", "fp16"]


def _args(algorithm: str) -> list[str]:
    """The small problem, in fp32 for all_reduce on the CPU: Triton's interpreter adds fp16 under a lock of
    its own process, so fp16 atomic adds from several ranks onto one element can lose updates there
    (fp32 adds are atomic across processes). GPUs add fp16 and bf16 atomically; the GPU run covers them."""
    if algorithm == "all_reduce" and not on_gpu():
        return [*SMALL[:-2], "--datatype", "fp32"]
    return SMALL


@pytest.mark.parametrize("nprocs", [2, 4])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_mode_validates(algorithm: str, nprocs: int, tmp_path: Path) -> None:
    """All four modes of one algorithm in one launch (benchmark.py runs every combination of a list)."""
    skip_unless_ranks(nprocs)
    result = run_mpi(nprocs, BENCH, "--algorithm", algorithm, "--mode", ",".join(MODES), *_args(algorithm),
                     "--validate",
                     "--validate_iters", "2", "--output_file", str(tmp_path / "run_{mode}.json"), timeout=600)
    assert result.stdout.count("validation passed on every rank: 1 isolated step, 2 back to back") == len(MODES), \
        result.stdout
    for mode in MODES:
        record = json.loads((tmp_path / f"run_{mode}.json").read_text())
        assert check_record(record) == []
        assert (record["algorithm"], record["mode"]) == (algorithm, mode)
        assert record["validation"]["passed"] is True
        assert record["validation"]["back_to_back"] == {"passed": True, "steps": 2}
        assert len(record["validation"]["ranks"]) == nprocs
        for rank in record["validation"]["ranks"]:
            assert rank["global"]["rel_err"] < rank["global"]["tolerance"]
            assert rank["partial"]["passed"] is True


def test_cpu_defaults_validate_without_a_warning_at_three_ranks() -> None:
    """No shape or datatype flag at a rank count that does not divide 64: the
    CPU default problem validates and nothing warns (two ranks: tests/test_readme.py's launch line)."""
    if on_gpu():
        pytest.skip("the CPU backend's defaults")
    result = run_mpi(3, BENCH, "--validate", timeout=300)
    lines = result.stdout.rstrip().splitlines()
    assert lines[-1].startswith("PASS: 1 of 1 run(s) validated on every rank"), result.stdout[-3000:]
    assert "warning" not in result.stdout.lower(), result.stdout[-3000:]


def test_sk_first_validates(tmp_path: Path) -> None:
    """--sk_first: the GEMM runs its Stream-K tiles first and the communication takes tiles in that order."""
    result = run_mpi(2, BENCH, "--algorithm", ",".join(ALGORITHMS), "--mode", "two_streams,fused",
                     *_args("all_reduce"), "--sk_first", "true", "--validate", "--validate_iters", "2", timeout=600)
    passed = "validation passed on every rank: 1 isolated step, 2 back to back"
    assert result.stdout.count(passed) == 2 * len(ALGORITHMS), \
        result.stdout


def test_sk_rounds_validate(tmp_path: Path) -> None:
    """--sk_rounds 3: the GEMM's 3 Stream-K tiles (of 9 on 2 programs) in three rounds of one tile, each
    split over both programs, with the communication taking tiles as they complete."""
    result = run_mpi(2, BENCH, "--algorithm", ",".join(ALGORITHMS), "--mode", "two_streams,fused",
                     *_args("all_reduce"), "--sk_rounds", "3", "--validate", "--validate_iters", "2",
                     "--output_file", str(tmp_path / "run.json"), timeout=600)
    passed = "validation passed on every rank: 1 isolated step, 2 back to back"
    assert result.stdout.count(passed) == 2 * len(ALGORITHMS), \
        result.stdout
    record = json.loads((tmp_path / "run_all_reduce_fused_g2_ct16x32_r3.json").read_text())
    assert record["flags"]["sk_rounds"] == 3


def test_schedules_validate(tmp_path: Path) -> None:
    """--schedule dp and the one-tile hybrid (--two_tiles false), what the planner chooses on a GPU (the
    interpreter's own choice is the two-tile hybrid): every algorithm, two overlapped modes, validated back to
    back. The small problem's 9 tiles on 2 GEMM programs: dp runs 5 waves (the last one half full), the one-tile
    hybrid splits only the leftover tile."""
    algorithms = (*ALGORITHMS, "all_gather_gemm", "gemm_reduce_scatter")
    result = run_mpi(2, BENCH, "--algorithm", ",".join(algorithms), "--mode", "two_streams,fused",
                     *_args("all_reduce"), "--schedule", "dp,hybrid", "--two_tiles", "false", "--validate",
                     "--validate_iters", "2", "--output_file", str(tmp_path / "run.json"), timeout=900)
    passed = "validation passed on every rank: 1 isolated step, 2 back to back"
    assert result.stdout.count(passed) == 4 * len(algorithms), result.stdout
    for name, schedule in (("dp", "dp"), ("hybrid1", "hybrid")):
        record = json.loads((tmp_path / f"run_all_reduce_fused_g2_ct16x32_{name}.json").read_text())
        assert (record["flags"]["schedule"], record["flags"]["two_tiles"]) == (schedule, False)
        assert "schedule" not in record["flags"]["plan"]["planned"]


@pytest.mark.slow
def test_many_back_to_back_iterations_stay_correct() -> None:
    """Steps launched back to back with nothing between them (outputs poisoned once, before the first): a tile
    consumed on a stale flag, or a step that zeroes C while a peer still adds the previous one, shows. 200 on a
    GPU; 12 in the interpreter: each step is the same protocol with the next epoch (nothing wraps or rotates), C is
    validated after the last step only, and a wait that gives up at any step shows in the error words, so 11
    step-to-step handoffs per algorithm exercise the same code as 199."""
    steps = 200 if on_gpu() else 12
    args = ["-m", "32", "-n", "64", "-k", "32", "--BLK_M", "16", "--BLK_N", "16", "--BLK_K", "16",
            "--COMMUNICATION_TILE_M", "16", "--COMMUNICATION_TILE_N", "16", "--total_sms", "4", "--gemm_sms", "3",
            "--num_stages", "1", "--num_warps", "1"]
    # --datatype fp32: see _args (all_reduce's cross-process atomic adds in the interpreter).
    result = run_mpi(2, BENCH, "--algorithm", ",".join(ALGORITHMS), "--mode", "fused", *args, "--validate",
                     "--validate_iters", str(steps), "--datatype", "fp32", timeout=1200)
    assert result.stdout.count(f"validation passed on every rank: 1 isolated step, {steps} back to back") == \
        len(ALGORITHMS), result.stdout


def test_benchmark_log_and_trace(tmp_path: Path) -> None:
    log = tmp_path / "bench.json"
    result = run_mpi(2, BENCH, "--algorithm", "one_shot", "--mode", "fused", *SMALL, "--benchmark", "--iters", "2",
                     "--warmup", "1", "--trace_tiles", "--output_file", str(log), timeout=400)
    assert "e2e median" in result.stdout
    record = json.loads(log.read_text())
    assert check_record(record) == []
    assert record["producer"] == "benchmark" and record["mode"] == "fused" and record["world_size"] == 2
    assert record["timing"]["e2e_ms"] > 0 and record["timing"]["iters"] == 2
    assert set(record["timing"]["kernels_ms"]) == {"fused"}
    assert record["components"]["overlap_bound_ms"] > 0
    assert record["git"]["commit"]
    chrome = json.loads(Path(record["trace_files"]["perfetto"]).read_text())
    events = [e for e in chrome["traceEvents"] if e["ph"] == "X"]
    roles = {e["cat"] for e in events}
    assert {"gemm", "wait", "comm"} == roles, roles
    tiles = record["sizes"]["tiles"]
    # every tile appears once as GEMM work and once as communication on each rank
    for rank in (0, 1):
        for role in ("gemm", "comm"):
            assert sorted(e["args"]["tile"] for e in events if e["pid"] == rank and e["cat"] == role) == list(
                range(tiles)), (rank, role)
    timeline = json.loads(Path(record["trace_files"]["timeline"]).read_text())
    assert timeline["schema"].startswith("streamk-pgas/tile-timeline")
