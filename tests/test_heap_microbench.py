"""Smoke test of tools.microbench: tiny sizes on 2 ranks (CPU interpreter in CI, GPUs where present)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from conftest import on_gpu, run_mpi, skip_unless_ranks

from streamk_pgas.tools import microbench


def test_parse_size() -> None:
    assert microbench.parse_size("4KB") == 4096
    assert microbench.parse_size("1MB") == 1 << 20
    assert microbench.parse_size("1gb") == 1 << 30
    assert microbench.parse_size("1000") == 1000
    for bad in ("3", "1TB", "x", "5GB"):
        with pytest.raises(argparse.ArgumentTypeError):
            microbench.parse_size(bad)
    assert microbench.human(4 << 20) == "4MB" and microbench.human(1000) == "1000B"


def test_microbench_runs_and_validates(tmp_path: Path) -> None:
    skip_unless_ranks(2)
    out = tmp_path / "microbench.json"
    sizes = "1MB,4MB" if on_gpu() else "4KB,1000"  # 1000 B: a size that is not a multiple of the block
    result = run_mpi(2, "tools.microbench", "--sizes", sizes, "--iters", "2", "--warmup", "1",
                     "--rounds", "100" if on_gpu() else "3", "--output_file", str(out), module=True, timeout=600)
    assert "validation: passed" in result.stdout, result.stdout[-4000:]
    record = json.loads(out.read_text())
    assert record["schema"] == microbench.SCHEMA and record["producer"] == "microbench"
    assert record["world_size"] == 2 and record["validation"] == {"passed": True, "failures": []}
    rows = {(r["algorithm"], r["implementation"], r["bytes"]): r for r in record["results"]}
    for nbytes in [microbench.parse_size(s) for s in sizes.split(",")]:
        for algorithm in ("remote_read", "remote_write"):
            mine = rows[(algorithm, "iris_ops", nbytes)]
            assert mine["validation"]["passed"] is True
            assert mine["stats"]["count"] == 2 and mine["median_ms"] > 0
            assert mine["gbps"] == pytest.approx(nbytes / (mine["median_ms"] * 1e-3) / 1e9)
            ref = rows[(algorithm, "torch_copy", nbytes)]
            if ref["median_ms"] is None:  # allowed on a GPU where no peer view can be made, with the reason
                assert on_gpu() and ref.get("note"), ref
            else:
                assert ref["validation"]["passed"] is True, ref
    (rt,) = [r for r in record["results"] if r["algorithm"] == "flag_roundtrip"]
    assert rt["validation"]["passed"] is True and rt["roundtrip_us"] > 0
    assert rt["timer"] in (("globaltimer", "host") if on_gpu() else ("host",))
    assert "flag round trip" in result.stdout
