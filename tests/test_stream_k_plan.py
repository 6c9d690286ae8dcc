"""Stream-K work split (host only): coverage, balance, pieces and slots, schedule choice, input checks."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from streamk_pgas.stream_k.plan import StreamKPlan, plan_streamk, tile_coords

SHAPES = [
    # M, N, K, BLK_M, BLK_N, BLK_K
    (37, 45, 50, 16, 16, 16),
    (64, 64, 64, 16, 16, 16),
    (16, 16, 160, 16, 16, 16),
    (1000, 700, 300, 64, 128, 32),
    (8192, 8192, 8192, 128, 256, 64),
    (4864, 4096, 8256, 128, 256, 64),
]
PROGRAMS = [1, 2, 3, 7, 13, 132]


def _check_plan(plan: StreamKPlan) -> None:
    ipt = plan.iters_per_tile
    covered: Counter[tuple[int, int]] = Counter()
    whole: Counter[int] = Counter()
    pieces: dict[int, list[int]] = defaultdict(list)
    slots: Counter[int] = Counter()
    sk_iters: dict[int, list[int]] = defaultdict(list)
    bounds = plan.round_bounds()
    for pid in range(plan.num_programs):
        items = plan.work_items(pid)
        sk_all = [w for w in items if w.round > 0 or w.tile_id >= plan.dp_tiles]
        assert [w.round for w in sk_all] == sorted(w.round for w in sk_all), "rounds one after another"
        for r in range(plan.sk_rounds):
            sk = [w for w in sk_all if w.round == r]
            sk_iters[r].append(sum(w.k_hi - w.k_lo for w in sk))
            first = plan.dp_tiles + bounds[r]
            assert all(first <= w.tile_id < plan.dp_tiles + bounds[r + 1] for w in sk)
            assert [w.tile_id for w in sk] == sorted((w.tile_id for w in sk), reverse=True), "reverse tile order"
            # a range meets at most two split tiles, at its ends: the end's piece first (side 1), the start's last
            split = [w for w in sk if w.role == "piece"]
            assert len(split) <= 2 and all(w.slot // 2 == r * plan.num_programs + pid for w in split)
            if len(split) == 2:
                assert (split[0].slot % 2, split[1].slot % 2) == (1, 0)
        for w in items:
            assert 0 <= w.k_lo < w.k_hi <= ipt
            for k in range(w.k_lo, w.k_hi):
                covered[(w.tile_id, k)] += 1
            if w.role == "piece":
                pieces[w.tile_id].append(pid)
                slots[w.slot] += 1
                assert (w.k_lo, w.k_hi) != (0, ipt) and pid in w.programs
                assert w.programs == plan.piece_programs(w.tile_id)
            else:
                assert w.role == "dp" and (w.k_lo, w.k_hi) == (0, ipt)
                whole[w.tile_id] += 1
                assert plan.piece_programs(w.tile_id) == (pid,) or w.tile_id >= plan.dp_tiles
    # Every iteration of every tile exactly once; every tile whole once or in pieces of the programs named.
    assert set(covered) == {(t, k) for t in range(plan.num_tiles) for k in range(ipt)}
    assert set(covered.values()) == {1}
    assert set(whole.values()) <= {1} and not set(whole) & set(pieces)
    assert set(whole) | set(pieces) == set(range(plan.num_tiles))
    for tile, pids in pieces.items():
        assert len(pids) >= 2 and tuple(sorted(pids)) == plan.piece_programs(tile)
    assert set(slots.values()) <= {1}, "no two pieces share a workspace slot"
    assert all(0 <= s < plan.partials_shape[0] for s in slots)
    # In every round the Stream-K shares differ by at most one iteration and add up; in the aligned
    # last round each program has one piece of one tile (or none: pid >= L * S).
    for r in range(plan.sk_rounds):
        first, ipp, rem = plan.round_split(r)
        assert sum(sk_iters[r]) == (bounds[r + 1] - bounds[r]) * ipt
        if plan.aligned(r):
            assert (ipp, rem) == (plan.split, bounds[r + 1] - bounds[r])
            active = sk_iters[r][: rem * ipp]
            assert not active or max(active) - min(active) <= 1
            assert all(n == 0 for n in sk_iters[r][rem * ipp:])
            for pid in range(plan.num_programs):
                assert len([w for w in plan.work_items(pid) if w.round == r]) <= 1
        else:
            assert max(sk_iters[r]) - min(sk_iters[r]) <= 1
            assert ipp * plan.num_programs + rem == (bounds[r + 1] - bounds[r]) * ipt
    assert sum(map(sum, sk_iters.values())) == plan.sk_iters_total == plan.sk_tiles * ipt
    # Whole DP waves in the hybrid schedule.
    if plan.schedule == "hybrid":
        assert plan.dp_tiles % plan.num_programs == 0


@pytest.mark.parametrize("schedule", ["hybrid", "dp", "sk"])
@pytest.mark.parametrize("programs", PROGRAMS)
@pytest.mark.parametrize("shape", SHAPES)
def test_plan_covers_every_iteration_once(shape, programs, schedule):
    plan = plan_streamk(*shape, programs, schedule=schedule)
    _check_plan(plan)


@pytest.mark.parametrize("programs", [2, 5, 7, 64])
@pytest.mark.parametrize("shape", SHAPES)
def test_sk_first_plan_covers_every_iteration_once_sk_items_first(shape, programs):
    plan = plan_streamk(*shape, programs, sk_first=True)
    _check_plan(plan)
    for pid in range(programs):
        roles = [w.tile_id < plan.dp_tiles for w in plan.work_items(pid)]
        assert roles == sorted(roles), "with sk_first every Stream-K item comes before the DP tiles"
    assert plan_streamk(*shape, programs).work_items(0) != plan.work_items(0) or plan.sk_tiles == 0 \
        or plan.dp_tiles == 0


@pytest.mark.parametrize("rounds", [2, 3, 4])
@pytest.mark.parametrize("programs", [1, 2, 7, 13, 132])
@pytest.mark.parametrize("shape", SHAPES)
def test_rounds_plan_covers_every_iteration_once(shape, programs, rounds):
    plan = plan_streamk(*shape, programs, sk_rounds=rounds)
    _check_plan(plan)
    _check_plan(plan_streamk(*shape, programs, sk_rounds=rounds, sk_first=True))


def test_rounds_halve_and_shrink_the_last_group():
    # 4864 x 4096 x 8256 on two ranks (K 4128 each) over 116 programs: 4 DP waves and 144 SK tiles.
    one = plan_streamk(4864, 4096, 4128, 128, 256, 64, 116)
    assert (one.dp_tiles, one.sk_tiles, one.round_bounds()) == (464, 144, (0, 144))
    last_tiles = []
    # With R rounds the last one holds 116 // 2^(R-1) tiles cut into 2^(R-1) pieces, one per program.
    for rounds, bounds in [(1, (0, 144)), (2, (0, 86, 144)), (3, (0, 76, 115, 144))]:
        plan = plan_streamk(4864, 4096, 4128, 128, 256, 64, 116, sk_rounds=rounds)
        assert plan.round_bounds() == bounds
        assert plan.partials_shape == (2 * rounds * 116, 128, 256) and plan.locks_len == plan.num_tiles
        # The tiles the programs finish on: the ones that complete together at the GEMM's end.
        last_tiles.append(len({plan.work_items(pid)[-1].tile_id for pid in range(116)}))
        assert plan.max_iters_per_program() <= one.max_iters_per_program() + rounds - 1
    assert last_tiles == [116, 58, 29]


@pytest.mark.parametrize("rounds", [0, 5, 1.5])
def test_rounds_out_of_range_are_refused(rounds):
    with pytest.raises(ValueError, match=r"sk_rounds must be an integer in 1\.\.4"):
        plan_streamk(64, 64, 64, 16, 16, 16, 2, sk_rounds=rounds)


@pytest.mark.parametrize("programs", [1, 2, 5, 64])
def test_plan_without_two_tiles(programs):
    plan = plan_streamk(1000, 700, 300, 64, 128, 32, programs, two_tiles=False)
    _check_plan(plan)
    assert plan.sk_tiles == plan.num_tiles % programs


def test_tile_order_is_a_bijection():
    for tiles_m, tiles_n, g in [(3, 3, 8), (7, 19, 8), (10, 4, 3), (1, 5, 2)]:
        coords = {tile_coords(t, tiles_m, tiles_n, g) for t in range(tiles_m * tiles_n)}
        assert coords == {(m, n) for m in range(tiles_m) for n in range(tiles_n)}


def test_hybrid_choices():
    P = 132
    # tiles = P + 1 (7 x 19 tiles of 128 x 256): two-tile hybrid makes every tile Stream-K.
    plan = plan_streamk(7 * 128, 19 * 256, 8192, 128, 256, 64, P)
    assert plan.num_tiles == P + 1
    assert plan.sk_tiles == P + 1 and plan.dp_tiles == 0
    assert plan.max_iters_per_program() == plan.iters_per_tile * (P + 1) // P + 1
    one = plan_streamk(7 * 128, 19 * 256, 8192, 128, 256, 64, P, two_tiles=False)
    assert one.sk_tiles == 1 and one.dp_tiles == P
    # A multiple of P: all data-parallel.
    even = plan_streamk(8192, 8192, 8192, 128, 256, 64, 128)
    assert even.num_tiles % 128 == 0 and even.sk_tiles == 0
    # 8192^3 on 132 programs: 2048 tiles = 15 waves + 68: two-tile hybrid keeps 14 DP waves.
    big = plan_streamk(8192, 8192, 8192, 128, 256, 64, P)
    assert big.num_tiles == 2048 and big.sk_tiles == 2048 % P + P and big.dp_tiles == 14 * P
    # Fewer tiles than programs: all Stream-K.
    few = plan_streamk(37, 45, 50, 16, 16, 16, 20)
    assert few.num_tiles == 9 and few.sk_tiles == 9
    assert plan_streamk(37, 45, 50, 16, 16, 16, 3).sk_tiles == 0
    assert plan_streamk(37, 45, 50, 16, 16, 16, 2).sk_tiles == 3
    assert plan_streamk(8192, 8192, 8192, 128, 256, 64, P, schedule="dp").sk_tiles == 0
    assert plan_streamk(8192, 8192, 8192, 128, 256, 64, P, schedule="sk").sk_tiles == 2048


def test_split_tile_across_many_programs():
    plan = plan_streamk(16, 16, 160, 16, 16, 16, 4, schedule="sk")  # one tile, 10 iterations, 4 programs
    items = [plan.work_items(p) for p in range(4)]
    assert [sum(w.k_hi - w.k_lo for w in it) for it in items] == [3, 3, 2, 2]
    assert all(it[0].role == "piece" and it[0].programs == (0, 1, 2, 3) for it in items)
    # More programs than iterations: the extra programs idle.
    tiny = plan_streamk(16, 16, 32, 16, 16, 16, 5, schedule="sk")
    assert [len(tiny.work_items(p)) for p in range(5)] == [1, 1, 0, 0, 0]
    _check_plan(tiny)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("programs", [2, 7, 13, 132])
@pytest.mark.parametrize(("schedule", "two_tiles", "rounds"),
                         [("hybrid", True, 1), ("hybrid", False, 1), ("hybrid", True, 2), ("hybrid", False, 3),
                          ("sk", True, 2), ("dp", True, 1)])
def test_cost_terms_match_the_work_items(shape, programs, schedule, two_tiles, rounds):
    """fixup_pieces (per round: the most pieces of a split tile, which its last arriver reads) and final_tiles
    (tiles completing in the last wave or round) say what the kernel's loop, mirrored by work_items, does."""
    plan = plan_streamk(*shape, programs, schedule=schedule, two_tiles=two_tiles, sk_rounds=rounds)
    items = [w for pid in range(programs) for w in plan.work_items(pid)]
    most = [max((len(w.programs) for w in items if w.role == "piece" and w.round == r), default=0)
            for r in range(rounds)]
    assert plan.fixup_pieces() == most
    if plan.sk_tiles:
        last = rounds - 1
        assert plan.final_tiles() == len({w.tile_id for w in items if w.tile_id >= plan.dp_tiles and w.round == last})
    else:
        waves = -(-plan.dp_tiles // programs)
        assert plan.final_tiles() == sum(1 for t in range(plan.dp_tiles) if t // programs == waves - 1)
    assert plan.cost_iters() >= plan.max_iters_per_program()
    assert (plan.cost_iters() == plan.max_iters_per_program()) == (plan.sk_tiles == 0)


def test_auto_schedule_follows_the_shape():
    """schedule="auto" (the default of StreamKGemm): data-parallel where the last wave is nearly full or the
    leftover tiles are few, Stream-K on the leftover tiles only where the last wave is far from full; never the
    two-tile hybrid. The cases are shards of the model grid measured on one H200 (results/README.md)."""
    P = 132

    def auto(m, n, k):
        return plan_streamk(m, n, k, 128, 256, 64, P, schedule="auto")

    # 128 tiles on 132 programs: one data-parallel wave beats splitting every tile (0.98x vs 0.84x cuBLAS)
    assert auto(512, 8192, 4096).schedule == "dp"
    # 4096 tiles = 31 waves + 4: four leftover tiles split over 132 programs cost more than a 32nd wave
    assert auto(16384, 8192, 4096).schedule == "dp"
    # 512 tiles = 3 waves + 116 with long tiles (448 iterations): the leftover Stream-K wave (0.99x vs 0.83x)
    long_k = auto(4096, 4096, 28672)
    assert (long_k.schedule, long_k.two_tiles, long_k.sk_tiles) == ("hybrid", False, 512 % P)
    # 304 tiles = 2 waves + 40: a third data-parallel wave would idle two thirds of the SMs
    assert auto(4864, 2048, 8256).schedule == "hybrid"
    # whole waves (2048 tiles on 128 programs): data-parallel, no fix-up
    assert plan_streamk(8192, 8192, 8192, 128, 256, 64, 128, schedule="auto").schedule == "dp"
    for shape in SHAPES:
        for programs in PROGRAMS:
            plan = plan_streamk(*shape, programs, schedule="auto")
            assert plan.schedule in ("dp", "hybrid") and (plan.schedule == "dp" or not plan.two_tiles)
            others = [plan_streamk(*shape, programs, schedule=s, two_tiles=False) for s in ("dp", "hybrid")]
            assert plan.cost_iters() == min(o.cost_iters() for o in others)
            _check_plan(plan)


def test_workspace_sizes():
    plan = plan_streamk(100, 100, 100, 32, 64, 16, 6)
    assert plan.partials_shape == (12, 32, 64)
    assert plan.locks_len == plan.num_tiles == 8
    assert plan.even_k is False and plan.iters_per_tile == 7
    assert plan.as_dict()["num_tiles"] == 4 * 2


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"M": 0}, "M"), ({"N": -3}, "N"), ({"K": 0}, "K"),
        ({"BLK_M": 24}, "BLK_M"), ({"BLK_N": 8}, "BLK_N"), ({"BLK_K": 48}, "BLK_K"),
        ({"num_programs": 0}, "num_programs"), ({"gsize_m": 0}, "gsize_m"), ({"schedule": "fast"}, "schedule"),
    ],
)
def test_bad_inputs_raise(kwargs, name):
    args = {"M": 64, "N": 64, "K": 64, "BLK_M": 16, "BLK_N": 16, "BLK_K": 16, "num_programs": 4}
    extra = {k: kwargs.pop(k) for k in ("gsize_m", "schedule") if k in kwargs}
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        plan_streamk(*args.values(), **extra)


