"""The iris_ops host API: constructors, placement, out-of-heap errors and rank queries, in this process
(a world of one) and on 2 and 4 ranks under mpirun (tests/mpi/heap_api.py, one launch per world size)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import MPI_DIR, load_mpi_script, on_gpu, run_mpi, skip_unless_ranks

from streamk_pgas import iris_ops
from streamk_pgas.iris_ops.backends import choose_backend


@pytest.fixture(scope="module")
def sh() -> iris_ops.Iris:
    return iris_ops.iris(8 << 20)


# name -> (constructor call, shape, dtype, value check)
CONSTRUCTORS: dict[str, tuple[Callable[[Any], torch.Tensor], tuple[int, ...], torch.dtype,
                              Callable[[torch.Tensor], bool]]] = {
    "zeros": (lambda s: s.zeros(3, 4), (3, 4), torch.float32, lambda t: bool((t == 0).all())),
    "zeros_tuple": (lambda s: s.zeros((2, 5), dtype=torch.bfloat16), (2, 5), torch.bfloat16,
                    lambda t: bool((t == 0).all())),
    "ones": (lambda s: s.ones(6, dtype=torch.int64), (6,), torch.int64, lambda t: bool((t == 1).all())),
    "empty": (lambda s: s.empty(2, 3, 4, dtype=torch.float16), (2, 3, 4), torch.float16, lambda t: True),
    "full_int": (lambda s: s.full((3,), 9), (3,), torch.int64, lambda t: t.tolist() == [9, 9, 9]),
    "full_float": (lambda s: s.full((2, 2), 1.5), (2, 2), torch.float32, lambda t: bool((t == 1.5).all())),
    "full_dtype": (lambda s: s.full((4,), -3, dtype=torch.int8), (4,), torch.int8, lambda t: bool((t == -3).all())),
    "randn": (lambda s: s.randn(200, 10), (200, 10), torch.float32,
              lambda t: abs(float(t.mean())) < 0.2 and 0.8 < float(t.std()) < 1.2),
    "randn_generator": (lambda s: s.randn(5, generator=torch.Generator(s.get_device()).manual_seed(3)), (5,),
                        torch.float32, lambda t: torch.equal(
                            t, torch.randn(5, generator=torch.Generator(t.device).manual_seed(3), device=t.device))),
    "uniform": (lambda s: s.uniform(500, 2.0, 4.0), (500,), torch.float32,
                lambda t: bool(((t >= 2) & (t < 4)).all()) and float(t.max() - t.min()) > 1.5),
    "uniform_dtype": (lambda s: s.uniform((4, 4), dtype=torch.float64), (4, 4), torch.float64,
                      lambda t: bool(((t >= 0) & (t < 1)).all())),
    "randint_high": (lambda s: s.randint(10, (100,)), (100,), torch.int64,
                     lambda t: bool(((t >= 0) & (t < 10)).all()) and t.unique().numel() > 5),
    "randint_low_high": (lambda s: s.randint(-5, 5, (3, 50), dtype=torch.int32), (3, 50), torch.int32,
                         lambda t: bool(((t >= -5) & (t < 5)).all()) and t.unique().numel() > 5),
    "arange_end": (lambda s: s.arange(7), (7,), torch.int64, lambda t: t.tolist() == list(range(7))),
    "arange_step": (lambda s: s.arange(1, 10, 3), (3,), torch.int64, lambda t: t.tolist() == [1, 4, 7]),
    "arange_float": (lambda s: s.arange(0.0, 1.0, 0.25), (4,), torch.float32,
                     lambda t: t.tolist() == [0.0, 0.25, 0.5, 0.75]),
    "linspace": (lambda s: s.linspace(0.0, 2.0, 5), (5,), torch.float32,
                 lambda t: t.tolist() == [0.0, 0.5, 1.0, 1.5, 2.0]),
    "linspace_dtype": (lambda s: s.linspace(0, 6, 4, dtype=torch.float64), (4,), torch.float64,
                       lambda t: t.tolist() == [0.0, 2.0, 4.0, 6.0]),
    "zeros_like": (lambda s: s.zeros_like(torch.ones(2, 7, dtype=torch.float16)), (2, 7), torch.float16,
                   lambda t: bool((t == 0).all())),
    "zeros_like_dtype": (lambda s: s.zeros_like(torch.ones(3), dtype=torch.int32), (3,), torch.int32,
                         lambda t: bool((t == 0).all())),
    "rand": (lambda s: s.rand(40, 5), (40, 5), torch.float32,
             lambda t: bool(((t >= 0) & (t < 1)).all()) and t.unique().numel() > 150),
}


@pytest.mark.parametrize("name", CONSTRUCTORS)
def test_constructor_returns_tensor_on_heap(sh: iris_ops.Iris, name: str) -> None:
    make, shape, dtype, check = CONSTRUCTORS[name]
    before = sh.heap_offset
    t = make(sh)
    assert tuple(t.shape) == shape
    assert t.dtype == dtype
    assert t.device == sh.get_device()
    assert t.is_contiguous()
    assert sh.on_heap(t)
    sh.require_on_heap(t)
    offset = t.data_ptr() - sh.memory_pool.data_ptr()
    assert offset == before, "a tensor must start where the allocator stood"
    assert offset % sh.alignment == 0
    assert sh.heap_offset == before + max(1024, math.ceil(t.numel() * t.element_size() / 1024) * 1024)
    assert check(t)


def test_out_argument_reuses_heap_tensor(sh: iris_ops.Iris) -> None:
    buf = sh.ones(12)
    before = sh.heap_offset
    out = sh.zeros(3, 4, out=buf)
    assert sh.heap_offset == before
    assert out.data_ptr() == buf.data_ptr() and tuple(out.shape) == (3, 4)
    assert bool((buf == 0).all())
    with pytest.raises(iris_ops.HeapPlacementError):
        sh.zeros(12, out=torch.empty(12, device=sh.get_device()))


def test_allocations_do_not_overlap(sh: iris_ops.Iris) -> None:
    a = sh.full((100,), 1, dtype=torch.int32)
    b = sh.full((300,), 2, dtype=torch.int32)
    c = sh.full((5,), 3, dtype=torch.int32)
    assert a.data_ptr() + 400 <= b.data_ptr() and b.data_ptr() + 1200 <= c.data_ptr()
    assert a.sum().item() == 100 and b.sum().item() == 600 and c.sum().item() == 15


def test_out_of_heap_raises_memory_error_naming_requested_and_free_bytes() -> None:
    small = iris_ops.iris(64 << 10)
    small.zeros(40 << 10, dtype=torch.uint8)
    free = small.free_bytes
    assert free == (64 - 40) << 10
    with pytest.raises(MemoryError) as info:
        small.zeros(7000, dtype=torch.float32)  # 28000 B > 24576 B free
    assert "28000" in str(info.value) and str(free) in str(info.value)
    assert small.free_bytes == free, "a failed allocation must not consume heap"
    exact = small.empty(free // 4, dtype=torch.float32)  # what is left still fits exactly
    assert small.on_heap(exact) and small.free_bytes == 0
    with pytest.raises(MemoryError):
        small.ones(1)


def test_tensor_not_on_heap_raises_heap_placement_error(sh: iris_ops.Iris) -> None:
    outside = torch.zeros(8, device=sh.get_device())
    assert not sh.on_heap(outside)
    with pytest.raises(iris_ops.HeapPlacementError, match="not on the symmetric heap") as info:
        sh.require_on_heap(outside, "my_buffer")
    assert "my_buffer" in str(info.value)
    assert isinstance(info.value, ValueError)
    inside = sh.zeros(8)
    sh.require_on_heap(inside[2:6], "a view")


def test_world_of_one_queries(sh: iris_ops.Iris) -> None:
    assert sh.get_rank() == 0 and sh.get_num_ranks() == 1
    bases = sh.get_heap_bases()
    assert bases.dtype == torch.int64 and tuple(bases.shape) == (1,) and bases.device == sh.get_device()
    assert int(bases[0]) == sh.memory_pool.data_ptr()
    sh.barrier()
    assert sh.broadcast({"a": [1, 2]}) == {"a": [1, 2]}
    assert sh.broadcast(5, source_rank=0) == 5
    assert torch.equal(sh.broadcast_tensor(torch.arange(3)).cpu(), torch.arange(3))
    assert sh.allgather("x") == ["x"]
    if sh.get_device().type == "cpu":
        assert sh.get_cu_count() == (os.cpu_count() or 1)
        assert sh.wall_clock_rate() == 1
    else:
        assert sh.get_cu_count() == torch.cuda.get_device_properties(sh.get_device()).multi_processor_count
        assert sh.wall_clock_rate() > 0


def test_heap_size_is_validated_and_rounded() -> None:
    with pytest.raises(ValueError):
        iris_ops.iris(0)
    odd = iris_ops.iris(1000)
    assert odd.heap_size == 1024 and odd.free_bytes == 1024


def test_shm_heap_file_is_removed_once_mapped(sh: iris_ops.Iris) -> None:
    if sh.backend_name != "shm":
        pytest.skip("shm backend only")
    path = sh._backend.path
    assert path.name.startswith("iris_ops_heap_") and not path.exists()


def test_backend_choice() -> None:
    if not on_gpu():
        assert choose_backend() == "shm"
    assert choose_backend("shm") == "shm"
    with pytest.raises(ValueError, match="must be one of"):
        choose_backend("nccl")


# ------------------------------------------------------------------------------------------------
# The same API on several ranks


HEAP_CHECKS: list[str] = list(load_mpi_script("heap_api.py", "iris_heap_api").CHECKS)


@pytest.fixture(scope="module", params=[2, pytest.param(4, marks=pytest.mark.slow)], ids=lambda n: f"np{n}")
def heap_results(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    nprocs = request.param
    skip_unless_ranks(nprocs)
    summary = tmp_path_factory.mktemp(f"heap_api_np{nprocs}") / "summary.json"
    run_mpi(nprocs, MPI_DIR / "heap_api.py", "--json", str(summary), timeout=300)
    return json.loads(summary.read_text())


@pytest.mark.parametrize("check", HEAP_CHECKS)
def test_heap_api_on_every_rank(heap_results: dict[str, Any], check: str) -> None:
    res = heap_results["checks"][check]
    assert res["ok"], "\n".join(res["errors"])


def test_heap_files_gone_after_the_job(heap_results: dict[str, Any]) -> None:
    files = [Path(p) for p in heap_results["heap_files"]]
    if heap_results["backend"] == "shm":
        assert len(files) == heap_results["world_size"]
    assert not [f for f in files if f.exists()]
