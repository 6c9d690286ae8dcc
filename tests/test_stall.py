"""A rank stopped (SIGSTOP) in any phase of a run ends every rank within 1.5 x --timeout_s, with one line, on the CPU
backend (2 ranks, Triton's interpreter): device waits give up on the clock, host waits after --timeout_s too
(tests/mpi/bench_stall.py stops rank 1; scripts/probe_stall.sh makes the same probe on GPUs, where graph replays run
too). Start-up is probed where the ranks exchange their heaps, at a host barrier (the launch itself, MPI_Init, waits
at least 5 s: iris_ops.env.launch_timeout; tests/test_iris_launch.py). The phases run at once, one job each: most of a
job is waiting, and the bound is measured from each job's own stop."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from conftest import MPI_DIR, REPO_ROOT, leftovers, mpirun_path, on_gpu, shm_env

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
def stalls(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[float | None, int, str, list[str]]]:
    """Every phase's job at once: phase -> (seconds from the stop to the job's end or None, exit code, output,
    files left in its shared-memory folder)."""
    if on_gpu():
        pytest.skip("stops a rank of the CPU backend (scripts/probe_stall.sh probes GPUs)")
    tmp = tmp_path_factory.mktemp("stall")
    jobs = {}
    for phase, (flags, _) in PHASES.items():
        env = {**os.environ, **shm_env(tmp / phase / "shm"), "TRITON_INTERPRET": "1", "STALL_PHASE": phase,
               "STALL_FILE": str(tmp / phase / "stopped"),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
        cmd = [mpirun_path(), "--allow-run-as-root", "--oversubscribe", "-np", "2", sys.executable,
               str(MPI_DIR / "bench_stall.py"), *flags, "--timeout_s", str(TIMEOUT_S)]
        jobs[phase] = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       text=True, start_new_session=True)
    ended: dict[str, float] = {}
    deadline = time.monotonic() + 120
    while len(ended) < len(jobs) and time.monotonic() < deadline:
        for phase, job in jobs.items():
            if phase not in ended and job.poll() is not None:
                ended[phase] = time.time()
        time.sleep(0.01)
    out = {}
    for phase, job in jobs.items():
        if phase not in ended:
            os.killpg(job.pid, 9)  # the group this fixture started: mpirun and its ranks
        text = job.communicate()[0]
        stopped = tmp / phase / "stopped"
        after = ended[phase] - float(stopped.read_text()) if phase in ended and stopped.exists() else None
        out[phase] = (after, job.returncode, text, leftovers(tmp / phase / "shm"))
    return out


@pytest.mark.parametrize("phase", PHASES)
def test_a_stopped_rank_ends_every_rank_within_the_timeout(phase: str, stalls: dict) -> None:
    after, code, out, left = stalls[phase]
    assert after is not None, f"rank 1 never stopped in the {phase} phase, or the job did not end:\n{out[-3000:]}"
    assert code != 0 and after < BOUND, f"the job ended {after:.2f} s after rank 1 stopped ({phase}; bound {BOUND:g} " \
                                        f"s), exit {code}:\n{out[-3000:]}"
    assert PHASES[phase][1] in out, out[-3000:]
    assert "Traceback" not in out and "PASS" not in out, out[-3000:]
    assert left == []
