"""Stream-K kernel against torch.matmul in float64: every dtype, odd shapes, each schedule, split tiles.

Runs on the CPU with TRITON_INTERPRET=1 (programs then run one after another, so these tests also prove
that no program waits on a later one), and on a GPU without it. Shapes stay small for the interpreter.
"""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from streamk_pgas.iris_ops.device import wait_local
from streamk_pgas.iris_ops.env import interpreted

# Submodules, not the package: an editable install made before stream_k/__init__.py existed maps
# stream_k to a namespace package, whose top level is empty.
from streamk_pgas.stream_k.configs import KernelConfig
from streamk_pgas.stream_k.gemm import StreamKGemm, matmul
from streamk_pgas.stream_k.kernel import streamk_gemm_kernel, streamk_program
from streamk_pgas.stream_k.tiles import width_parts

INTERPRET = interpreted()
HAS_GPU = torch.cuda.is_available() and not INTERPRET
pytestmark = pytest.mark.skipif(not (INTERPRET or HAS_GPU), reason="needs a GPU or TRITON_INTERPRET=1")
DEVICE = "cuda" if HAS_GPU else "cpu"
TOL = {"fp16": 1e-2, "bf16": 2e-2, "fp32": 1e-4, "int8": 0.0}
TORCH = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "int8": torch.int8}
SENTINEL = -(2**31) + 7


def _config(name: str, blk_m: int = 16, blk_n: int = 16) -> KernelConfig:
    return KernelConfig(blk_m, blk_n, 32 if name == "int8" else 16, num_stages=2, num_warps=4)


