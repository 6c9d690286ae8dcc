"""reference/: flag checks, and real CPU runs under `mpirun -np 2` (gloo) whose records follow the schema."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from streamk_pgas.harness.runlog import check_record, read_records
from streamk_pgas.reference.config import COLLECTIVES, ConfigError, output_paths, parse_config
from streamk_pgas.reference.inputs import compare

ROOT = Path(__file__).resolve().parent.parent
MPIRUN = shutil.which("mpirun")
needs_mpirun = pytest.mark.skipif(MPIRUN is None, reason="mpirun is not on PATH")


def mpirun(*args: str, np: int = 2, timeout: int = 150) -> subprocess.CompletedProcess:
    cmd = [MPIRUN or "mpirun", "--oversubscribe", "-np", str(np), sys.executable, "-m", "reference", *args]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)


# ------------------------------------------------------------------------------ flags, no ranks
@pytest.mark.parametrize(
    ("argv", "world", "flag", "needle"),
    [
        (["--collective", "broadcast"], 2, "--collective", "invalid choice"),
        (["--datatype", "fp8"], 2, "--datatype", "invalid choice"),
        (["-m", "0"], 2, "-m/--m", "in [1, 2147483647]"),
        (["-k", "-4"], 2, "-k/--k", "in [1, 2147483647]"),
        (["--iters", "0"], 2, "--iters", "in [1, 1000000]"),
        (["--collective", "all_reduce", "-k", "63"], 2, "-k", "multiple of 2"),
        (["--collective", "all_gather", "-n", "63"], 2, "-n", "multiple of 2"),
        (["--collective", "fused_all_gather_matmul", "-m", "63"], 2, "-m", "multiple of 2"),
        (["--output_file", "a.json", "--output_dir", "d"], 1, "--output_file", "not both"),
        (["--frobnicate"], 1, "--frobnicate", "unknown flag"),
    ],
)
def test_bad_flags_name_the_flag(argv: list[str], world: int, flag: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(argv, world)
    assert info.value.flag == flag
    assert needle in str(info.value)


def test_good_flags_and_output_paths() -> None:
    cfg = parse_config(["--collective", "symm_mem_all_reduce", "-m", "64", "-n", "32", "-k", "16",
                        "--output_file", "out/x.json"], 2)
    assert cfg.variants == COLLECTIVES["symm_mem_all_reduce"]
    paths = output_paths(cfg, 2)
    assert paths["symm_mem_two_shot"] == Path("out/x.symm_mem_two_shot.json")
    cfg = parse_config(["--collective", "gemm", "-k", "63", "--output_file", "y.json"], 2)  # gemm splits nothing
    assert output_paths(cfg, 2) == {"gemm": Path("y.json")}


def test_bad_flag_exits_2_with_one_line() -> None:
    res = subprocess.run([sys.executable, "-m", "reference", "--datatype", "fp8"], capture_output=True, text=True,
                         timeout=60, cwd=ROOT)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "--datatype" in lines[0] and "bf16" in lines[0]


def test_failed_variant_fails_the_run(tmp_path: Path) -> None:
    """A variant that was asked for and could not run (here its allocation overflows) is a failure, not a
    skip: exit code 1, the reason on stderr, and no log, so that a sweep does not count it as done."""
    out = tmp_path / "gemm.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_")) and k not in ("RANK",)}
    env["PYTHONPATH"] = str(ROOT)
    res = subprocess.run([sys.executable, "-m", "reference", "--collective", "gemm", "-m", "2147483647", "-n",
                          "2147483647", "-k", "2147483647", "--datatype", "fp32", "--device", "cpu", "--iters", "1",
                          "--warmup", "0", "--output_file", str(out)],
                         capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "gemm" in res.stderr and "FAILED (rank 0: RuntimeError" in res.stderr, res.stderr
    assert "skipped" not in res.stdout + res.stderr
    assert not out.exists()


def test_compare_catches_wrong_results() -> None:
    ref = torch.randn(16, 8, dtype=torch.float64)
    assert compare(ref.to(torch.bfloat16), ref, "bf16")["passed"]
    assert not compare((ref * 1.1).to(torch.bfloat16), ref, "bf16")["passed"]
    assert not compare(ref.float() + 1e-3, ref, "fp32")["passed"]
    bad = ref.clone().float()
    bad[0, 0] = float("nan")
    assert not compare(bad, ref, "fp32")["passed"]
    ints = torch.randint(-50, 50, (4, 4)).double()
    assert compare(ints.int(), ints, "int8")["passed"]
    assert not compare(ints.int() + 1, ints, "int8")["passed"]


# ---------------------------------------------------------------------------- real CPU runs
@needs_mpirun
def test_bad_size_under_mpirun_exits_2_before_starting() -> None:
    res = mpirun("--collective", "all_reduce", "-m", "8", "-n", "8", "-k", "7", timeout=60)
    assert res.returncode == 2, res.stderr
    assert "-k: all_reduce splits K over 2 ranks" in res.stderr


@pytest.fixture(scope="module")
def cpu_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reference_logs")
    res = mpirun("--collective", "all", "-m", "32", "-n", "48", "-k", "64", "--datatype", "bf16", "--iters", "3",
                 "--warmup", "1", "--validate", "--output_dir", str(out))
    assert res.returncode == 0, res.stdout + res.stderr
    return out


@needs_mpirun
def test_cpu_records_match_schema_and_validate(cpu_logs: Path) -> None:
    records = {r["variant"]: r for r in read_records([cpu_logs])}
    assert set(records) == set(COLLECTIVES["all"])
    for key, rec in records.items():
        assert check_record(rec) == [], key
        assert rec["producer"] == "reference" and rec["mode"] is None and rec["world_size"] == 2
        assert rec["sizes"]["m"] == 32 and rec["sizes"]["datatype"] == "bf16"
        assert rec["sharding"]
    for key, alg, impl in (("all_reduce", "all_reduce", "torch-cpu+gloo"), ("all_gather", "all_gather",
                                                                            "torch-cpu+gloo"),
                           ("gemm", "gemm", "torch-cpu")):
        rec = records[key]
        assert (rec["algorithm"], rec["implementation"]) == (alg, impl)
        assert rec["skipped"] is None
        assert rec["validation"]["enabled"] and rec["validation"]["passed"], rec["validation"]
        assert rec["validation"]["rel_err"] < 2e-2
        t = rec["timing"]
        assert t["iters"] == 3 and t["e2e_ms"] > 0 and t["tflops"] > 0
        assert "gemm" in t["kernels_ms"]
    assert set(records["all_reduce"]["timing"]["kernels_ms"]) == {"gemm", "comm"}
    assert set(records["all_gather"]["timing"]["kernels_ms"]) == {"gemm", "comm", "layout"}
    assert records["all_reduce"]["sizes"]["local_k"] == 32
    assert records["all_gather"]["sizes"]["local_n"] == 24
    for key in ("symm_mem_two_shot", "symm_mem_one_shot", "fused_all_gather_matmul", "fused_matmul_reduce_scatter"):
        rec = records[key]
        assert "CPU" in rec["skipped"], rec["skipped"]
        assert rec["timing"]["e2e_ms"] is None and rec["validation"]["passed"] is None
        json.dumps(rec)  # strict JSON: no NaN


@needs_mpirun
def test_int8_rank_blocked_all_gather(tmp_path: Path) -> None:
    out = tmp_path / "ag.json"
    res = mpirun("--collective", "all_gather", "-m", "24", "-n", "32", "-k", "40", "--datatype", "int8",
                 "--gather_layout", "rank_blocked", "--iters", "2", "--warmup", "0", "--validate",
                 "--output_file", str(out))
    assert res.returncode == 0, res.stdout + res.stderr
    rec = json.loads(out.read_text())
    assert check_record(rec) == []
    assert rec["validation"]["passed"] and rec["validation"]["rel_err"] == 0.0
    assert rec["gather_layout"] == "rank_blocked" and rec["layout_copy_in_e2e"] is False
    assert "layout" not in rec["timing"]["kernels_ms"]


@pytest.mark.skipif(shutil.which("torchrun") is None, reason="torchrun is not on PATH")
def test_runs_under_torchrun(tmp_path: Path) -> None:
    out = tmp_path / "ar.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_"))}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    res = subprocess.run(
        ["torchrun", "--standalone", "--nproc_per_node", "2", "-m", "reference", "--collective", "all_reduce",
         "-m", "16", "-n", "16", "-k", "16", "--datatype", "fp32", "--iters", "2", "--warmup", "1", "--validate",
         "--output_file", str(out)],
        capture_output=True, text=True, timeout=150, cwd=ROOT, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    rec = json.loads(out.read_text())
    assert check_record(rec) == [] and rec["launcher"] == "torchrun" and rec["validation"]["passed"]
