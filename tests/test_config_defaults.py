"""benchmark.py's device-derived defaults (no launch): the SM split and the Stream-K rounds per algorithm and mode."""

from __future__ import annotations

import pytest

from harness.config import DeviceFacts, parse_config

H200 = DeviceFacts(backend="cuda", sm_count=132, shared_mem_per_program=232448, name="NVIDIA H200", capability=90)
CPU = DeviceFacts(backend="cpu", sm_count=4, shared_mem_per_program=1 << 30)


@pytest.mark.parametrize(
    ("algorithm", "mode", "gemm_sms", "sk_rounds"),
    [
        ("all_reduce", "fused", 116, 2),
        ("all_reduce", "two_streams", 116, 2),
        ("all_reduce", "bulk_sync", 116, 1),
        ("all_scatter", "fused", 124, 2),
        ("all_scatter", "fused_sequential", 124, 1),
        ("one_shot", "two_streams", 118, 1),
        ("one_shot", "fused", 118, 1),
    ],
)
def test_gpu_defaults(algorithm: str, mode: str, gemm_sms: int, sk_rounds: int) -> None:
    cfg = parse_config(["--algorithm", algorithm, "--mode", mode], H200, 2)
    assert (cfg.gemm_sms, cfg.sk_rounds) == (gemm_sms, sk_rounds)
    assert {"gemm_sms", "sk_rounds"} <= set(cfg.defaulted)


def test_explicit_rounds_win_and_cpu_defaults_to_one() -> None:
    cfg = parse_config(["--algorithm", "all_reduce", "--mode", "fused", "--sk_rounds", "3"], H200, 2)
    assert cfg.sk_rounds == 3 and "sk_rounds" not in cfg.defaulted
    assert parse_config(["--algorithm", "all_reduce", "--mode", "fused"], CPU, 2).sk_rounds == 1