def _inputs(name: str, M: int, N: int, K: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    if name == "int8":
        a = torch.randint(-8, 8, (M, K), generator=g, dtype=torch.int8)
        b = torch.randint(-8, 8, (K, N), generator=g, dtype=torch.int8)
    else:
        a = torch.randn(M, K, generator=g).to(TORCH[name])
        b = torch.randn(K, N, generator=g).to(TORCH[name])
    return a.to(DEVICE), b.to(DEVICE)


def _poisoned(gemm: StreamKGemm) -> torch.Tensor:
    shape = (gemm.plan.M, gemm.plan.N)
    if gemm.out_dtype == torch.int32:
        return torch.full(shape, SENTINEL, dtype=torch.int32, device=DEVICE)
    return torch.full(shape, float("nan"), dtype=gemm.out_dtype, device=DEVICE)


def _check(name: str, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
    ref = a.cpu().double() @ b.cpu().double()
    out = c.cpu().double()
    if name == "int8":
        assert torch.equal(out, ref), "int8 GEMM must be exact"
        return
    assert torch.isfinite(out).all(), "unwritten (NaN) or overflowed elements"
    rel = ((out - ref).norm() / ref.norm()).item()
    assert rel < TOL[name], f"relative error {rel:.3g} >= {TOL[name]}"


def _run(gemm: StreamKGemm, a, b, *, trace: bool = True):
    p = gemm.plan
    c = _poisoned(gemm)
    flags = torch.zeros(p.num_tiles, dtype=torch.int32, device=DEVICE)
    tr = torch.full((p.num_tiles, 3), -1, dtype=torch.int64, device=DEVICE) if trace else None
    gemm(a, b, c, tile_flags=flags, gemm_trace=tr)
    gemm.check_errors()
    return c, flags, tr


def _has_split_tile(gemm: StreamKGemm) -> bool:
    return any(w.role == "piece" for pid in range(gemm.plan.num_programs) for w in gemm.plan.work_items(pid))


def _stored_by_its_pieces(p, tr) -> bool:
    """Every tile was stored by one of the programs that hold a piece of it (the last to arrive)."""
    return all(int(tr[t, 2]) in p.piece_programs(t) for t in range(p.num_tiles))


@pytest.mark.parametrize("programs", [1, 2, 3, 7, 20])
@pytest.mark.parametrize("schedule", ["hybrid", "dp", "sk"])
@pytest.mark.parametrize("name", ["fp16", "bf16", "fp32", "int8"])
def test_odd_shape(name, schedule, programs):
    M, N, K = 37, 45, 50
    gemm = StreamKGemm.create(M, N, K, name, programs, config=_config(name), schedule=schedule, device=DEVICE)
    p = gemm.plan
    if schedule == "sk":
        # 3 programs get exactly 3 tiles each; otherwise tiles are split between programs.
        assert p.sk_tiles == p.num_tiles and _has_split_tile(gemm) == (programs not in (1, 3))
    if schedule == "hybrid" and programs in (2, 7, 20):
        assert p.sk_tiles > 0 and _has_split_tile(gemm)
    if schedule == "dp" or programs == 1:
        assert not _has_split_tile(gemm)
    a, b = _inputs(name, M, N, K)
    c, flags, tr = _run(gemm, a, b)
    _check(name, a, b, c)
    assert (flags == gemm.epoch).all()
    tr = tr.cpu()
    assert _stored_by_its_pieces(p, tr)
    assert (tr[:, 1] > tr[:, 0]).all() and (tr[:, 0] >= 0).all()


@pytest.mark.parametrize("name", ["bf16", "int8"])
def test_even_k_with_split_tiles(name):
    M, N, K = 48, 40, 128
    gemm = StreamKGemm.create(M, N, K, name, 5, config=_config(name), schedule="sk", device=DEVICE)
    assert gemm.plan.even_k and _has_split_tile(gemm)
    a, b = _inputs(name, M, N, K, seed=1)
    c, _, _ = _run(gemm, a, b, trace=False)
    _check(name, a, b, c)


def test_tile_split_over_four_programs():
    gemm = StreamKGemm.create(16, 16, 160, "fp32", 4, config=_config("fp32"), schedule="sk", device=DEVICE)
    assert gemm.plan.piece_programs(0) == (0, 1, 2, 3)
    a, b = _inputs("fp32", 16, 16, 160, seed=2)
    c, flags, _ = _run(gemm, a, b)
    _check("fp32", a, b, c)
    assert flags.item() == gemm.epoch


@pytest.mark.parametrize("by_half", [False, True])
def test_tile_in_twenty_pieces(by_half):
    """One tile split over 20 programs: its last piece reads the partials REDUCE_LOADS at a time (several groups,
    the last one partly empty) and sums them in program order, in either fix-up order (fixup_by_half)."""
    cfg = _config("fp32").replace(fixup_by_half=by_half)
    gemm = StreamKGemm.create(16, 16, 16 * 41, "fp32", 20, config=cfg, schedule="sk", device=DEVICE)
    assert len(gemm.plan.piece_programs(0)) == 20 and 20 % gemm.config.reduce_loads != 0
    a, b = _inputs("fp32", 16, 16, 16 * 41, seed=22)
    for _ in range(2):
        c, flags, _ = _run(gemm, a, b)
        _check("fp32", a, b, c)
        assert flags.item() == gemm.epoch and (gemm.locks == 0).all()


def test_larger_blocks_and_hybrid_waves():
    # 6 x 3 = 18 tiles of 32 x 32 on 4 programs: 3 DP waves of 4 + a two-tile Stream-K wave of 6.
    name, M, N, K = "fp16", 190, 96, 72
    gemm = StreamKGemm.create(M, N, K, name, 4, config=_config(name, 32, 32), schedule="hybrid", device=DEVICE)
    assert (gemm.plan.dp_tiles, gemm.plan.sk_tiles) == (12, 6) and _has_split_tile(gemm)
    a, b = _inputs(name, M, N, K, seed=3)
    c, flags, _ = _run(gemm, a, b)
    _check(name, a, b, c)
    assert (flags == 1).all()


@pytest.mark.parametrize("programs", [4, 5, 7])
def test_sk_first_order(programs):
    """The Stream-K share before the DP tiles: same result, every tile stored once by one of its programs."""
    name, M, N, K = "fp16", 190, 96, 72
    gemm = StreamKGemm.create(M, N, K, name, programs, config=_config(name, 32, 32), schedule="hybrid", sk_first=True,
                              device=DEVICE)
    p = gemm.plan
    assert p.sk_tiles > 0 and p.dp_tiles > 0 and _has_split_tile(gemm)
    a, b = _inputs(name, M, N, K, seed=4)
    c, flags, tr = _run(gemm, a, b)
    _check(name, a, b, c)
    assert (flags == gemm.epoch).all()
    assert _stored_by_its_pieces(p, tr.cpu())


@pytest.mark.parametrize(("rounds", "sk_first", "programs"),
                         [(2, False, 4), (3, False, 5), (4, False, 7), (2, True, 5)])
def test_sk_rounds(rounds, sk_first, programs):
    """Stream-K tiles in rounds of halving size: same result, every tile stored once by one of its programs, and a
    second launch (new epoch, slots and arrival counters reused) still right."""
    name, M, N, K = "bf16", 190, 96, 136
    gemm = StreamKGemm.create(M, N, K, name, programs, config=_config(name, 32, 32), schedule="hybrid",
                              sk_rounds=rounds, sk_first=sk_first, device=DEVICE)
    p = gemm.plan
    assert p.sk_rounds == rounds and len(set(p.round_bounds())) > 2, "at least two non-empty rounds"
    assert any(w.role == "piece" and w.round > 0 for pid in range(programs) for w in p.work_items(pid))
    for seed in (5, 6):
        a, b = _inputs(name, M, N, K, seed=seed)
        c, flags, tr = _run(gemm, a, b)
        _check(name, a, b, c)
        assert (flags == gemm.epoch).all()
        assert _stored_by_its_pieces(p, tr.cpu())


@pytest.mark.parametrize(("M", "N", "K", "schedule"), [(160, 96, 256, "dp"), (64, 96, 2048, "hybrid")])
def test_default_schedule_is_chosen_by_the_shape(M, N, K, schedule):
    """StreamKGemm.create's default schedule "auto": data-parallel where the last wave is nearly full (15 tiles,
    4 programs), the one-tile hybrid where it is far from full with long tiles (6 tiles of 128 K steps); both
    right, every tile stored once by one of its programs."""
    name = "fp16"
    gemm = StreamKGemm.create(M, N, K, name, 4, config=_config(name, 32, 32), device=DEVICE)
    p = gemm.plan
    assert p.schedule == schedule and (schedule == "dp" or (not p.two_tiles and p.sk_tiles == p.num_tiles % 4))
    a, b = _inputs(name, M, N, K, seed=21)
    c, flags, tr = _run(gemm, a, b)
    _check(name, a, b, c)
    assert (flags == gemm.epoch).all()
    assert _stored_by_its_pieces(p, tr.cpu())


def test_epochs_are_counted_on_the_device(monkeypatch):
    """Calls without epoch= take their epoch from the device's launch counter (so a graph replay gets a new one):
    tile flags and the host's count agree call after call, an explicit epoch= is honoured and the device's count
    goes on after it, and capturing a call with an explicit epoch is refused (the capture state faked: the CPU
    has no graphs; a GPU asks torch.cuda.is_current_stream_capturing the same way)."""
    name = "fp16"
    gemm = StreamKGemm.create(64, 96, 2048, name, 4, config=_config(name, 32, 32), device=DEVICE)
    assert gemm.plan.sk_tiles > 0
    a, b = _inputs(name, 64, 96, 2048, seed=3)
    for want in (1, 2):
        c, flags, _ = _run(gemm, a, b)
        _check(name, a, b, c)
        assert gemm.epoch == want and (flags == want).all()
        assert int(gemm.launches.item()) == want * gemm.plan.num_programs
    flags = torch.zeros(gemm.plan.num_tiles, dtype=torch.int32, device=DEVICE)
    c = torch.empty(64, 96, dtype=torch.float16, device=DEVICE)
    gemm(a, b, c, tile_flags=flags, epoch=7)
    assert (flags == 7).all() and gemm.epoch == 7
    gemm(a, b, c, tile_flags=flags)
    assert (flags == 8).all() and gemm.epoch == 8
    _check(name, a, b, c)
    monkeypatch.setattr(type(gemm.partials), "is_cuda", property(lambda self: True), raising=False)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    with pytest.raises(RuntimeError, match="explicit epoch"):
        gemm._refuse_capture(None)


def test_plain_calls_on_known_tensors_reuse_their_launch():
    """Plain calls rotating over a few input sets go straight to the launch bound for each (by the tensors'
    identity), stay right when the inputs' values change in place, and count epochs as before; a call with flags
    after them goes through the full path and its epoch follows."""
    name = "fp16"
    gemm = StreamKGemm.create(64, 96, 256, name, 4, config=_config(name, 32, 32), device=DEVICE)
    sets = [(*_inputs(name, 64, 96, 256, seed=s), _poisoned(gemm)) for s in range(3)]
    for _ in range(2):
        for a, b, c in sets:
            gemm(a, b, c)
            _check(name, a, b, c)
    assert len(gemm._plain) == 3 and gemm.epoch == 6
    a, b, c = sets[0]
    a.mul_(-1)  # new values, same tensor
    gemm(a, b, c)
    _check(name, a, b, c)
    flags = torch.zeros(gemm.plan.num_tiles, dtype=torch.int32, device=DEVICE)
    gemm(a, b, c, tile_flags=flags)
    assert gemm.epoch == 8 and (flags == 8).all() and int(gemm.launches.item()) == 8 * gemm.plan.num_programs


@pytest.mark.skipif(not HAS_GPU or INTERPRET, reason="CUDA graphs need a GPU")
@pytest.mark.parametrize("schedule", ["dp", "hybrid"])
def test_graph_capture_on_a_gpu(schedule):
    """On a GPU: a captured launch, data-parallel or with Stream-K tiles (whose fix-up waits on the epoch), stays
    right replay after replay with new inputs, its tile flags carry a new epoch each time; capturing a call with
    an explicit epoch is refused before anything is recorded."""
    name, M, N, K = "bf16", 1024, 1024, 2048
    gemm = StreamKGemm.create(M, N, K, name, 24, schedule=schedule, device=DEVICE)
    assert (gemm.plan.sk_tiles > 0) == (schedule == "hybrid")
    a, b = _inputs(name, M, N, K, seed=7)
    c = torch.empty(M, N, dtype=torch.bfloat16, device=DEVICE)
    flags = torch.zeros(gemm.plan.num_tiles, dtype=torch.int32, device=DEVICE)
    gemm(a, b, c, tile_flags=flags)  # compile and bind outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        gemm(a, b, c, tile_flags=flags)
    for i, seed in enumerate((8, 9, 10)):
        na, nb = _inputs(name, M, N, K, seed=seed)
        a.copy_(na)
        b.copy_(nb)
        graph.replay()
        torch.cuda.synchronize()
        _check(name, a, b, c)
        assert (flags == 2 + i).all(), "each replay a new epoch"
    gemm.check_errors()
    with pytest.raises(RuntimeError, match="explicit epoch"), torch.cuda.graph(torch.cuda.CUDAGraph()):
        gemm(a, b, c, epoch=100)


def test_sk_rounds_with_empty_pieces():
    """4 rounds cut each last-round tile into 8 pieces of a 4-step K loop: half the pieces hold no
    iterations, publish nothing, and are not counted as pieces."""
    name, M, N, K = "fp32", 64, 96, 64
    gemm = StreamKGemm.create(M, N, K, name, 16, config=_config(name, 32, 32), schedule="sk", sk_rounds=4,
                              device=DEVICE)
    p = gemm.plan
    assert p.iters_per_tile == 4 and p.split == 8 and p.round_split(3)[2] >= 1
    assert any(p.sk_range(pid, 3)[0] == p.sk_range(pid, 3)[1] for pid in range(p.round_split(3)[2] * 8))
    a, b = _inputs(name, M, N, K, seed=15)
    c, flags, tr = _run(gemm, a, b)
    _check(name, a, b, c)
    assert (flags == gemm.epoch).all()
    assert _stored_by_its_pieces(p, tr.cpu())


def test_deterministic_and_epochs_advance():
    name, M, N, K = "fp32", 37, 45, 90
    gemm = StreamKGemm.create(M, N, K, name, 7, config=_config(name), schedule="sk", device=DEVICE)
    a, b = _inputs(name, M, N, K, seed=4)
    c1, f1, _ = _run(gemm, a, b, trace=False)
    c2, f2, _ = _run(gemm, a, b, trace=False)
    assert torch.equal(c1, c2), "two runs must be bit-identical"
    assert (f1 == 1).all() and (f2 == 2).all() and gemm.epoch == 2
    with pytest.raises(ValueError, match="epoch"):
        gemm(a, b, c1, epoch=2)
    gemm(a, b, c1, epoch=10)
    assert gemm.epoch == 10


def test_strided_inputs():
    name, M, N, K = "fp16", 37, 45, 50
    gemm = StreamKGemm.create(M, N, K, name, 3, config=_config(name), schedule="sk", device=DEVICE)
    g = torch.Generator().manual_seed(5)
    a = torch.randn(K, M, generator=g).to(TORCH[name]).to(DEVICE).t()  # M x K, column-major
    b = torch.randn(N, K, generator=g).to(TORCH[name]).to(DEVICE).t()  # K x N, column-major
    c, _, _ = _run(gemm, a, b, trace=False)
    _check(name, a, b, c)


@triton.jit
def _plus_one_epilogue(acc, rm, rn, row0, M, N, C, stride_cm, stride_cn, tile_id, TILE_FLAGS, epoch, CTX):
    """Stores acc + 1 where row0 is rm's first row (acc + 1000 where it is not) and counts the calls that carry the
    tile's flag in TILE_FLAGS, by the same 1 or 1000 (a test of the hook, not a real epilogue)."""
    step = tl.where(row0 == tl.min(rm, axis=0), 1, 1000)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(C + rm[:, None] * stride_cm + rn[None, :] * stride_cn, (acc + step).to(C.dtype.element_ty), mask=mask)
    if TILE_FLAGS is not None:
        tl.atomic_add(TILE_FLAGS + tile_id, step)


@pytest.mark.parametrize(("name", "M", "N", "K", "schedule", "programs", "config"), [
    ("fp32", 37, 45, 50, "sk", 7, _config("fp32")),
    ("fp32", 37, 45, 50, "dp", 7, _config("fp32")),
    ("fp32", 37, 45, 50, "splitk", 27, _config("fp32")),
    ("fp16", 37, 100, 50, "dp", 3, KernelConfig(16, 48, 16, num_stages=2, num_warps=4, tma=True)),
])
def test_custom_epilogue_runs_once_per_tile(name, M, N, K, schedule, programs, config):
    """The EPILOGUE hook, with row0 rm's first row: once per tile from whole tiles, the fix-up and split-K; once per
    column block from a tile of two blocks, the tile's flag with one of them."""
    gemm = StreamKGemm.create(M, N, K, name, programs, config=config, schedule=schedule, device=DEVICE)
    assert (width_parts(gemm.plan.BLK_N)[1] > 0) == config.tma
    assert schedule != "sk" or _has_split_tile(gemm)  # the fix-up runs the EPILOGUE for some tile
    a, b = _inputs(name, M, N, K, seed=7)
    c = _poisoned(gemm)
    calls = torch.zeros(gemm.plan.num_tiles, dtype=torch.int32, device=DEVICE)
    gemm(a, b, c, tile_flags=calls, epilogue=_plus_one_epilogue)
    gemm.check_errors()
    assert (calls == 1).all()
    _check(name, a, b, c.double() - 1)


@triton.jit
def _fused_like_kernel(A, B, C, WORK, TILE_FLAGS, GEMM_TRACE, SIZES, sk_tiles, epoch, CTX, TILING, SCHEDULE,
                       EPILOGUE: tl.constexpr, P_DESC, B1, SEEN, gemm_programs, waiter_spins, REVERSED: tl.constexpr):
    """Programs < gemm_programs run the GEMM (in reverse order of pids with REVERSED); the next one waits on every
    tile flag."""
    pid = tl.program_id(0)
    if pid < gemm_programs:
        gpid = pid
        if REVERSED:
            gpid = gemm_programs - 1 - pid
        streamk_program(gpid, gemm_programs, A, B, C, WORK, TILE_FLAGS, GEMM_TRACE, SIZES, sk_tiles, epoch, CTX,
                        TILING, SCHEDULE, EPILOGUE, P_DESC, None, B1)
    else:
        num_tiles = tl.cdiv(SIZES.M, TILING.BLK_M) * tl.cdiv(SIZES.N, TILING.BLK_N)
        for t in range(num_tiles):
            if wait_local(TILE_FLAGS + t, epoch, waiter_spins, "gpu"):
                tl.atomic_add(SEEN, 1)


def _launch_fused(gemm: StreamKGemm, a, b, c, flags, seen, reversed_order: bool = False, trace=None) -> None:
    args = gemm.launch_args(a, b, c, tile_flags=flags, gemm_trace=trace)
    # the interpreter ignores a keyword the kernel lacks; a GPU launch refuses it
    assert set(args) <= set(_fused_like_kernel.arg_names), set(args) - set(_fused_like_kernel.arg_names)
    programs = gemm.plan.num_programs
    waiter_spins = min(2**31 - 1, gemm.max_spins * 1000 + 1000)
    _fused_like_kernel[(programs + 1,)](**args, SEEN=seen, gemm_programs=programs, waiter_spins=waiter_spins,
                                        REVERSED=reversed_order, **gemm.launch_options())


def test_fused_kernel_calls_streamk_program():
    name, M, N, K = "fp16", 37, 45, 50
    gemm = StreamKGemm.create(M, N, K, name, 3, config=_config(name), schedule="sk", device=DEVICE)
    a, b = _inputs(name, M, N, K, seed=8)
    c = _poisoned(gemm)
    flags = torch.zeros(gemm.plan.num_tiles, dtype=torch.int32, device=DEVICE)
    seen = torch.zeros(1, dtype=torch.int32, device=DEVICE)
    _launch_fused(gemm, a, b, c, flags, seen)
    gemm.check_errors()
    _check(name, a, b, c)
    assert seen.item() == gemm.plan.num_tiles


def test_pieces_arriving_in_any_order_give_the_same_bits():
    """Programs run in reverse pid order (the interpreter runs them one after another, so the lowest pid of each
    split tile arrives last and sums): the same bits as in pid order, every tile stored once, by one of its
    programs, and the arrival counters back at 0 for the next launch."""
    name, M, N, K = "fp32", 32, 16, 320
    gemm = StreamKGemm.create(M, N, K, name, 5, config=_config(name), schedule="sk", device=DEVICE)
    p = gemm.plan
    assert max(len(p.piece_programs(t)) for t in range(p.num_tiles)) >= 3
    a, b = _inputs(name, M, N, K, seed=9)
    outs = []
    for reversed_order in (False, True):
        c = _poisoned(gemm)
        flags = torch.zeros(p.num_tiles, dtype=torch.int32, device=DEVICE)
        seen = torch.zeros(1, dtype=torch.int32, device=DEVICE)
        tr = torch.full((p.num_tiles, 3), -1, dtype=torch.int64, device=DEVICE)
        _launch_fused(gemm, a, b, c, flags, seen, reversed_order, trace=tr)
        gemm.check_errors()
        _check(name, a, b, c)
        assert seen.item() == p.num_tiles and _stored_by_its_pieces(p, tr.cpu())
        assert (gemm.locks == 0).all(), "every arrival counter reset by the tile's last piece"
        outs.append(c.clone())
    assert torch.equal(outs[0], outs[1])


@triton.jit
def _store_and_note_row(acc, rm, rn, row0, M, N, C, stride_cm, stride_cn, tile_id, TILE_FLAGS, epoch, CTX):
    """Store the tile and note, per tile id, which tile row it was (row0 // BLK_M)."""
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(C + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(C.dtype.element_ty), mask=mask)
    tl.store(TILE_FLAGS + tile_id, row0 // rm.shape[0])


@pytest.mark.parametrize("schedule,shift", [("dp", 0), ("dp", 2), ("sk", 3), ("sk", 7)])
def test_row_shift_rotates_the_tile_rows(schedule: str, shift: int):
    """launch_args(row_shift=s): tile id t computes tile row (its row in the plain order + s) mod tiles_m, so the
    GEMM starts s tile rows down and wraps around; every tile is still computed once and C is the product."""
    from streamk_pgas.stream_k.tiles import tile_coords_host

    name, M, N, K = "fp16", 80, 48, 40  # 5 x 3 tiles of 16 x 16
    gemm = StreamKGemm.create(M, N, K, name, 4, config=_config(name), schedule=schedule, device=DEVICE)
    p = gemm.plan
    a, b = _inputs(name, M, N, K, seed=21)
    c = _poisoned(gemm)
    rows = torch.full((p.num_tiles,), -1, dtype=torch.int32, device=DEVICE)
    args = gemm.launch_args(a, b, c, tile_flags=rows, epilogue=_store_and_note_row, row_shift=shift)
    streamk_gemm_kernel[(p.num_programs,)](**args, **gemm.launch_options())
    gemm.check_errors()
    _check(name, a, b, c)
    want = [(tile_coords_host(t, p.tiles_m, p.tiles_n, p.gsize_m)[0] + shift) % p.tiles_m for t in range(p.num_tiles)]
    assert rows.cpu().tolist() == want


def test_xcd_remap_covers_every_tile():
    # NUM_XCDS > 1 renumbers programs; with the DP schedule (no waits) it must still write every tile once.
    name, M, N, K = "fp16", 37, 45, 50
    gemm = StreamKGemm.create(M, N, K, name, 7, config=_config(name), schedule="dp", device=DEVICE)
    a, b = _inputs(name, M, N, K, seed=12)
    c = _poisoned(gemm)
    tr = torch.full((gemm.plan.num_tiles, 3), -1, dtype=torch.int64, device=DEVICE)
    args = gemm.launch_args(a, b, c, gemm_trace=tr)
    args["SCHEDULE"] = args["SCHEDULE"]._replace(NUM_XCDS=tl.constexpr(4))
    streamk_gemm_kernel[(gemm.plan.num_programs,)](**args, **gemm.launch_options())
    _check(name, a, b, c)
    assert _stored_by_its_pieces(gemm.plan, tr)


@pytest.mark.skipif(HAS_GPU and torch.cuda.get_device_capability()[0] < 9, reason="TMA needs sm_90+")
@pytest.mark.parametrize("name", ["fp16", "fp32"])
def test_tma_path(name):
    M, N, K = 37, 48, 56  # rows of A and B 16-byte aligned, K ragged: the copy engine zero-fills the tail
    gemm = StreamKGemm.create(M, N, K, name, 4, config=_config(name).replace(tma=True), schedule="sk",
                              device=DEVICE)
    assert _has_split_tile(gemm)
    a, b = _inputs(name, M, N, K, seed=11)
    c, flags, _ = _run(gemm, a, b)
    _check(name, a, b, c)
    assert (flags == 1).all() and gemm.staged_copies == 0
    c2, _, _ = _run(gemm, a.t().contiguous().t(), b)  # A column-major: copied into the staging buffer, then read
    _check(name, a, b, c2)
    assert gemm.staged_copies == 1


@pytest.mark.skipif(HAS_GPU and torch.cuda.get_device_capability()[0] < 9, reason="TMA needs sm_90+")
@pytest.mark.parametrize("rounds", [1, 3])
def test_tma_fixup_reads_partials_through_a_descriptor(rounds):
    """Tiles of two to seven pieces: the last to arrive reads the partials in column halves through P_DESC."""
    name, M, N, K = "fp32", 64, 64, 160
    gemm = StreamKGemm.create(M, N, K, name, 7, config=_config(name, 32, 32).replace(tma=True), schedule="sk",
                              sk_rounds=rounds, device=DEVICE)
    p = gemm.plan
    counts = {len(w.programs) for pid in range(7) for w in p.work_items(pid) if w.role == "piece"}
    assert max(counts) >= 3 and min(counts) >= 2  # R=1: tiles of 2 and 3 pieces; R=3: 4 and 7
    assert gemm.launch_args(*_inputs(name, M, N, K), _poisoned(gemm))["P_DESC"] is not None
    for seed in (13, 14):
        a, b = _inputs(name, M, N, K, seed=seed)
        c, flags, _ = _run(gemm, a, b)
        _check(name, a, b, c)
        assert (flags == gemm.epoch).all()


@pytest.mark.skipif(HAS_GPU and torch.cuda.get_device_capability()[0] < 9, reason="TMA needs sm_90+")
def test_rows_of_eight_elements_read_in_place_on_sm90():
    """On sm_90 the GEMM's default is the copy engine (TMA): contiguous fp16 rows that are a multiple of 8 elements
    (16 bytes) but not of 16 are read and written in place, with no staging copy; rows of 12 elements (24 bytes)
    are copied once per call into the GEMM's staging buffer, with the same result. (The interpreter's small tile
    stands in for the sm_90 one; the path is the same.)"""
    from streamk_pgas.stream_k.kernel import store_tma_and_signal
    from streamk_pgas.stream_k.select import choose_gemm

    name, M, N, K = "fp16", 40, 56, 24
    assert choose_gemm(M, N, K, name, 4, "sm90").config.tma
    cfg = _config(name).replace(tma=True)
    gemm = StreamKGemm.create(M, N, K, name, 4, config=cfg, device=DEVICE)
    a, b = _inputs(name, M, N, K, seed=23)
    c = _poisoned(gemm)
    assert gemm.launch_args(a, b, c)["EPILOGUE"] is store_tma_and_signal
    gemm(a, b, c)
    _check(name, a, b, c)
    assert gemm.staged_copies == 0
    odd = StreamKGemm.create(M, N, 12, name, 4, config=cfg, device=DEVICE)
    a_odd, b_odd = _inputs(name, M, N, 12, seed=24)  # A's rows: 12 elements (24 bytes)
    c_odd = _poisoned(odd)
    odd(a_odd, b_odd, c_odd)
    _check(name, a_odd, b_odd, c_odd)
    assert odd.staged_copies == 1


@pytest.mark.parametrize("schedule", ["hybrid", "splitk"])
def test_pointer_path_states_rows_of_sixteen_bytes(schedule):
    """Without TMA, rows that are a multiple of 8 fp16 elements (16 bytes) but not of 16 are read in place and
    the kernel is told so (STRIDE_ALIGN 8: its loads may be 16-byte vectors); rows of 16-element multiples and rows
    of other lengths are not (1), and every case is right."""
    name, M, N = "fp16", 40, 56
    cfg = _config(name).replace(tma=False)
    for K, n, align in ((24, N, 8), (32, 64, 1), (20, N, 1)):
        split = {"programs": 64, "split_k": 2} if schedule == "splitk" else {"programs": 4}
        gemm = StreamKGemm.create(M, n, K, name, split.pop("programs"), config=cfg, schedule=schedule, device=DEVICE,
                                  **split)
        a, b = _inputs(name, M, n, K, seed=K)
        c = _poisoned(gemm)
        assert gemm.launch_args(a, b, c)["TILING"].STRIDE_ALIGN == align
        gemm(a, b, c)
        _check(name, a, b, c)
        assert gemm.staged_copies == 0


def test_matmul_and_argument_checks():
    a, b = _inputs("fp16", 40, 24, 33, seed=10)
    _check("fp16", a, b, matmul(a, b, 3, BLK_M=16, BLK_N=16, BLK_K=16, num_stages=2, num_warps=4))
    gemm = StreamKGemm.create(40, 24, 33, "fp16", 3, config=_config("fp16"), device=DEVICE)
    c = _poisoned(gemm)
    with pytest.raises(ValueError, match="shape"):
        gemm(a, a, c)
    with pytest.raises(ValueError, match="b must be"):
        gemm(a, b.float(), c)
    with pytest.raises(ValueError, match="BLK_K"):
        StreamKGemm.create(40, 24, 33, "int8", 3, config=_config("fp16"), device=DEVICE)
    info = gemm.info()
    assert info["plan"]["num_programs"] == 3 and info["unused_options"] == []
    amd = _config("fp16").replace(waves_per_eu=2, kpack=2, num_xcds=8)
    if not getattr(torch.version, "hip", None):
        g = StreamKGemm.create(40, 24, 33, "fp16", 3, config=amd, device=DEVICE)
        assert sorted(g.unused_options) == ["kpack", "num_xcds", "waves_per_eu"]


@pytest.mark.parametrize(("M", "N", "K", "blk_n"), [(37, 100, 50, 48), (64, 170, 64, 80), (40, 96, 40, 96),
                                                     (70, 200, 48, 160)])
@pytest.mark.parametrize("name", ["fp16", "bf16"])
def test_tiles_of_two_column_blocks(name, M, N, K, blk_n):
    """A tile 3 or 5 times a power of two wide (two column blocks, two accumulators, one K loop; TMA): right at the
    edges and on a ragged K, every tile's flag released once (after both blocks), traced once, on 3 programs."""
    cfg = KernelConfig(16, blk_n, 16, num_stages=2, num_warps=4, tma=True)
    gemm = StreamKGemm.create(M, N, K, name, 3, config=cfg, device=DEVICE)
    assert gemm.plan.schedule == "dp" and width_parts(gemm.plan.BLK_N)[1] > 0
    a, b = _inputs(name, M, N, K, seed=blk_n)
    for _ in range(2):
        c, flags, tr = _run(gemm, a, b)
        _check(name, a, b, c)
        assert (flags == gemm.epoch).all()
        assert _stored_by_its_pieces(gemm.plan, tr.cpu())


def test_tiles_of_two_column_blocks_need_tma():
    with pytest.raises(ValueError, match="tma"):
        StreamKGemm.create(40, 96, 40, "fp16", 3, config=KernelConfig(16, 96, 16, 2, 4), device=DEVICE)


@pytest.mark.parametrize("tma", [False, True])
@pytest.mark.parametrize(("name", "M", "N", "K", "split_k"), [("fp16", 40, 48, 200, None), ("bf16", 33, 40, 70, 4),
                                                              ("fp32", 33, 16, 70, 3), ("int8", 20, 40, 64, 2)])
def test_split_k(name, M, N, K, split_k, tma):
    """Split-K: every piece one program; the tile's last piece sums the S partials in order: right, bit-identical run
    to run, flags released once per tile by one of its programs, counters back at 0."""
    if tma and name in ("fp32", "int8"):
        pytest.skip("the copy-engine path is tested with bf16 / fp16")
    cfg = KernelConfig(16, 32 if name == "int8" else 16, 32 if name == "int8" else 16, 2, 4, tma=tma)
    gemm = StreamKGemm.create(M, N, K, name, 40, config=cfg, schedule="splitk", split_k=split_k, device=DEVICE)
    p = gemm.plan
    assert p.schedule == "splitk" and p.num_programs == p.num_tiles * p.split_k
    a, b = _inputs(name, M, N, K, seed=11)
    c1, f1, tr = _run(gemm, a, b)
    _check(name, a, b, c1)
    assert (f1 == 1).all() and _stored_by_its_pieces(p, tr.cpu()) and (gemm.locks == 0).all()
    c2, f2, _ = _run(gemm, a, b, trace=False)
    assert torch.equal(c1, c2) and (f2 == 2).all()


def test_split_k_pieces_arriving_in_any_order_give_the_same_bits():
    """Split-K pieces run in reverse pid order (the interpreter runs programs one after another, so the first piece
    of each tile arrives last and sums): the same bits as in pid order."""
    name, M, N, K = "fp32", 32, 16, 320
    gemm = StreamKGemm.create(M, N, K, name, 12, config=_config(name), schedule="splitk", split_k=5, device=DEVICE)
    a, b = _inputs(name, M, N, K, seed=12)
    outs = []
    for reversed_order in (False, True):
        c = _poisoned(gemm)
        flags = torch.zeros(gemm.plan.num_tiles, dtype=torch.int32, device=DEVICE)
        seen = torch.zeros(1, dtype=torch.int32, device=DEVICE)
        _launch_fused(gemm, a, b, c, flags, seen, reversed_order)
        gemm.check_errors()
        _check(name, a, b, c)
        assert seen.item() == gemm.plan.num_tiles and (gemm.locks == 0).all()
        outs.append(c.clone())
    assert torch.equal(outs[0], outs[1])
