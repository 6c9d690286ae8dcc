"""stream_k.select: the GEMM's tile, TMA and schedule chosen by the shape (host), and the chosen sm_90 tiles run
right in the interpreter on small shapes."""

from __future__ import annotations

import pytest
import torch

from streamk_pgas.iris_ops.env import interpreted
from streamk_pgas.stream_k.gemm import StreamKGemm
from streamk_pgas.stream_k.plan import StreamKPlan, plan_streamk
from streamk_pgas.stream_k.roofline import gemm_bytes
from streamk_pgas.stream_k.select import (
    GEMM_TB_S,
    LAUNCH_US,
    STREAM_SMS_SHARE,
    choose_gemm,
    gemm_candidates,
    gemm_time_us,
    shape_tile,
)

INTERPRET = interpreted()
HAS_SM90 = torch.cuda.is_available() and not INTERPRET and torch.cuda.get_device_capability()[0] >= 9
DEVICE = "cuda" if HAS_SM90 else "cpu"


@pytest.mark.parametrize(("M", "N", "tile"), [
    (64, 5120, (64, 64, 128)), (16, 1280, (64, 64, 128)), (128, 8192, (64, 128, 128)), (256, 8192, (128, 128, 64)),
    (1024, 1280, (128, 128, 64)), (4096, 8192, (128, 256, 64)), (1024, 8192, (128, 256, 64)),
    (512, 5120, (128, 128, 64)), (512, 8192, (128, 256, 64)), (1000, 3000, (128, 256, 64)),
    # too few tiles for the programs: the next smaller tile, down to 64 x 64
    (128, 1280, (64, 64, 128)), (256, 1280, (64, 64, 128)), (512, 1280, (64, 128, 128)), (64, 256, (64, 64, 128)),
    (2048, 1280, (128, 128, 64)), (256, 5120, (128, 128, 64)), (128, 5120, (64, 128, 128)),
])
def test_sm90_tile_follows_m(M, N, tile):
    cfg = shape_tile(M, N, "bf16", "sm90", 132)
    assert (cfg.BLK_M, cfg.BLK_N, cfg.BLK_K) == tile
    assert choose_gemm(M, N, 8192, "bf16", 132, "sm90").config.tma


def test_other_targets_keep_their_defaults():
    from streamk_pgas.stream_k.configs import default_config

    for arch in ("sm80", "interpreter", "gfx942"):
        assert shape_tile(64, 5120, "bf16", arch, 132) == default_config("bf16", arch)
    assert not choose_gemm(64, 64, 64, "bf16", 4, "interpreter").config.tma
    assert not choose_gemm(4096, 4096, 4096, "int8", 132, "sm90").config.tma
    assert not choose_gemm(4096, 4096, 4096, "fp32", 132, "sm90").config.tma
    assert shape_tile(64, 5120, "fp32", "sm90", 132) == shape_tile(4096, 5120, "fp32", "sm90", 132)


def test_memory_bound_stream_and_fixup():
    """A memory-bound GEMM streams at full bandwidth once STREAM_SMS_SHARE of the SMs are busy (80 tiles of 64 x 64
    on 132 SMs stay data-parallel), slower in proportion below it; a Stream-K fix-up follows the K loops, so it adds
    to the memory time instead of hiding under it."""
    assert choose_gemm(64, 5120, 8192, "bf16", 132, "sm90").plan.schedule == "dp"
    assert choose_gemm(64, 8192, 4096, "bf16", 132, "sm90").plan.schedule == "dp"
    ranked = gemm_candidates(64, 5120, 8192, "bf16", 132, "sm90")
    assert [c.time_us for c in ranked] == sorted(c.time_us for c in ranked)
    cfg = ranked[0].config
    stream_us = gemm_bytes(64, 5120, 8192, "bf16") / (GEMM_TB_S["sm90"] * 1e6)

    def time_of(N: int, schedule: str) -> tuple[float, StreamKPlan]:
        plan = plan_streamk(64, N, 8192, cfg.BLK_M, cfg.BLK_N, cfg.BLK_K, 132, schedule=schedule)
        return gemm_time_us(plan, cfg, "bf16", "sm90", 132), plan

    full, plan = time_of(5120, "dp")  # 80 busy SMs: the bandwidth's whole
    assert plan.num_tiles == 80 and full == pytest.approx(stream_us + LAUNCH_US)
    quarter, plan = time_of(1280, "dp")  # 20 busy SMs: a share 20 / (0.6 * 132) of it
    bytes_1280 = gemm_bytes(64, 1280, 8192, "bf16") / (GEMM_TB_S["sm90"] * 1e6)
    assert plan.num_tiles == 20
    assert quarter == pytest.approx(bytes_1280 * STREAM_SMS_SHARE * 132 / 20 + LAUNCH_US)
    hybrid, plan = time_of(5120, "hybrid")
    assert plan.sk_tiles > 0 and plan.fixup_iters() > 0
    assert hybrid > full  # the stream is as fast at best, and the fix-up comes after it


