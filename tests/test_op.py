"""The library op (overlap.OverlapOp) as a torch program calls it: every algorithm x mode right after many
steps back to back on 2 and 4 ranks (tests/mpi/op_back_to_back.py), its API on 2 ranks (bad arguments,
reuse, two ops on one heap, a step that times out; tests/mpi/op_api.py), the README example
(examples/op_example.py), and the config and heap sizing in this process.

In Triton's interpreter a step of the 32 x 32 x 32 problem costs ~0.2 s on 2 ranks and ~0.5 s on 4 (2 CPU
cores), for each of the 13 algorithm x mode combinations, so the back-to-back runs take fewer steps there
than on GPUs (200): STEPS_CPU below.
"""

from __future__ import annotations

import re

import pytest
import torch
from conftest import MPI_DIR, REPO_ROOT, on_gpu, run_mpi, skip_unless_ranks

from streamk_pgas import iris_ops, spec
from streamk_pgas.overlap import InvalidConfig, OverlapConfig, OverlapOp, heap_bytes, resolve_config
from streamk_pgas.overlap.target import device_target
from streamk_pgas.stream_k import KernelConfig

B2B = str(MPI_DIR / "op_back_to_back.py")
API = str(MPI_DIR / "op_api.py")
EXAMPLE = str(REPO_ROOT / "examples" / "op_example.py")
ALGORITHMS = ("all_reduce", "all_scatter", "one_shot")
COMBOS = {(alg, mode) for alg in ALGORITHMS for mode in spec.ALGORITHMS[alg].modes}

# Back-to-back steps per combination: 200 on GPUs; in the interpreter what fits CI's 20 minutes (~5 min
# for this file on 2 CPU cores): a step over the 13 combinations costs ~2.5 s on 2 ranks and ~6.5 s on 4
# (200 steps would take ~8 and ~21 minutes).
STEPS_CPU = {2: 8, 4: 4}  # the interpreter; test_c_poisoned_between_steps_is_rewritten runs POISON_STEPS_CPU
# C poisoned between steps: C is checked after the last step only, which rewrites every element whatever the
# steps before it did, so 4 steps (poisoned 3 times) in the interpreter prove what 20 do on GPUs
POISON_STEPS_CPU = 4


def steps_for(nprocs: int) -> int:
    return 200 if on_gpu() else STEPS_CPU[nprocs]


def check_b2b_output(out: str, nprocs: int, steps: int) -> None:
    assert "OP_B2B_FAIL" not in out, out
    ok = re.findall(r"OP_B2B_OK (\w+) (\w+) ranks (\d+) steps (\d+) err (\S+)", out)
    assert {(alg, mode) for alg, mode, *_ in ok} == COMBOS, out
    for alg, mode, ranks, n, err in ok:
        assert (int(ranks), int(n)) == (nprocs, steps), (alg, mode, ranks, n)
        assert float(err) <= 1e-4, (alg, mode, err)
    assert f"OP_B2B_DONE {len(COMBOS)} combinations" in out, out
    same_bits = set(re.findall(r"OP_B2B_OK (\w+) (\w+) .*same_bits", out))
    assert same_bits == {(alg, mode) for alg, mode in COMBOS if alg in ("all_reduce", "one_shot")}, out


@pytest.mark.slow
@pytest.mark.parametrize("nprocs", [2, 4])
def test_every_combination_right_after_steps_back_to_back(nprocs: int) -> None:
    """Every algorithm x mode: C right on every rank after many steps with nothing between them; the first
    combination also sees new inputs written into op.a / op.b at the next step."""
    skip_unless_ranks(nprocs)
    steps = steps_for(nprocs)
    result = run_mpi(nprocs, B2B, "--steps", str(steps), timeout=600)
    check_b2b_output(result.stdout, nprocs, steps)
    assert "new_inputs ok" in result.stdout, result.stdout


