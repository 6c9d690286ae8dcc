"""A rank stopped (SIGSTOP) in any phase of a run ends every rank within 1.5 x --timeout_s, with one line, on the CPU
backend (2 ranks, Triton's interpreter): device waits give up on the clock, host waits after --timeout_s too
(tests/mpi/bench_stall.py stops rank 1; scripts/probe_stall.sh makes the same probe on GPUs, where graph replays run
too). Start-up is probed where the ranks exchange their heaps, at a host barrier (the launch itself, MPI_Init, waits
at least 5 s: iris_ops.env.launch_timeout; tests/test_iris_launch.py). The phases run at once, one job each: most of a
job is waiting, and the bound is measured from each job's own stop."""

from __future__ import annotations

import pytest
from conftest import MPI_DIR, MpiResult, leftovers, on_gpu, run_mpi_many, shm_env

TIMEOUT_S = 3.0
BOUND = 1.5 * TIMEOUT_S
SMALL = ["-m", "32", "-n", "32", "-k", "32", "--BLK_M", "16", "--BLK_N", "16", "--BLK_K", "16", "--total_sms", "2",
         "--gemm_sms", "1", "--num_stages", "1", "--num_warps", "1", "--datatype", "fp32"]
BENCH = ["--algorithm", "one_shot", "--mode", "fused", *SMALL, "--iters", "3", "--warmup", "1", "--quiet"]
REFERENCE = ["--collective", "all_reduce", "-m", "32", "-n", "32", "-k", "32", "--datatype", "fp32", "--iters", "3",
             "--warmup", "1", "--quiet"]
HOST = "benchmark.py: rank 0: TimeoutError: barrier did not complete within 3 s: another rank died or never arrived " \
       "(--timeout_s sets the limit)"
DEVICE = "benchmark.py: rank 0: CollectiveError: rank 0 gave up after ~3 s"
# phase -> (flags, the line rank 0 ends with)
PHASES = {
    "startup": ([*BENCH, "--validate"], HOST),
    "validation": ([*BENCH, "--validate"], DEVICE),
    "isolated": ([*BENCH, "--benchmark"], DEVICE),
    "back_to_back": ([*BENCH, "--benchmark"], DEVICE),
    "reference": (REFERENCE, "python -m reference: rank 0: RuntimeError: "),
}


@pytest.fixture(scope="module")
def stalls(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[float | None, MpiResult, list[str]]]:
    """Every phase's job at once: phase -> (seconds from the stop to the job's end, None if rank 1 never stopped;
    the job; files left in its shared-memory folder)."""
    if on_gpu():
        pytest.skip("stops a rank of the CPU backend (scripts/probe_stall.sh probes GPUs)")
    tmp = tmp_path_factory.mktemp("stall")
    jobs = {phase: (2, MPI_DIR / "bench_stall.py", [*flags, "--timeout_s", str(TIMEOUT_S)],
                    {**shm_env(tmp / phase / "shm"), "STALL_PHASE": phase, "STALL_FILE": str(tmp / phase / "stopped")})
            for phase, (flags, _) in PHASES.items()}
    out = {}
    for phase, result in run_mpi_many(jobs, timeout=120).items():
        stopped = tmp / phase / "stopped"
        after = result.ended_at - float(stopped.read_text()) if stopped.exists() else None
        out[phase] = (after, result, leftovers(tmp / phase / "shm"))
    return out


@pytest.mark.parametrize("phase", PHASES)
def test_a_stopped_rank_ends_every_rank_within_the_timeout(phase: str, stalls: dict) -> None:
    after, result, left = stalls[phase]
    code, out = result.returncode, result.stdout
    assert after is not None, f"rank 1 never stopped in the {phase} phase:\n{out[-3000:]}"
    assert not result.timed_out and code != 0 and after < BOUND, \
        f"the job ended {after:.2f} s after rank 1 stopped ({phase}; bound {BOUND:g} s), exit {code}:\n{out[-3000:]}"
    assert PHASES[phase][1] in out, out[-3000:]
    assert "Traceback" not in out and "PASS" not in out, out[-3000:]
    assert left == []
