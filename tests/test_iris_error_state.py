"""The collective error state (iris_ops.error_state and record_error_all / wait_or_error in iris_ops.device):
a wait that gives up on one rank is an error on every rank, seen without waiting, and cleared together."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl
from conftest import MPI_DIR, REPO_ROOT, leftovers, run_mpi, shm_env

from streamk_pgas import iris_ops
from streamk_pgas.iris_ops.device import ERR_TILE_READY, ERROR_WORDS, record_error_all, wait_local_or_error
from streamk_pgas.iris_ops.error_state import CollectiveError, ErrorState, describe


@pytest.fixture(scope="module")
def sh() -> iris_ops.Iris:
    return iris_ops.iris(1 << 20)


@triton.jit
def _record(ERRORS, cur_rank, heap_bases, world_size, KIND: tl.constexpr, TILE_ID: tl.constexpr):
    record_error_all(ERRORS, KIND, TILE_ID, cur_rank, heap_bases, world_size)


@triton.jit
def _wait(ERRORS, FLAG, OUT, max_spins):
    tl.store(OUT, wait_local_or_error(FLAG, 1, max_spins, ERRORS).to(tl.int32))


def test_world_of_one_records_checks_and_clears(sh: iris_ops.Iris) -> None:
    state = ErrorState(sh)
    assert state.words.numel() == ERROR_WORDS and sh.on_heap(state.words)
    assert state.peek() == 0
    state.check(sh)
    _record[(1,)](state.words, sh.get_rank(), sh.get_heap_bases(), sh.get_num_ranks(), KIND=ERR_TILE_READY,
                  TILE_ID=4)
    deadline = time.monotonic() + 10
    while state.peek() == 0 and time.monotonic() < deadline:  # on a GPU peek lags by a call (a copy in flight)
        time.sleep(0.01)
    assert state.peek() != 0
    with pytest.raises(CollectiveError, match=r"rank 0: rank 0 gave up after ~2 s: .*tile 4") as info:
        state.check(sh, timeout_s=2)
    assert info.value.origin == 0
    _record[(1,)](state.words, 0, sh.get_heap_bases(), 1, KIND=ERR_TILE_READY, TILE_ID=9)  # the first one stays
    assert describe(state.words.tolist()) == (info.value.code, 0)
    flag = sh.zeros(1, dtype=torch.int32)
    out = sh.full((1,), -1, dtype=torch.int32)
    _wait[(1,)](state.words, flag, out, 2**30)  # gives up at once: the word is set
    assert out.item() == 0
    state.reset(sh)
    assert state.peek() == 0 and state.failed() == (0, None)
    state.check(sh)


def test_words_must_be_on_the_heap(sh: iris_ops.Iris) -> None:
    with pytest.raises(iris_ops.HeapPlacementError):
        ErrorState(sh, torch.zeros(ERROR_WORDS, dtype=torch.int32))
    with pytest.raises(ValueError, match="int32"):
        ErrorState(sh, sh.zeros(ERROR_WORDS, dtype=torch.int64))


def test_a_rank_that_gives_up_fails_every_rank(tmp_path: Path) -> None:
    """Rank 1 gives up: rank 0 sees it without waiting, its own long wait stops at once, both raise."""
    folder = tmp_path / "shm"
    result = run_mpi(2, MPI_DIR / "error_state.py", timeout=240, env=shm_env(folder))
    out = result.stdout
    assert re.search(r"^PEEK rank 0 code [1-9]", out, re.M), out
    wait = re.search(r"^WAIT rank 0 reached 0 seconds ([\d.]+)", out, re.M)
    assert wait and float(wait.group(1)) < 30, out  # 2**30 polls would take days in the interpreter
    for rank in (0, 1):
        assert re.search(rf"^RAISED rank {rank} origin 1 code \d+ rank {rank}: rank 1 gave up", out, re.M), out
        assert f"CLEAR rank {rank} peek 0" in out, out
    assert "NOT_RAISED" not in out
    assert re.search(r"^LOCAL rank 0 code [1-9]\d* origin None", out, re.M), out  # record_error stays local
    assert "LOCAL rank 1 code 0 origin None" in out, out
    # A device barrier on the collective words: rank 1 never arrives; rank 0 gives up once, rank 1 knows it,
    # and rank 0's next barrier gives up at once instead of after another timeout.
    assert re.search(r"^BARRIER rank 0 raised rank 0: rank 0 gave up after ~0.5 s: .*\(tile 1\)", out, re.M), out
    assert re.search(r"^BARRIER rank 1 raised rank 1: rank 0 gave up", out, re.M), out
    again = re.search(r"^AGAIN rank 0 raised .* seconds ([\d.]+)", out, re.M)
    assert again and float(again.group(1)) < 0.5, out
    assert leftovers(folder) == []


def test_device_functions_compile_for_gpus(tmp_path: Path) -> None:
    """The NVIDIA and AMD code paths of the new device functions compile (no GPU needed)."""
    code = textwrap.dedent('''
        import triton, triton.language as tl
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        from streamk_pgas.iris_ops import device as d

        @triton.jit
        def k(ERRORS, FLAG, OUT, cur_rank, peer, heap_bases, world_size, max_spins):
            reached = d.wait_or_error(FLAG, 1, cur_rank, peer, heap_bases, max_spins, ERRORS)
            tl.store(OUT, (reached & d.wait_local_or_error(FLAG, 1, max_spins, ERRORS)).to(tl.int32))
            if not reached:
                d.record_error_all(ERRORS, 3, 5, cur_rank, heap_bases, world_size)

        sig = {"ERRORS": "*i32", "FLAG": "*i32", "OUT": "*i32", "cur_rank": "i32", "peer": "i32",
               "heap_bases": "*i64", "world_size": "i32", "max_spins": "i32"}
        for arch, target, kind in ((1, GPUTarget("cuda", 90, 32), "ptx"), (2, GPUTarget("hip", "gfx942", 64),
                                                                          "amdgcn")):
            d._ARCH = tl.constexpr(arch)  # the vendor's code paths, as an ahead-of-time compile selects them
            asm = triton.compile(ASTSource(k, sig, {}), target=target).asm[kind]
            print(kind, "cas" in asm or "cmpswap" in asm)
    ''')
    env = {**os.environ, "TRITON_INTERPRET": "0"}  # compiled kernels: unset, iris_ops.device would pick the interpreter
    env["TRITON_CACHE_DIR"] = str(tmp_path / "cache")
    env["PYTHONPATH"] = str(REPO_ROOT)
    script = tmp_path / "compile_check.py"  # Triton reads a kernel's source from its file
    script.write_text(code)
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["ptx", "True", "amdgcn", "True"], out.stdout


def test_a_stopped_peer_ends_back_to_back_steps_within_one_wait(tmp_path: Path) -> None:
    """Rank 1 stops (SIGSTOP) before step 3 of 50; rank 0's wait gives up once (2 s), its peek between steps sees
    the error, check() raises without meeting the stopped peer, and the job ends (rank 1 killed by mpirun)."""
    folder = tmp_path / "shm"
    result = run_mpi(2, MPI_DIR / "error_state_hang.py", "50", "2", timeout=240, check=False,
                     env={**shm_env(folder), "IRIS_OPS_TIMEOUT_S": "60"})
    out = result.stdout
    assert not result.timed_out and result.returncode != 0, out
    assert result.elapsed_s < 60, f"took {result.elapsed_s:.0f} s:\n{out}"  # not 48 more 2-s give-ups, nor 60 s
    assert "error_state_hang: rank 0: CollectiveError: rank 0 gave up after ~2 s" in out, out
    assert "STEP rank 0 3" not in out and "Traceback" not in out
    assert leftovers(folder) == []