@pytest.mark.slow
def test_reduce_family_rotating_inputs_c_read_between_steps_and_graph_replays() -> None:
    """all_reduce and one_shot in every mode: steps on three user input pairs in rotation with a row of C read
    after each, every row right; on GPUs at 4 ranks, 200 steps, then 200 replays of a captured step (inputs
    copied into the captured tensors between replays). The interpreter: 2 ranks, 3 steps."""
    nprocs, steps = (4, 200) if on_gpu() else (2, 3)
    skip_unless_ranks(nprocs)
    combos = {(a, m) for a, m in COMBOS if a in ("all_reduce", "one_shot")}
    runs = [["--rotate"], ["--graph"]] if on_gpu() else [["--rotate"]]
    for extra in runs:
        out = run_mpi(nprocs, B2B, "--steps", str(steps), "--algorithms", "all_reduce,one_shot", *extra,
                      timeout=900).stdout
        assert "OP_B2B_FAIL" not in out, out
        what = "graph_replays" if extra == ["--graph"] else "rotating"
        ok = re.findall(rf"OP_B2B_OK (\w+) (\w+) ranks {nprocs} steps {steps} err (\S+) {what}", out)
        assert {(a, m) for a, m, _ in ok} == combos, out
        assert all(float(e) <= 1e-4 for *_, e in ok), out


@pytest.mark.slow
def test_c_poisoned_between_steps_is_rewritten() -> None:
    """op.c filled with NaN between every two steps (allowed by the stream semantics): the next step still
    writes every element, for every algorithm x mode (POISON_STEPS_CPU steps in the interpreter)."""
    steps = 20 if on_gpu() else POISON_STEPS_CPU
    result = run_mpi(2, B2B, "--steps", str(steps), "--poison_between", timeout=600)
    check_b2b_output(result.stdout, 2, steps)


@pytest.mark.slow
def test_unaligned_shape_right_on_two_ranks() -> None:
    """40 x 72 x 56 on 2 ranks: the K/2 = 28 columns of A, N = 72 of C and all_scatter's N/2 = 36 columns are
    not multiples of 16, so A, B and C get padded rows and all_scatter a wide C; every algorithm x mode
    right back to back, with C poisoned between steps; steps alternate between contiguous (unaligned) user
    shards, staged into padded buffers, and the op's own padded buffers."""
    args = ["--steps", "4", "--poison_between", "--m", "40", "--n", "72", "--k", "56", "--user_tensors"]
    result = run_mpi(2, B2B, *args, timeout=600)
    check_b2b_output(result.stdout, 2, 4)


@pytest.mark.slow
def test_op_api_on_two_ranks() -> None:
    """Bad arguments raise one error naming a or b and leave the op usable; reuse with own and user tensors;
    two ops interleaved on one heap; OverlapConfig validation; a step with an absent peer raises from
    check_errors() within a bounded time, the op stays broken until reset() on every rank."""
    result = run_mpi(2, API, timeout=600)
    out = result.stdout
    assert "OP_API_FAIL" not in out, out
    for name in ("config", "bad_args", "reuse", "interleave", "timeout"):
        assert re.search(rf"^OP_API_OK {name} ", out, re.M), f"no OP_API_OK {name}:\n{out}"
    timeouts = re.findall(r"check_errors raised after ([\d.]+) s: rank 0: [^;]*timed out", out)
    assert len(timeouts) == 3, out  # all_reduce, all_scatter, one_shot
    assert "OP_API_DONE 5 checks" in out, out


@pytest.mark.slow
def test_first_step_right_without_a_barrier_after_create() -> None:
    result = run_mpi(2, API, "--only", "create_skew", timeout=300, check=False)
    assert result.returncode == 0 and "OP_API_OK create_skew" in result.stdout, result.stdout


@pytest.mark.slow
def test_readme_example_runs_on_two_ranks() -> None:
    result = run_mpi(2, EXAMPLE, timeout=300)
    line = re.search(r"^OP_EXAMPLE (\w+): all_reduce fused on 2 ranks, .* max relative error (\S+) \(tolerance (\S+)\)",
                     result.stdout, re.M)
    assert line is not None, result.stdout
    assert line.group(1) == "ok" and float(line.group(2)) <= float(line.group(3)), line.group(0)


# ---- in this process --------------------------------------------------------------------------------

