"""A rank stopped (SIGSTOP) in any phase of a run ends every rank within 1.5 x --timeout_s, with one line, on the CPU
backend (2 ranks, Triton's interpreter): device waits give up on the clock, host waits after --timeout_s too
(tests/mpi/bench_stall.py stops rank 1; scripts/probe_stall.sh makes the same probe on GPUs, where the graph phase
runs too). Start-up is probed where the ranks exchange their heaps (the launch itself, MPI_Init, waits at least 5 s:
iris_ops.env.launch_timeout; tests/test_iris_launch.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import MPI_DIR, leftovers, on_gpu, run_mpi, shm_env

TIMEOUT_S = 2.0
BOUND = 1.5 * TIMEOUT_S
SMALL = ["-m", "32", "-n", "32", "-k", "32", "--BLK_M", "16", "--BLK_N", "16", "--BLK_K", "16", "--total_sms", "2",
         "--gemm_sms", "1", "--num_stages", "1", "--num_warps", "1", "--datatype", "fp32"]
BENCH = ["--algorithm", "one_shot", "--mode", "fused", *SMALL, "--iters", "3", "--warmup", "1", "--quiet"]
REFERENCE = ["--collective", "all_reduce", "-m", "32", "-n", "32", "-k", "32", "--datatype", "fp32", "--iters", "3",
             "--warmup", "1", "--quiet"]
# phase -> (flags, the line rank 0 ends with)
PHASES = {
    "startup": ([*BENCH, "--validate"], "benchmark.py: rank 0: TimeoutError: barrier did not complete within 2 s: "
                "another rank died or never arrived (--timeout_s sets the limit)"),
    "barrier": ([*BENCH, "--benchmark"], "benchmark.py: rank 0: TimeoutError: barrier did not complete within 2 s: "
                "another rank died or never arrived (--timeout_s sets the limit)"),
    "validation": ([*BENCH, "--validate"], "benchmark.py: rank 0: CollectiveError: rank 0 gave up after ~2 s"),
    "isolated": ([*BENCH, "--benchmark"], "benchmark.py: rank 0: CollectiveError: rank 0 gave up after ~2 s"),
    "back_to_back": ([*BENCH, "--benchmark"], "benchmark.py: rank 0: CollectiveError: rank 0 gave up after ~2 s"),
    "reference": (REFERENCE, "python -m reference: rank 0: RuntimeError: "),
}


@pytest.mark.skipif(on_gpu(), reason="stops a rank of the CPU backend (scripts/probe_stall.sh probes GPUs)")
@pytest.mark.parametrize("phase", PHASES)
def test_a_stopped_rank_ends_every_rank_within_the_timeout(phase: str, tmp_path: Path) -> None:
    flags, line = PHASES[phase]
    stalled, shm = tmp_path / "stalled", tmp_path / "shm"
    result = run_mpi(2, MPI_DIR / "bench_stall.py", *flags, "--timeout_s", str(TIMEOUT_S), timeout=120, check=False,
                     env={**shm_env(shm), "STALL_PHASE": phase, "STALL_FILE": str(stalled)})
    ended = time.time()
    out = result.stdout
    assert stalled.exists(), f"rank 1 never reached the {phase} phase:\n{out[-3000:]}"
    after = ended - float(stalled.read_text())
    assert not result.timed_out and result.returncode != 0, out[-3000:]
    assert after < BOUND, f"the job ended {after:.2f} s after rank 1 stopped ({phase}; bound {BOUND:g} s):\n{out}"
    assert line in out, out[-3000:]
    assert "Traceback" not in out and "PASS" not in out, out[-3000:]
    assert leftovers(shm) == []
