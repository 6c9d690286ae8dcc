"""tools.gemm_model_check on the CPU: the model's pick among a sweep's candidates against the fastest measured."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from streamk_pgas.tools.gemm_model_check import candidate_rows, compare, main


def _sweep(path: Path, dp_ms: float, hybrid_ms: float) -> Path:
    rows = [{"shape": "64x5120x8192", "candidate": "cublas", "chosen": None, "schedule": None, "loop_ms": 0.038},
            {"shape": "64x5120x8192", "candidate": "64x64x128/s6/w4/dp/r1", "chosen": "64x64x128/s6/w4/tma",
             "schedule": "dp", "loop_ms": dp_ms},
            {"shape": "64x5120x8192", "candidate": "64x64x128/s6/w4/hybrid1/r1", "chosen": "64x64x128/s6/w4/tma",
             "schedule": "hybrid1", "loop_ms": hybrid_ms},
            {"shape": "64x5120x8192", "candidate": "128x128x64/s4/w8/splitk2/r1", "chosen": None, "schedule": None,
             "loop_ms": float("nan")}]  # a candidate that did not run
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_the_models_pick_against_the_fastest(tmp_path: Path) -> None:
    """On one H100 data-parallel 64 x 64 tiles ran 64x5120x8192 in 33.4 us, the hybrid in 39.3: the model ranks dp
    first, so its pick costs nothing; with the times swapped it costs their ratio."""
    rows = candidate_rows([str(_sweep(tmp_path / "a.csv", 0.0334, 0.0393))])
    assert len(rows) == 2  # cuBLAS and the row that did not run are left out
    lines, regret = compare(rows, "bf16", "sm90", 132)
    assert len(lines) == 1 and regret == pytest.approx(1.0)
    rows = candidate_rows([str(_sweep(tmp_path / "b.csv", 0.0393, 0.0334))])
    _, regret = compare(rows, "bf16", "sm90", 132)
    assert regret == pytest.approx(0.0393 / 0.0334)


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "missing.csv")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "missing.csv" in err[0]
    assert main([str(_sweep(tmp_path / "a.csv", 0.0334, 0.0393)), "--programs", "0"]) == 2