def test_padded_layout_rules() -> None:
    from streamk_pgas.overlap.algorithms import ALGORITHMS as RECORDS
    from streamk_pgas.overlap.buffers import c_layout
    from streamk_pgas.stream_k.layout import padded_cols

    assert [padded_cols(x) for x in (16, 4096, 28, 1250, 1500, 64, 65)] == [16, 4096, 64, 1280, 1536, 64, 128]
    assert c_layout(RECORDS["all_scatter"], 1000, 3000, 2) == (1000, 2 * 1536, 1536)  # N/2 = 1500: wide C
    assert c_layout(RECORDS["all_scatter"], 64, 8192, 2) == (64, 8192, 4096)
    assert c_layout(RECORDS["all_reduce"], 1000, 3000, 2) == (1000, 3008, 3000)  # padded row stride, no blocks
    assert c_layout(RECORDS["all_scatter"], 1000, 3000, 1) == (1000, 3008, 3000)  # one rank: no blocks to gather
    wide = heap_bytes(OverlapConfig("all_scatter", 1000, 3000, 2500, "bf16", kernel=CPU_KERNEL), 2)
    assert wide >= 1000 * 2 * 1536 * 2



CPU_KERNEL = KernelConfig(BLK_M=16, BLK_N=16, BLK_K=16, num_stages=1, num_warps=4)


def test_config_resolve_rejects_unknown_algorithm_and_mode() -> None:
    cpu = device_target(None)
    with pytest.raises(InvalidConfig, match=r"algorithm must be one of .*'allgather'"):
        resolve_config(OverlapConfig("allgather", 32, 32, 32), cpu)
    with pytest.raises(InvalidConfig, match=r"mode must be one of .*'overlapped'"):
        resolve_config(OverlapConfig("all_reduce", 32, 32, 32, mode="overlapped"), cpu)
    for alg in ALGORITHMS:
        for mode in spec.MODES:
            if not spec.ALGORITHMS[alg].has_mode(mode):
                with pytest.raises(InvalidConfig, match=rf"mode {mode} is built for all_scatter, .*, not {alg}"):
                    resolve_config(OverlapConfig(alg, 32, 32, 32, "fp32", mode), cpu)
                continue
            cfg = resolve_config(OverlapConfig(alg, 32, 32, 32, "fp32", mode), cpu)
            assert None not in (cfg.total_sms, cfg.gemm_sms, cfg.kernel, cfg.sk_rounds, cfg.comm_tile_m,
                                cfg.comm_tile_n), cfg
            # copy_engine's GEMM keeps every SM; the other modes' splits leave communication programs
            assert (cfg.gemm_sms == cfg.total_sms) if mode == "copy_engine" else (1 <= cfg.gemm_sms < cfg.total_sms)
            assert resolve_config(cfg, cpu) is cfg  # planned once
    kept = resolve_config(OverlapConfig("one_shot", 32, 32, 32, "fp32", total_sms=2, gemm_sms=1, kernel=CPU_KERNEL),
                          cpu)
    assert (kept.total_sms, kept.gemm_sms, kept.kernel, kept.comm_tile_m) == (2, 1, CPU_KERNEL, 16)
    with pytest.raises(InvalidConfig, match=r"BLK_M must be a power of two") as bad:
        resolve_config(OverlapConfig("one_shot", 32, 32, 32, "fp32", kernel=CPU_KERNEL.replace(BLK_M=48)), cpu)
    assert bad.value.field == "kernel.BLK_M"


@pytest.mark.parametrize(("options", "field"), [
    ({"timeout_s": float("nan")}, "timeout_s"), ({"timeout_s": "1"}, "timeout_s"), ({"m": -1}, "m"),
    ({"m": "32"}, "m"), ({"k": 32.0}, "k"), ({"gemm_sms": "3"}, "gemm_sms"), ({"sk_first": "yes"}, "sk_first"),
    ({"kernel": "128x256x64"}, "kernel"), ({"datatype": None}, "datatype")])
def test_create_refuses_a_bad_argument_with_a_value_error_naming_it(options: dict, field: str) -> None:
    """OverlapOp.create's arguments are checked before anything is planned or allocated (no TypeError or torch
    error from deep inside)."""
    from streamk_pgas.overlap.listing import ListingHeap

    args = {"algorithm": "all_reduce", "m": 32, "n": 32, "k": 32, "datatype": "fp32", **options}
    with pytest.raises(ValueError, match=rf"^{field}|^{field.upper()}") as bad:
        OverlapOp.create(ListingHeap(1), **args)
    assert isinstance(bad.value, InvalidConfig) and bad.value.field == field


