"""all_gather_gemm and gemm_reduce_scatter: every mode on 2 and 4 ranks, steps back to back
with C poisoned between them (tests/mpi/op_new_algorithms.py), bf16 (no atomics, so the interpreter runs
it), benchmark.py's validation and log, the reference peers, the bad inputs (M, N or K
that the split cannot divide: exit 2, one line naming the flag, nothing left in the shared-memory folder),
and the heap sizing in this process.

Each rank's C is compared with its part of torch's float64 product of the whole inputs: all_gather_gemm
C[:, its N/W columns] (M x N/W), gemm_reduce_scatter C[its M/W rows] (M/W x N).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import MPI_DIR, REPO_ROOT, leftovers, on_gpu, run_mpi, shm_env, skip_unless_ranks

from streamk_pgas import iris_ops, spec
from streamk_pgas.overlap import OverlapConfig, OverlapOp, heap_bytes
from streamk_pgas.stream_k import KernelConfig

MODES = tuple(spec.MODES)

SCRIPT = str(MPI_DIR / "op_new_algorithms.py")
BENCH = str(REPO_ROOT / "benchmark.py")
NEW = ("all_gather_gemm", "gemm_reduce_scatter")
STEPS = {2: 6, 4: 3}  # interpreter steps per combination (~1-2 s a step on 2 CPU cores); 200 on GPUs
CPU_KERNEL = KernelConfig(BLK_M=16, BLK_N=16, BLK_K=16, num_stages=1, num_warps=4)


def check_output(out: str, nprocs: int, steps: int, algorithms: tuple[str, ...] = NEW,
                 modes: tuple[str, ...] = MODES, tol: float = 1e-4) -> None:
    assert "OP_NEW_FAIL" not in out, out
    ok = re.findall(r"OP_NEW_OK (\w+) (\w+) ranks (\d+) steps (\d+) err (\S+)", out)
    assert {(a, m) for a, m, *_ in ok} == {(a, m) for a in algorithms for m in modes}, out
    for alg, mode, ranks, n, err in ok:
        assert (int(ranks), int(n)) == (nprocs, steps), (alg, mode, ranks, n)
        assert float(err) <= tol, (alg, mode, err)
    assert out.count("new_inputs ok") == len(algorithms), out
    assert f"OP_NEW_DONE {len(algorithms) * len(modes)} combinations" in out, out


@pytest.mark.slow
@pytest.mark.parametrize("nprocs", [2, 4])
def test_every_mode_right_after_steps_back_to_back(nprocs: int, tmp_path: Path) -> None:
    """Both algorithms x every mode: each rank's C right after several steps with nothing between them but
    a NaN fill of C (which the stream semantics allow); M/W is not a multiple of the tile height, so row
    blocks straddle two ranks' rows; new inputs are picked up at the next step; nothing left in shm."""
    skip_unless_ranks(nprocs)
    steps = 200 if on_gpu() else STEPS[nprocs]
    shm = tmp_path / "shm"
    result = run_mpi(nprocs, SCRIPT, "--steps", str(steps), "--poison_between", timeout=900, env=shm_env(shm))
    check_output(result.stdout, nprocs, steps)
    assert leftovers(shm) == []


@pytest.mark.slow
def test_every_mode_with_unaligned_n_on_four_ranks(tmp_path: Path) -> None:
    """N = 72 (not a multiple of 16: C and the partial get padded rows, and the moves touch the padding columns,
    Move.n_cols) and K = 56 (K/W = 14): both algorithms in every mode right after steps, C poisoned between them."""
    skip_unless_ranks(4)
    result = run_mpi(4, SCRIPT, "--steps", "2", "--poison_between", "--m", "48", "--n", "72", "--k", "56",
                     timeout=900, env=shm_env(tmp_path / "shm"))
    check_output(result.stdout, 4, 2)


@pytest.mark.slow
def test_bf16(tmp_path: Path) -> None:
    """bf16 (neither algorithm adds atomically, so the interpreter runs both): fused and fused_sequential."""
    modes = ("fused", "fused_sequential")
    result = run_mpi(2, SCRIPT, "--steps", "3", "--datatype", "bf16", "--algorithms", ",".join(NEW),
                     "--modes", ",".join(modes), "--m", "64", "--n", "32", "--k", "48", timeout=600,
                     env=shm_env(tmp_path / "shm"))
    check_output(result.stdout, 2, 3, NEW, modes, tol=1e-2)