def test_fixed_choices_win():
    from streamk_pgas.stream_k.configs import KernelConfig

    cfg = KernelConfig(128, 128, 64, 4, 8, tma=True)
    c = choose_gemm(64, 5120, 8192, "bf16", 132, "sm90", fixed={"config": cfg, "schedule": "sk"})
    assert c.config == cfg and c.plan.schedule == "sk" and c.source == "given"


@pytest.mark.skipif(not (INTERPRET or HAS_SM90), reason="needs TRITON_INTERPRET=1 or an sm_90 GPU")
@pytest.mark.parametrize("M", [64, 128, 256, 512])
def test_chosen_sm90_tiles_run(M):
    """The sm_90 tiles (with the copy engine) on small shapes (Triton's interpreter, or an sm_90 GPU): right,
    every tile once."""
    N, K, programs = 320, 384, 5
    choice = choose_gemm(M, N, K, "fp16", programs, "sm90")
    gemm = StreamKGemm(choice.plan, "fp16", choice.config, device=DEVICE)
    g = torch.Generator().manual_seed(M)
    a = torch.randn(M, K, generator=g).half().to(DEVICE)
    b = torch.randn(K, N, generator=g).half().to(DEVICE)
    c = torch.full((M, N), float("nan"), dtype=torch.float16, device=DEVICE)
    flags = torch.zeros(gemm.plan.num_tiles, dtype=torch.int32, device=DEVICE)
    gemm(a, b, c, tile_flags=flags)
    gemm.check_errors()
    ref = a.float() @ b.float()
    assert torch.isfinite(c).all() and ((c.float() - ref).norm() / ref.norm()).item() < 5e-3
    assert (flags == 1).all() and gemm.staged_copies == 0


def test_wave_tiles_and_split_k_for_the_standalone_gemm_only():
    """On sm_90 bf16 the model takes a 320-wide tile where 128 of them fill one wave (1024x5120), split-K where the
    tiles leave most SMs idle (128x1280); the op's GEMM (op_tiles) keeps power-of-two tiles and no split-K; fp32 and
    AMD keep the bucket's tile and dp / hybrid unless the caller fixes the schedule."""
    from streamk_pgas.stream_k.tiles import width_parts

    wide = choose_gemm(1024, 5120, 8192, "bf16", 132, "sm90")
    assert (wide.config.BLK_M, wide.config.BLK_N, wide.plan.schedule, wide.plan.num_tiles) == (128, 320, "dp", 128)
    split = choose_gemm(128, 1280, 8192, "bf16", 132, "sm90")
    assert split.plan.schedule == "splitk" and split.plan.split_k >= 2
    assert split.plan.num_programs == split.plan.num_tiles * split.plan.split_k <= 132
    for M, N, K in ((1024, 5120, 8192), (128, 1280, 8192), (64, 1280, 8192), (2000, 3000, 3000)):
        for dtype, arch, op_tiles in (("bf16", "sm90", True), ("fp32", "sm90", False), ("bf16", "gfx942", False)):
            c = choose_gemm(M, N, K, dtype, 132, arch, op_tiles=op_tiles)
            assert c.plan.schedule in ("dp", "hybrid") and width_parts(c.config.BLK_N)[1] == 0, (M, N, K, dtype, arch)
    fixed = choose_gemm(64, 1280, 8192, "fp32", 132, "sm90", fixed={"schedule": "splitk", "split_k": 3})
    assert fixed.plan.schedule == "splitk" and fixed.plan.split_k == 3