@pytest.mark.parametrize(("shape", "programs", "split_k"), [
    ((37, 45, 50, 16, 16, 16), 20, None), ((37, 45, 50, 16, 16, 16), 18, 2), ((64, 1280, 8192, 64, 64, 128), 132, None),
    ((128, 1280, 8192, 64, 64, 128), 132, 3), ((16, 16, 160, 16, 16, 16), 7, 7)])
def test_split_k_plan(shape, programs, split_k):
    """Split-K: one piece of one tile per program, pieces of a tile in K order, every iteration once, programs
    tiles * S (no more than asked for), S pieces read by the last to arrive."""
    M, N, K, bm, bn, bk = shape
    p = plan_streamk(M, N, K, bm, bn, bk, programs, schedule="splitk", split_k=split_k)
    s = p.split_k
    assert s >= 2 and (split_k is None or s == split_k)
    assert p.num_programs == p.num_tiles * s <= programs and p.sk_tiles == p.num_tiles and p.dp_tiles == 0
    covered: Counter[tuple[int, int]] = Counter()
    for pid in range(p.num_programs):
        (w,) = p.work_items(pid)
        assert w.role == "piece" and w.tile_id == pid // s and w.slot == pid and pid in w.programs
        assert w.programs == p.piece_programs(w.tile_id) == tuple(range(w.tile_id * s, w.tile_id * s + s))
        covered.update((w.tile_id, k) for k in range(w.k_lo, w.k_hi))
    assert set(covered) == {(t, k) for t in range(p.num_tiles) for k in range(p.iters_per_tile)}
    assert set(covered.values()) == {1}
    assert p.max_iters_per_program() == -(-p.iters_per_tile // s) and p.fixup_pieces() == [s]
    assert p.partials_shape[0] == p.num_programs and p.final_tiles() == p.num_tiles


@pytest.mark.parametrize(("M", "programs", "split_k"), [(64, 4, None), (64, 8, 3), (64, 132, 1), (64, 132, 200)])
def test_split_k_that_does_not_fit_is_refused(M, programs, split_k):
    with pytest.raises(ValueError, match="splitk"):
        plan_streamk(M, 64, 64, 16, 16, 16, programs, schedule="splitk", split_k=split_k)
    with pytest.raises(ValueError, match="split_k"):
        plan_streamk(M, 64, 64, 16, 16, 16, programs, schedule="hybrid", split_k=2)


def test_tiles_of_two_column_blocks_are_data_parallel():
    from streamk_pgas.stream_k.tiles import width_parts

    assert [width_parts(w) for w in (16, 48, 80, 96, 160, 192, 256, 320, 384)] == [
        (16, 0), (32, 16), (64, 16), (64, 32), (128, 32), (128, 64), (256, 0), (256, 64), (256, 128)]
    for bad in (8, 40, 112, 336, 24):
        with pytest.raises(ValueError, match="tile width"):
            width_parts(bad)
    p = plan_streamk(1024, 5120, 8192, 128, 320, 64, 132, schedule="auto")
    assert (p.schedule, p.sk_tiles, p.num_tiles, p.tiles_n) == ("dp", 0, 128, 16)
    _check_plan(p)
    with pytest.raises(ValueError, match="data-parallel only"):
        plan_streamk(1024, 5120, 8192, 128, 320, 64, 132, schedule="hybrid")