@pytest.mark.slow
@pytest.mark.parametrize("k,chunks,segments", [(2100, 3, 1), (9000, 9, 3)])
def test_all_gather_gemm_in_chunks_of_columns(k: int, chunks: int, segments: int, tmp_path: Path) -> None:
    """A's rows arrive in chunks of columns (overlap.algorithms.all_gather_gemm.a_chunk_cols), each with its own
    ready words; in fused and two_streams a Stream-K piece reads its K range in wait segments (a_segment_cols),
    waiting for each segment's chunks just before reading them (K = 9000: three segments)."""
    from streamk_pgas.overlap.algorithms.all_gather_gemm import a_chunks, a_segment_cols

    assert a_chunks(k) == chunks and -(-k // a_segment_cols(k)) == segments
    modes = ("fused", "two_streams", "copy_engine")
    result = run_mpi(2, SCRIPT, "--steps", "2", "--algorithms", "all_gather_gemm", "--modes", ",".join(modes),
                     "--m", "48", "--n", "32", "--k", str(k), timeout=600, env=shm_env(tmp_path / "shm"))
    check_output(result.stdout, 2, 2, ("all_gather_gemm",), modes)


@pytest.mark.slow
def test_all_gather_gemm_copy_engine_pulled(tmp_path: Path) -> None:
    """STREAMK_PGAS_CE_PULL=1: each rank copies its own rows into its slot 0 before the step's start and pulls the
    others' from the peers' slot 0; at 4 ranks, row blocks straddling ranks' rows, several chunks of columns, new
    inputs picked up at the next step."""
    skip_unless_ranks(4)
    steps = 200 if on_gpu() else 2
    result = run_mpi(4, SCRIPT, "--steps", str(steps), "--poison_between", "--algorithms", "all_gather_gemm",
                     "--modes", "copy_engine", "--k", "2100", timeout=600,
                     env={**shm_env(tmp_path / "shm"), "STREAMK_PGAS_CE_PULL": "1"})
    check_output(result.stdout, 4, steps, ("all_gather_gemm",), ("copy_engine",))


@pytest.mark.slow
def test_all_gather_gemm_copy_engine_in_columns(tmp_path: Path) -> None:
    """The copy engine's default where K has several wait segments and a slot of A is large (STREAMK_PGAS_CE_A_COLUMNS=1
    asks for it at this small shape): it pushes each slot of A in chunks of columns (one wait segment a
    copy, then that segment's ready words) and the GEMM reads K in wait segments (the OK line says a_columns); at 4
    ranks, row blocks straddling ranks' rows, K = 9000 (9 chunks, 3 segments, the last ragged), C poisoned between
    steps, new inputs picked up at the next step. The CPU's host engine copies before the GEMM: this checks the
    words and the data, not the overlap."""
    from streamk_pgas.overlap.algorithms.all_gather_gemm import a_chunks, a_segment_cols

    skip_unless_ranks(4)
    k = 9000
    assert a_chunks(k) == 9 and -(-k // a_segment_cols(k)) == 3
    steps = 200 if on_gpu() else 2
    result = run_mpi(4, SCRIPT, "--steps", str(steps), "--poison_between", "--algorithms", "all_gather_gemm",
                     "--modes", "copy_engine", "--k", str(k), timeout=900,
                     env={**shm_env(tmp_path / "shm"), "STREAMK_PGAS_CE_A_COLUMNS": "1"})
    check_output(result.stdout, 4, steps, ("all_gather_gemm",), ("copy_engine",))
    assert result.stdout.count(" a_columns") == 1, result.stdout  # rank 0's line


@pytest.mark.slow
def test_rotating_inputs_c_read_between_steps_and_graph_replays() -> None:
    """Both algorithms in every mode at 4 ranks: steps on three user input pairs in rotation with a row of C read
    after each, every row right; on GPUs 200 steps, then 200 replays of a captured step (inputs copied into the
    captured tensors between replays). The interpreter: 3 steps, no graphs."""
    skip_unless_ranks(4)
    steps = 200 if on_gpu() else 3
    runs = [["--rotate"], ["--graph"]] if on_gpu() else [["--rotate"]]
    for extra in runs:
        out = run_mpi(4, str(MPI_DIR / "op_back_to_back.py"), "--steps", str(steps), "--algorithms", ",".join(NEW),
                      *extra, timeout=900).stdout
        assert "OP_B2B_FAIL" not in out, out
        what = "graph_replays" if extra == ["--graph"] else "rotating"
        ok = re.findall(rf"OP_B2B_OK (\w+) (\w+) ranks 4 steps {steps} err (\S+) {what}", out)
        assert {(a, m) for a, m, _ in ok} == {(a, m) for a in NEW for m in MODES}, out
        assert all(float(e) <= 1e-4 for *_, e in ok), out


@pytest.mark.slow
def test_benchmark_validates_and_logs(tmp_path: Path) -> None:
    """benchmark.py --validate on 2 ranks for both: validation passed, the log has the shard's sizes and comm_sms."""
    out = tmp_path / "run.json"
    shm = tmp_path / "shm"
    res = run_mpi(2, BENCH, "--algorithm", ",".join(NEW), "--mode", "fused,fused_sequential", "--datatype", "fp32",
                  "-m", "48", "-n", "32", "-k", "32", "--total_sms", "4", "--gemm_sms", "2", "--validate",
                  "--validate_iters", "2", "--output_file", str(tmp_path / "run_{algorithm}_{mode}.json"),
                  "--quiet", timeout=600, env=shm_env(shm))
    assert res.stdout.count("validation passed on every rank") == 4, res.stdout
    for alg in NEW:
        for mode, comm_sms in (("fused", 2), ("fused_sequential", 0)):
            rec = json.loads((out.parent / f"run_{alg}_{mode}.json").read_text())
            assert rec["validation"]["passed"] is True, rec["validation"]
            assert rec["comm_sms"] == comm_sms, (alg, mode, rec["comm_sms"])
            sizes = rec["sizes"]
            if alg == "all_gather_gemm":
                assert (sizes["local_n"], sizes["local_k"]) == (16, 32), sizes
            else:
                assert (sizes["local_n"], sizes["local_k"]) == (32, 16), sizes
    assert leftovers(shm) == []


@pytest.mark.slow
@pytest.mark.parametrize("alg,args,flag", [
    ("all_gather_gemm", ("-m", "47", "-n", "32", "-k", "32"), "-m"),
    ("all_gather_gemm", ("-m", "48", "-n", "31", "-k", "32"), "-n"),
    ("gemm_reduce_scatter", ("-m", "47", "-n", "32", "-k", "32"), "-m"),
    ("gemm_reduce_scatter", ("-m", "48", "-n", "32", "-k", "31"), "-k"),
])
def test_split_that_does_not_divide_is_refused(alg: str, args: tuple[str, ...], flag: str, tmp_path: Path) -> None:
    shm = tmp_path / "shm"
    res = run_mpi(2, BENCH, "--algorithm", alg, "--datatype", "fp32", *args, timeout=120, check=False,
                  env=shm_env(shm))
    assert res.returncode == 2, res.stdout
    errors = [line for line in res.stdout.splitlines() if line.startswith("benchmark.py: error: ")]
    assert len(errors) == 1, res.stdout
    assert errors[0].startswith(f"benchmark.py: error: {flag}: {alg} splits"), errors[0]
    assert "multiple of 2" in errors[0], errors[0]
    assert leftovers(shm) == []


@pytest.mark.slow
def test_reference_peers_validate(tmp_path: Path) -> None:
    """The vendor peers run on the CPU with gloo and validate; torch's fused ops say they need a GPU."""
    out = tmp_path / "ref"
    for collective in NEW:
        res = run_mpi(2, "reference", "--collective", collective, "-m", "32", "-n", "48", "-k", "64",
                      "--datatype", "bf16", "--iters", "2", "--warmup", "1", "--validate", "--output_dir", str(out),
                      "--quiet", timeout=300, module=True)
        assert res.returncode == 0, res.stdout
    records = {json.loads(p.read_text())["variant"]: json.loads(p.read_text()) for p in out.glob("*.json")}
    assert set(records) == {"all_gather_then_gemm", "gemm_then_reduce_scatter", "fused_all_gather_matmul",
                            "fused_matmul_reduce_scatter"}
    for key, alg in (("all_gather_then_gemm", "all_gather_gemm"), ("gemm_then_reduce_scatter", "gemm_reduce_scatter")):
        rec = records[key]
        assert rec["algorithm"] == alg and rec["vendor_baseline"] is True
        if not on_gpu():
            assert rec["validation"]["passed"] is True, rec["validation"]
    if not on_gpu():
        for key in ("fused_all_gather_matmul", "fused_matmul_reduce_scatter"):
            assert "CPU" in records[key]["skipped"], records[key]["skipped"]


# ---- in this process --------------------------------------------------------------------------------

@pytest.mark.parametrize("alg", NEW)
def test_heap_bytes_is_what_create_allocates(alg: str) -> None:
    for world in (1, 2, 4, 8):
        assert OverlapOp.heap_bytes(alg, 256, 512, 1024, "bf16", world) == heap_bytes(
            OverlapConfig(alg, 256, 512, 1024, "bf16"), world)
    # with a mode given, exactly what create allocates; with mode auto, enough for any mode the planner may pick
    auto = OverlapOp.heap_bytes(alg, 48, 80, 32, "fp32", 1, kernel=CPU_KERNEL)
    for mode in ("fused", "copy_engine"):
        need = OverlapOp.heap_bytes(alg, 48, 80, 32, "fp32", 1, mode=mode, kernel=CPU_KERNEL)
        assert need <= auto
        sh = iris_ops.iris(need)
        try:
            gemm = 1 if mode == "fused" else 2
            op = OverlapOp.create(sh, alg, 48, 80, 32, "fp32", mode, total_sms=2, gemm_sms=gemm, kernel=CPU_KERNEL)
            assert sh.heap_offset == need
            assert op.c.shape == (48, 80) and op.a.shape == (48, 32)  # one rank: its shard is the whole
        finally:
            sh.close()