def test_call_refuses_an_input_that_is_not_a_matrix_naming_it() -> None:
    sh = iris_ops.iris(1 << 22)
    op = OverlapOp.create(sh, "all_reduce", 32, 32, 32, "fp32", kernel=CPU_KERNEL)
    with pytest.raises(ValueError, match=r"^OverlapOp: a must have shape \(32, 32\) .*; got \(32,\)"):
        op(torch.zeros(32, device=op.device), op.b)
    with pytest.raises(ValueError, match=r"^OverlapOp: b must be torch.float32; got torch.float16"):
        op(op.a, op.b.half())


@pytest.mark.parametrize("alg", tuple(spec.ALGORITHMS))
def test_world_one_step_is_the_gemm_alone_reading_user_tensors_in_place(alg: str) -> None:
    """One rank, every mode: the step launches the stand-alone GEMM kernel alone, on every program, with the
    user's own (aligned) tensors as its A and B and the op's C as its output; the result is right, and the op's
    GEMM is stream_k.select's choice for the problem on those programs."""
    sh = iris_ops.iris(1 << 24)
    try:
        for mode in spec.ALGORITHMS[alg].modes:
            sh.reset_allocator()
            op = OverlapOp.create(sh, alg, 48, 64, 32, "fp32", mode, total_sms=4,
                                  gemm_sms=4 if mode == "copy_engine" else 2, kernel=CPU_KERNEL)
            a, b = torch.randn(op.a.shape, device=op.device), torch.randn(op.b.shape, device=op.device)
            launches = op.launches("step", a, b)
            assert [x.name for x in launches] == ["streamk_gemm_kernel"], (mode, launches)
            (gemm,) = launches
            assert gemm.programs == 4 and op.gemm_programs == 4 and op.comm_programs == 0
            assert gemm.args["A"] is a and gemm.args["B"] is b and gemm.args["C"] is op.c
            assert op.gemm_choice.plan == op.gemm.plan and op.gemm_choice.plan.num_programs == 4
            c = op(a, b)
            op.check_errors()
            torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)
            assert "GEMM kernel alone" in op.info()["world_one"]
    finally:
        sh.close()


def test_op_planned_for_another_target_lists_its_launches_and_refuses_to_run() -> None:
    """An op built for an MI300X (spec.KNOWN_TARGETS) on the CPU, on a stand-in heap of 2 ranks: planned for 304
    CUs, every launch of each mode listed (kernel, grid, arguments, options), none run; calling it raises."""
    from streamk_pgas.overlap.listing import ListingHeap, op_for

    mi300x = spec.known_target("mi300x")
    for mode in ("bulk_sync", "two_streams", "fused", "fused_sequential"):
        op = op_for("all_reduce", mode, 4864, 4096, 8192, "bf16", mi300x, world_size=2)
        assert op.cfg.total_sms == 304 and op.cfg.kernel.BLK_M == 256 and not op.runnable
        launches = op.launches()
        assert launches and all(x.programs <= 304 for x in launches)
        assert "overlap_kernel" in [x.name for x in launches]
        with pytest.raises(RuntimeError, match="built for AMD Instinct MI300X"):
            op()
    with pytest.raises(InvalidConfig, match="NVIDIA-only"):
        OverlapOp.create(ListingHeap(2), "all_scatter", 64, 64, 64, "bf16", "copy_engine", target=mi300x)


def test_masked_copies_keep_whole_vectors_where_rows_are_unaligned() -> None:
    """all_gather_gemm's push of A's rows masks its columns at K padded (padded_cols) where both buffers' rows hold
    them (the op's own A and the gathered A on the heap): a mask at an unaligned K (2500) makes the compiled push one
    element a load (232 registers on sm_90 against 106 at the padded width). A caller's A read in place with rows of
    K + 4 elements (16-byte aligned: TMA reads it where it is) keeps the mask at K."""
    from streamk_pgas.overlap.listing import op_for
    from streamk_pgas.stream_k.layout import padded_cols, vector_cols

    op = op_for("all_gather_gemm", "bulk_sync", 1000, 3000, 2500, "bf16", spec.known_target("h100"), world_size=4)

    def k_cols(*inputs: torch.Tensor) -> set[int]:
        return {x.args["GATHER"].k_cols for x in op.launches("step", *inputs) if x.args.get("GATHER") is not None}

    padded = padded_cols(2500)
    assert padded % 16 == 0 and op.buffers.a.stride(0) >= padded and k_cols() == {padded}
    user_a = torch.zeros(250, 2504, dtype=torch.bfloat16)[:, :2500]
    assert k_cols(user_a, op.buffers.b) == {2500}
    assert op_for("all_gather_gemm", "bulk_sync", 1024, 2048, 4096, "bf16", spec.known_target("h100"),
                  world_size=4).launches("step")[-1].args["GATHER"].k_cols == 4096
    # the same for gemm_reduce_scatter's sum after the copy engine's copies (N = 3000: 46 registers on sm_90, 87 masked
    # at N)
    rs = op_for("gemm_reduce_scatter", "copy_engine", 1000, 3000, 2500, "bf16", spec.known_target("h100"),
                world_size=4)
    sums = [x for x in rs.launches("step") if x.name == "sum_slots_kernel"]
    assert sums and all(x.args["n"] == padded_cols(3000) for x in sums)
    assert vector_cols(3000, torch.zeros(2, 3000)) == 3000 and vector_cols(3000, torch.zeros(2, 3008)) == 3008


