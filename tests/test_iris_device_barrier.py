"""iris_ops.device_barrier.DeviceBarrier across ranks (benchmark.py lines up every timed iteration with it):
every rank passes it and sees every rank's epoch; a rank that never arrives turns into an error, not a hang."""

from __future__ import annotations

import re

import pytest
from conftest import MPI_DIR, run_mpi, skip_unless_ranks

PROG = str(MPI_DIR / "device_barrier.py")


@pytest.mark.parametrize("nprocs", [2, 4])
def test_every_rank_passes_and_sees_every_epoch(nprocs: int) -> None:
    skip_unless_ranks(nprocs)
    result = run_mpi(nprocs, PROG, "ok", timeout=300)
    lines = re.findall(r"BARRIER_OK rank (\d+) flags (\[[^]]*\]) stamps (\[[^]]*\])", result.stdout)
    assert sorted(int(r) for r, _, _ in lines) == list(range(nprocs)), result.stdout
    for _, flags, stamps in lines:
        assert eval(flags) == [3] * nprocs  # three barriers: every rank's word reached epoch 3
        s = eval(stamps)
        assert s[0] < s[1] < s[2], "each pass stamps its slot, in order"


def test_a_rank_that_never_arrives_is_an_error_not_a_hang() -> None:
    result = run_mpi(2, PROG, "absent", timeout=300)
    assert "BARRIER_TIMEOUT" in result.stdout, result.stdout
    assert "device barrier: rank 1 did not arrive" in result.stdout
