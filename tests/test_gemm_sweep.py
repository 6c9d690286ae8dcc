"""tools.gemm_sweep on the CPU interpreter: candidates parse (bad ones: one line, exit 2), every candidate of
every shape gives a validated row beside the baseline's, the CSV and its meta file are written, and "auto"
runs the plan stream_k.plan's cost model picks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO_ROOT

from streamk_pgas.stream_k.plan import plan_streamk
from streamk_pgas.tools.gemm_sweep import GemmCandidate, exit_code, parse_candidate, summary


def test_candidates_parse() -> None:
    assert parse_candidate("128x256x64/s3/w8/hybrid1/r2") == GemmCandidate(128, 256, 64, 3, 8, "hybrid1", 2)
    assert parse_candidate("64x256x64/s4/w4/dp").plan_args() == {"schedule": "dp", "two_tiles": True, "sk_rounds": 1,
                                                                  "split_k": None}
    assert parse_candidate("128x256x64/s3/w8/hybrid1").plan_args()["two_tiles"] is False
    assert parse_candidate("default") == "default"
    for bad in ("128x256/s3/w8/dp", "128x256x48/s3/w8/dp", "128x256x64/s9/w8/dp", "128x256x64/s3/w3/dp",
                "128x256x64/s3/w8/fast", "128x256x64/s3/w8/dp/r9"):
        with pytest.raises(ValueError):
            parse_candidate(bad)


def test_bad_candidate_is_one_line_and_exit_2() -> None:
    r = subprocess.run([sys.executable, "-m", "tools.gemm_sweep", "--shapes", "64x64x64", "--candidates",
                        "32x32x16/s1/w4/fast"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--candidates" in r.stderr


def test_sweep_rows_and_csv(tmp_path: Path) -> None:
    out = tmp_path / "sweep.csv"
    r = subprocess.run([sys.executable, "-m", "tools.gemm_sweep", "--shapes", "64x64x64,40x72x56",
                        "--candidates", "32x32x16/s1/w4/auto,32x32x16/s1/w4/hybrid,16x32x16/s1/w4/sk/r2",
                        "--num_programs", "3", "--csv", str(out)],
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    rows = pd.read_csv(out)
    assert len(rows) == 2 * 4 and set(rows["candidate"]) >= {"cublas", "32x32x16/s1/w4/auto/r1"}
    ours = rows[rows["candidate"] != "cublas"]
    assert (ours["rel_error"] < 2e-2).all() and ours["error"].isna().all()
    for shape, (m, n, k) in (("64x64x64", (64, 64, 64)), ("40x72x56", (40, 72, 56))):
        auto = ours[(ours["shape"] == shape) & (ours["candidate"] == "32x32x16/s1/w4/auto/r1")].iloc[0]
        plan = plan_streamk(m, n, k, 32, 32, 16, 3, schedule="auto")
        assert auto["schedule"] == plan.schedule + ("1" if plan.schedule == "hybrid" else "")
        assert auto["sk_tiles"] == plan.sk_tiles
    meta = json.loads(out.with_suffix(".meta.json").read_text())
    assert meta["git"]["commit"] and meta["argv"][:2] == ["--shapes", "64x64x64,40x72x56"]
    assert "geomean" in r.stdout


def test_gemm_bench_writes_validated_records(tmp_path: Path) -> None:
    """tools.gemm_bench (cuBLAS beside the Stream-K GEMM, one JSON record per implementation) runs end to end."""
    r = subprocess.run([sys.executable, "-m", "tools.gemm_bench", "--shapes", "64x64x64", "--datatype", "fp32",
                        "--output_dir", str(tmp_path)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    records = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("*.json"))]
    assert records and all(rec["validation"]["passed"] for rec in records), r.stdout
    for rec in records:
        z = rec["sizes"]
        assert z["flops"] == 2 * z["m"] * z["n"] * z["k"] > 0, z


def test_candidates_of_two_column_blocks_and_split_k() -> None:
    c = parse_candidate("128x320x64/s3/w8/dp")
    assert (c.blk_n, c.schedule, c.split_k) == (320, "dp", None)
    s = parse_candidate("64x64x128/s6/w4/splitk6")
    assert (s.schedule, s.split_k, s.name) == ("splitk", 6, "64x64x128/s6/w4/splitk6/r1")
    assert s.plan_args() == {"schedule": "splitk", "two_tiles": True, "sk_rounds": 1, "split_k": 6}
    assert parse_candidate("64x64x128/s6/w4/splitk").split_k is None
    for bad in ("128x336x64/s3/w8/dp", "128x40x64/s3/w8/dp", "64x64x128/s6/w4/splitkx"):
        with pytest.raises(ValueError):
            parse_candidate(bad)


def test_summary_tells_wrong_from_not_run() -> None:
    """A candidate that does not apply to a shape (an error before it runs) is listed as not run, not as wrong."""
    rows = [{"shape": "64x64x64", "candidate": "c", "passed": True, "vs_cublas_loop": 1.1, "loop_ms": 0.01},
            {"shape": "64x64x128", "candidate": "c", "passed": False, "vs_cublas_loop": 0.9, "loop_ms": 0.01},
            {"shape": "64x64x256", "candidate": "c", "passed": False, "error": "ValueError: splitk needs ..."}]
    s = summary(rows)["c"]
    assert s["failed"] == ["64x64x128"] and s["not_run"] == ["64x64x256"]
    assert s["geomean"] == pytest.approx((1.1 * 0.9) ** 0.5)


def test_exit_code_fails_wrong_results_and_a_default_that_cannot_run_only() -> None:
    """A fixed candidate that does not fit or apply is a row reported as not run, and the sweep still exits 0; a
    wrong result, or the default not running, exits 1."""
    ok = {"candidate": "default", "passed": True, "error": ""}
    misfit = {"candidate": "64x256x64/s5/w8/dp/r1", "passed": False, "error": "OutOfResources: shared memory"}
    wrong = {"candidate": "128x128x64/s5/w8/dp/r1", "passed": False, "error": ""}
    assert exit_code([ok, misfit]) == 0
    assert exit_code([ok, misfit, wrong]) == 1
    assert exit_code([{**misfit, "candidate": "default"}]) == 1