def test_all_gather_gemm_keeps_its_own_a_in_slot_0() -> None:
    """all_gather_gemm's own A is slot 0 of its gathered A, so a step on it copies nothing there: the pushing programs
    only release slot 0's words (Gather.OWN_IN_PLACE), the copy engine only copies its words; a caller's A passed to
    the call is copied into slot 0."""
    from streamk_pgas.overlap.copy_steps import gather_a_own_ops, own_in_place
    from streamk_pgas.overlap.listing import op_for

    h100 = spec.known_target("h100")
    for mode in ("bulk_sync", "fused", "copy_engine"):
        op = op_for("all_gather_gemm", mode, 1024, 2048, 8192, "bf16", h100, world_size=4)
        bufs = op.buffers
        assert bufs.ag is not None and bufs.a.data_ptr() == bufs.ag.data_ptr() and own_in_place(bufs.a, bufs.ag, 4)
        gathers = [x.args["GATHER"] for x in op.launches("step") if x.args.get("GATHER") is not None]
        assert mode == "copy_engine" or (gathers and all(bool(g.OWN_IN_PLACE) for g in gathers)), mode
        user_a = bufs.a.clone()
        assert not own_in_place(user_a, bufs.ag, 4)
        assert all(not bool(g.OWN_IN_PLACE) for g in (x.args["GATHER"] for x in op.launches("step", user_a, bufs.b)
                                                      if x.args.get("GATHER") is not None))
    fill = torch.zeros(4096, dtype=torch.int32)
    assert bufs.a_ready is not None
    assert len(gather_a_own_ops(bufs.a, bufs.ag, bufs.a_ready, fill, 128, 4)) == 1  # the words only
    assert len(gather_a_own_ops(user_a, bufs.ag, bufs.a_ready, fill, 128, 4)) == 2  # the rows, then the words


def test_which_steps_end_without_the_peer_barrier() -> None:
    """one_shot (no writes into peers' buffers, its partial in two planes) and all_gather_gemm (every write into a
    peer followed by a ready word the peer waits for) end every kernel of their steps without the peer barrier, their
    communication timed alone too; all_reduce, gemm_reduce_scatter and all_scatter, which write into their peers' C,
    keep it in every mode (copy_engine's ce_finish included). one_shot's partial takes one more |C| of heap."""
    from streamk_pgas.overlap.listing import op_for

    h100 = spec.known_target("h100")
    barrier = {"one_shot": False, "all_gather_gemm": False, "all_reduce": True, "gemm_reduce_scatter": True,
               "all_scatter": True}
    for alg, needed in barrier.items():
        for mode in spec.ALGORITHMS[alg].modes:
            op = op_for(alg, mode, 1024, 2048, 4096, "bf16", h100, world_size=4)
            for kind in ("step", "comm_alone"):
                launches = op.launches(kind)
                syncs = [bool(x.args["STEP_FLAGS"].PEER_SYNC) for x in launches if "STEP_FLAGS" in x.args]
                syncs += [bool(x.args["PEER_SYNC"]) for x in launches if x.name == "ce_finish_kernel"]
                assert syncs and all(s is needed for s in syncs), (alg, mode, kind)
    op = op_for("one_shot", "fused", 1024, 2048, 4096, "bf16", h100, world_size=4)
    assert len(op.buffers.partial_planes) == 2 and all(t.shape == (1024, 2048) for t in op.buffers.partial_planes)
    one = OverlapOp.heap_bytes("one_shot", 1024, 2048, 4096, "bf16", 4)
    assert one - OverlapOp.heap_bytes("all_reduce", 1024, 2048, 4096, "bf16", 4) >= 1024 * 2048 * 2


@pytest.mark.parametrize("alg", ALGORITHMS)
def test_heap_bytes_positive_and_what_create_allocates(alg: str) -> None:
    for dtype in ("bf16", "fp16", "fp32", "int8"):
        for world in (1, 2, 4, 8):
            assert OverlapOp.heap_bytes(alg, 256, 512, 1024, dtype, world) > 0
            assert OverlapOp.heap_bytes(alg, 256, 512, 1024, dtype, world) == heap_bytes(
                OverlapConfig(alg, 256, 512, 1024, dtype), world)
    assert OverlapOp.heap_bytes(alg, 64, 64, 64, "fp32") >= 64 * 64 * 4
    # In a world of one (this process): a heap of exactly heap_bytes holds the op, and the op uses all of it.
    need = OverlapOp.heap_bytes(alg, 48, 80, 32, "fp32", 1, kernel=CPU_KERNEL)
    sh = iris_ops.iris(need)
    try:
        op = OverlapOp.create(sh, alg, 48, 80, 32, "fp32", total_sms=2, gemm_sms=1, kernel=CPU_KERNEL)
        assert sh.heap_offset == need
        assert op.c.shape == (48, 80)
    finally:
        sh.close()


def test_heap_too_small_is_refused_before_allocating() -> None:
    need = OverlapOp.heap_bytes("all_reduce", 32, 32, 32, "fp32", 1, kernel=CPU_KERNEL)
    sh = iris_ops.iris(need - 1024)
    try:
        with pytest.raises(MemoryError, match="OverlapOp needs"):
            OverlapOp.create(sh, "all_reduce", 32, 32, 32, "fp32", total_sms=2, gemm_sms=1, kernel=CPU_KERNEL)
        assert sh.heap_offset == 0, "a refused create() left part of its buffers allocated"
    finally:
        sh.close()


@pytest.mark.skipif(not on_gpu(), reason="CUDA graphs need a GPU")
@pytest.mark.parametrize(("alg", "mode"), [("all_scatter", "copy_engine"), ("all_gather_gemm", "copy_engine"),
                                           ("gemm_reduce_scatter", "copy_engine"), ("all_scatter", "two_streams"),
                                           ("all_gather_gemm", "two_streams")])
def test_one_rank_step_is_one_launch_and_captures(alg: str, mode: str) -> None:
    """One rank on a GPU, in the modes that fork a second stream where there are peers: the step is the GEMM
    alone (one bound launch, no second stream, nothing to replay), right back to back with new inputs between
    steps, and a caller's own capture of a step replays right. The whole-step graph of the two-stream modes is
    exercised with peers (tools.share_gpu_check)."""
    m, n, k = 512, 1024, 768
    sh = iris_ops.iris(OverlapOp.heap_bytes(alg, m, n, k, "bf16", 1, mode=mode) + (1 << 20))
    try:
        op = OverlapOp.create(sh, alg, m, n, k, "bf16", mode=mode)
        gen = torch.Generator().manual_seed(3)
        for i in range(4):
            a = torch.randn(op.a.shape, generator=gen).to(op.a)
            b = torch.randn(op.b.shape, generator=gen).to(op.b)
            op.a.copy_(a)
            op.b.copy_(b)
            c = op()
            torch.cuda.synchronize()
            want = (a.double() @ b.double()).to(torch.float32)
            assert torch.allclose(c.float(), want, rtol=2e-2, atol=2e-1 * want.abs().mean().item()), i
        step = op.step_for("step")
        assert not step.replay and op.runner.comm_stream is None
        assert [x.name for x in step.kernels()] == ["streamk_gemm_kernel"] and step.kernels()[0].fast
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            op()
        a = torch.randn(op.a.shape, generator=gen).to(op.a)
        op.a.copy_(a)
        graph.replay()
        torch.cuda.synchronize()
        op.check_errors()
        want = (a.double() @ op.b.double()).to(torch.float32)
        assert torch.allclose(op.c.float(), want, rtol=2e-2, atol=2e-1 * want.abs().mean().item())
    finally:
        sh.close()
