"""Iris's host API, as Iris documents it, against iris_ops (imported as `iris`, the way an Iris program would).

In this process (a world of one): the factory and constructor defaults, Iris's logging (`log`, `log_stats`,
`log_debug`, and `debug/info/warning/error` through the logger), `do_bench`'s call sequence and statistics
(on a fake clock, so the numbers are exact, and on the real one), `memset_tensor`, `deallocate`,
`allocate`, `wall_clock_rate(rank)`, `barrier(stream)`, and the symm backend's choice and its error on a machine
that cannot run it. On 2 ranks under mpirun (tests/mpi/iris_host_api.py): which rank prints what, do_bench's
barriers and preambles ordering the ranks, memset_tensor seen by the peer, broadcast,
wall_clock_rate per rank; and an Iris-style program (tests/mpi/iris_style_atomic_add.py) unchanged but
for its import. Nothing may be left in the shared-memory folder afterwards.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import MPI_DIR, REPO_ROOT, leftovers, load_mpi_script, on_gpu, run_mpi, shm_env, skip_unless_ranks

import iris_ops as iris  # the drop-in's name, as an Iris program imports it
from streamk_pgas.iris_ops import heap
from streamk_pgas.iris_ops.backends import BACKENDS, choose_backend, torch_symm

# Every public host name an Iris program of mid-2025 reaches through `import iris`.
IRIS_MODULE_NAMES = ("iris", "Iris", "do_bench", "memset_tensor", "logger", "set_logger_level",
                     "DEBUG", "INFO", "WARNING", "ERROR")
IRIS_METHODS = ("log", "log_debug", "log_stats", "debug", "info", "warning", "error", "broadcast",
                "broadcast_tensor", "allocate", "deallocate", "parse_size", "zeros", "zeros_like", "ones", "empty",
                "full", "randn", "rand", "randint", "uniform", "arange", "linspace", "get_heap_bases", "barrier",
                "get_device", "get_cu_count", "get_rank", "get_num_ranks", "wall_clock_rate")
IRIS_ATTRIBUTES = ("comm", "num_ranks", "cur_rank", "gpu_id", "heap_size", "heap_offset", "alignment", "device",
                   "memory_pool", "heap_bases")


@pytest.fixture(scope="module")
def shmem() -> iris.Iris:
    return iris.iris(16 << 20)


@pytest.fixture(autouse=True)
def _logger_level_restored() -> Any:
    yield
    iris.set_logger_level(iris.INFO)


# ------------------------------------------------------------------------------------------------
# Names and signatures


def test_every_iris_host_name_exists(shmem: iris.Iris) -> None:
    missing = [n for n in IRIS_MODULE_NAMES if not hasattr(iris, n)]
    missing += [f"Iris.{n}" for n in IRIS_METHODS if not callable(getattr(shmem, n, None))]
    missing += [f"Iris.{n}" for n in IRIS_ATTRIBUTES if not hasattr(shmem, n)]
    assert not missing
    assert (iris.DEBUG, iris.INFO, iris.WARNING, iris.ERROR) == (10, 20, 30, 40)  # logging's levels, as Iris's


def _defaults(fn: Any) -> dict[str, Any]:
    return {k: p.default for k, p in inspect.signature(fn).parameters.items() if p.default is not p.empty}


def test_defaults_match_iris() -> None:
    assert _defaults(iris.iris) == {"heap_size": 1 << 30, "backend": None}
    assert _defaults(iris.Iris.__init__)["heap_size"] == 1 << 30
    assert _defaults(iris.do_bench) | {"barrier_fn": None, "preamble_fn": None} == {
        "barrier_fn": None, "preamble_fn": None, "n_warmup": 25, "n_repeat": 100, "quantiles": None,
        "return_mode": "mean"}
    assert list(inspect.signature(iris.do_bench).parameters) == [
        "fn", "barrier_fn", "preamble_fn", "n_warmup", "n_repeat", "quantiles", "return_mode"]
    assert list(inspect.signature(iris.memset_tensor).parameters) == ["tensor", "value"]
    assert _defaults(iris.Iris.uniform) == {"low": 0.0, "high": 1.0, "dtype": torch.float32}
    assert _defaults(iris.Iris.broadcast_tensor) == {"source_rank": 0}
    assert list(inspect.signature(iris.Iris.broadcast).parameters)[:3] == ["self", "value", "source_rank"]
    assert "rank" in inspect.signature(iris.Iris.wall_clock_rate).parameters
    assert "stream" in inspect.signature(iris.Iris.barrier).parameters
    for name in ("zeros", "ones", "empty", "randn", "rand"):
        d = _defaults(getattr(iris.Iris, name))
        assert d["dtype"] is None and d["device"] is None and d["out"] is None and d["requires_grad"] is False
        assert d["layout"] == torch.strided
    assert _defaults(iris.Iris.empty)["memory_format"] == torch.contiguous_format
    assert _defaults(iris.Iris.zeros_like)["memory_format"] == torch.preserve_format


# ------------------------------------------------------------------------------------------------
# Constructors with Iris's defaults


def test_dtype_defaults_follow_torch_default_dtype(shmem: iris.Iris) -> None:
    made = {"zeros": shmem.zeros(4), "ones": shmem.ones(2, 2), "empty": shmem.empty(3), "randn": shmem.randn(8),
            "rand": shmem.rand(8), "linspace": shmem.linspace(0, 1, 3), "full_float": shmem.full((2,), 0.5),
            "arange_float": shmem.arange(0.0, 2.0, 0.5)}
    assert {k: t.dtype for k, t in made.items()} == dict.fromkeys(made, torch.float32)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert shmem.zeros(4).dtype == torch.float64
        assert shmem.ones(4).dtype == torch.float64
        assert shmem.full((2,), 1.5).dtype == torch.float64
    finally:
        torch.set_default_dtype(previous)
    assert shmem.full((3,), 7).dtype == torch.int64 and shmem.full((3,), 7).tolist() == [7, 7, 7]
    assert shmem.arange(5).dtype == torch.int64 and shmem.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert shmem.randint(0, 10, (50,)).dtype == torch.int64
    assert shmem.uniform(16).dtype == torch.float32
    like = shmem.zeros_like(torch.ones(3, 2, dtype=torch.int16))
    assert like.dtype == torch.int16 and tuple(like.shape) == (3, 2) and bool((like == 0).all())
    for t in [*made.values(), like]:
        assert t.device == shmem.get_device() and shmem.on_heap(t)


def test_zeros_takes_sizes_as_ints_or_one_tuple(shmem: iris.Iris) -> None:
    assert tuple(shmem.zeros(2, 3).shape) == (2, 3)
    assert tuple(shmem.zeros((2, 3)).shape) == (2, 3)
    assert tuple(shmem.zeros([4]).shape) == (4,)
    assert tuple(shmem.zeros(((5, 2),)).shape) == (5, 2)  # Iris flattens nested tuples


def test_linspace_steps_as_tuple_and_empty_memory_format(shmem: iris.Iris) -> None:
    assert shmem.linspace(0.0, 4.0, (5,)).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    cl = shmem.empty(2, 3, 4, 5, memory_format=torch.channels_last)
    assert cl.stride() == torch.empty(2, 3, 4, 5, memory_format=torch.channels_last).stride()
    assert cl.is_contiguous(memory_format=torch.channels_last) and shmem.on_heap(cl)
    src = torch.ones(1, 2, 3, 3).to(memory_format=torch.channels_last)
    kept = shmem.zeros_like(src)  # preserve_format keeps channels_last, as Iris does
    assert kept.stride() == src.stride() and bool((kept == 0).all())
    assert shmem.empty(4, pin_memory=False).shape == (4,)
    with pytest.raises(ValueError, match="layout"):
        shmem.zeros(4, layout=torch.sparse_coo)
    with pytest.raises(ValueError, match="memory_format"):
        shmem.empty(3, memory_format=torch.channels_last)


def test_allocate_parse_size_and_deallocate(shmem: iris.Iris) -> None:
    before = shmem.heap_offset
    t = shmem.allocate(100, torch.float16)
    assert tuple(t.shape) == (100,) and t.dtype == torch.float16
    assert t.data_ptr() - shmem.memory_pool.data_ptr() == before and shmem.heap_offset == before + 1024
    t.fill_(3)
    assert shmem.parse_size((2, 3, 4)) == ((2, 3, 4), 24)
    assert shmem.parse_size(((2, 3),)) == ((2, 3), 6)
    offset = shmem.heap_offset
    assert shmem.deallocate(t) is None
    assert shmem.deallocate(t.data_ptr()) is None
    assert shmem.heap_offset == offset, "deallocate frees nothing (a bump allocator), as in Iris"
    assert bool((t == 3).all()), "a deallocated tensor's bytes are left alone"
    with pytest.raises(ValueError, match="num_elements"):
        shmem.allocate(-1, torch.float32)
    with pytest.raises(ValueError, match="dtype"):
        shmem.allocate(4, "float32")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------
# World, clocks, barrier


def test_world_queries_and_wall_clock_rate(shmem: iris.Iris) -> None:
    assert shmem.get_rank() == shmem.cur_rank == 0 and shmem.get_num_ranks() == shmem.num_ranks == 1
    assert shmem.get_device() == shmem.memory_pool.device
    assert shmem.broadcast(42, 0) == 42  # Iris's positional (value, source_rank)
    assert shmem.broadcast("x", source_rank=0) == "x"
    expected = 1 if shmem.get_device().type == "cpu" else 1_000_000
    assert shmem.wall_clock_rate(0) == expected == shmem.wall_clock_rate() == shmem.get_wall_clock_rate(0)
    for bad in (1, -1, "0", True):
        with pytest.raises(ValueError, match=r"rank must be an int in \[0, 1\)"):
            shmem.wall_clock_rate(bad)  # type: ignore[arg-type]


def test_barrier_waits_for_the_given_stream_only(shmem: iris.Iris) -> None:
    class Stream:
        synced = 0

        def synchronize(self) -> None:
            Stream.synced += 1

    shmem.barrier(Stream())
    shmem.barrier(stream=Stream())
    shmem.barrier()
    assert Stream.synced == 2


# ------------------------------------------------------------------------------------------------
# Logging


def test_log_and_log_stats_print_with_the_rank_prefix(shmem: iris.Iris, capsys: pytest.CaptureFixture[str]) -> None:
    shmem.log("starting")
    shmem.log_stats("3.5 GiB/s")
    shmem.log_debug("not shown: debug printing is off by default")
    assert capsys.readouterr().out == "[Iris] [0/1] starting\n[Iris] [0/1] 3.5 GiB/s\n"
    iris.set_logger_level(iris.DEBUG)
    shmem.log_debug("heap base 0x0")
    assert capsys.readouterr().out == "[Iris] [0/1] heap base 0x0\n"
    iris.set_logger_level(iris.WARNING)
    shmem.log("quiet")
    shmem.log_stats("quiet")
    assert capsys.readouterr().out == ""


def test_logger_methods_go_to_stderr_with_rank(shmem: iris.Iris, capsys: pytest.CaptureFixture[str],
                                               caplog: pytest.LogCaptureFixture) -> None:
    assert iris.logger.level == iris.INFO  # Iris's default level
    with caplog.at_level(iris.INFO, logger="iris_ops"):
        shmem.debug("hidden at INFO")
        shmem.info("allocating buffers")
        shmem.warning("careful")
        shmem.error("broken")
    err = capsys.readouterr().err.splitlines()
    assert err == ["[Iris] [0/1] allocating buffers", "[Iris] [0/1] careful", "[Iris] [0/1] broken"]
    assert [(r.levelno, r.getMessage(), r.iris_rank, r.iris_num_ranks) for r in caplog.records] == [
        (iris.INFO, "allocating buffers", 0, 1), (iris.WARNING, "careful", 0, 1), (iris.ERROR, "broken", 0, 1)]
    iris.set_logger_level("debug")
    shmem.debug("now shown")
    assert capsys.readouterr().err == "[Iris] [0/1] now shown\n"
    with pytest.raises(ValueError, match="DEBUG, INFO, WARNING, ERROR"):
        iris.set_logger_level("loud")


# ------------------------------------------------------------------------------------------------
# do_bench


class FakeClock:
    """A clock that only moves when fn runs: fn advances it by the next of `durations_s`."""

    def __init__(self, durations_s: list[float]) -> None:
        self.now = 1000.0
        self.durations = list(durations_s)
        self.events: list[str] = []

    def __call__(self) -> float:
        return self.now

    def fn(self) -> None:
        self.events.append("fn")
        self.now += self.durations.pop(0)

    def barrier(self) -> None:
        self.events.append("barrier")

    def preamble(self) -> None:
        self.events.append("preamble")


TIMED_MS = [4.0, 1.0, 3.0, 2.0, 5.0]


def _bench(monkeypatch: pytest.MonkeyPatch, **kw: Any) -> tuple[Any, FakeClock]:
    if heap._timing_on_gpu():
        pytest.skip("the fake clock drives the CPU path; on a GPU do_bench times with CUDA events")
    clock = FakeClock([9.0] * 4 + [ms / 1e3 for ms in TIMED_MS])  # 1 untimed call + 3 warm-ups, then 5 timed
    monkeypatch.setattr(heap, "_host_clock", clock)
    result = iris.do_bench(clock.fn, clock.barrier, clock.preamble, n_warmup=3, n_repeat=5, **kw)
    return result, clock


def test_do_bench_call_sequence_is_iris(monkeypatch: pytest.MonkeyPatch) -> None:
    _, clock = _bench(monkeypatch, return_mode="all")
    run = ["barrier", "preamble", "barrier", "fn"]
    assert clock.events == ["barrier", "preamble", "fn", "barrier"] + run * (3 + 5) + ["barrier"]
    assert not clock.durations, "fn ran exactly 1 + n_warmup + n_repeat times"


@pytest.mark.parametrize(("kw", "expected"), [
    ({}, 3.0),  # mean, Iris's default
    ({"return_mode": "mean"}, 3.0),
    ({"return_mode": "median"}, 3.0),
    ({"return_mode": "min"}, 1.0),
    ({"return_mode": "max"}, 5.0),
    ({"return_mode": "all"}, TIMED_MS),
    ({"quantiles": [0.5]}, 3.0),  # one quantile -> a number
    ({"quantiles": [0.2, 0.5, 0.8]}, [1.8, 3.0, 4.2]),  # linear interpolation
    ({"quantiles": [0.0, 1.0], "return_mode": "min"}, [1.0, 5.0]),  # quantiles win over return_mode
])
def test_do_bench_statistics(monkeypatch: pytest.MonkeyPatch, kw: dict[str, Any], expected: Any) -> None:
    result, _ = _bench(monkeypatch, **kw)
    assert result == pytest.approx(expected, abs=1e-9)


def test_do_bench_median_of_an_even_count(monkeypatch: pytest.MonkeyPatch) -> None:
    if heap._timing_on_gpu():
        pytest.skip("CPU path only")
    clock = FakeClock([0.0, 0.004, 0.001, 0.003, 0.002])
    monkeypatch.setattr(heap, "_host_clock", clock)
    assert iris.do_bench(clock.fn, n_warmup=0, n_repeat=4, return_mode="median") == pytest.approx(2.5)


def test_do_bench_on_the_real_clock() -> None:
    calls = []

    def sleep_20ms() -> None:
        calls.append(time.monotonic())
        time.sleep(0.02)

    times = iris.do_bench(sleep_20ms, n_warmup=1, n_repeat=3, return_mode="all")
    assert len(calls) == 5 and len(times) == 3
    assert all(19.0 <= t < 500.0 for t in times), times
    assert iris.do_bench(lambda: None, n_warmup=0, n_repeat=2) < 5.0


@pytest.mark.parametrize(("kw", "message"), [
    ({"return_mode": "average"}, "return_mode must be one of mean, median, min, max, all"),
    ({"quantiles": [1.5]}, r"quantiles must lie in \[0, 1\]"),
    ({"quantiles": []}, "quantiles must be None or a non-empty list"),
    ({"n_repeat": 0}, "n_repeat must be an int >= 1"),
    ({"n_warmup": -1}, "n_warmup must be an int >= 0"),
])
def test_do_bench_bad_arguments(kw: dict[str, Any], message: str) -> None:
    ran = []
    with pytest.raises(ValueError, match=message):
        iris.do_bench(lambda: ran.append(1), **kw)
    assert not ran, "arguments are checked before fn runs"


# ------------------------------------------------------------------------------------------------
# memset_tensor


def test_memset_tensor_on_the_heap(shmem: iris.Iris) -> None:
    before = shmem.full((1024,), -7, dtype=torch.int32)
    t = shmem.zeros(2500, dtype=torch.int32)  # 3 blocks of 1024, the last one partial
    after = shmem.full((1024,), -7, dtype=torch.int32)
    assert iris.memset_tensor(t, 42) is None
    assert bool((t == 42).all())
    iris.memset_tensor(t[:10], -(1 << 31))
    assert t[:10].tolist() == [-(1 << 31)] * 10 and bool((t[10:] == 42).all())
    assert bool((before == -7).all()) and bool((after == -7).all()), "memset wrote outside the tensor"
    plain = torch.zeros(5, dtype=torch.int32, device=shmem.get_device())  # Iris takes any int32 tensor
    iris.memset_tensor(plain, 3)
    assert plain.tolist() == [3] * 5


def test_memset_tensor_refuses_what_iris_refuses(shmem: iris.Iris) -> None:
    with pytest.raises(ValueError, match=r"contiguous torch\.int32"):
        iris.memset_tensor(shmem.zeros(8, dtype=torch.float32), 1)
    with pytest.raises(ValueError, match=r"contiguous torch\.int32"):
        iris.memset_tensor(shmem.zeros(4, 4, dtype=torch.int32).t(), 1)
    with pytest.raises(ValueError, match="fits in int32"):
        iris.memset_tensor(shmem.zeros(4, dtype=torch.int32), 1 << 31)


# ------------------------------------------------------------------------------------------------
# The symm backend: chosen by name only, and a one-line error where it cannot run


def test_symm_backend_is_chosen_by_name_or_env(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "symm" in BACKENDS
    assert choose_backend("symm") == "symm" and choose_backend("SYMM") == "symm"
    monkeypatch.setenv("IRIS_OPS_BACKEND", "symm")
    assert choose_backend() == "symm"
    monkeypatch.setenv("IRIS_OPS_BACKEND", "auto")
    assert choose_backend() != "symm", "auto never picks torch symmetric memory"
    with pytest.raises(ValueError, match="must be one of auto, shm, cuda, hip, symm"):
        choose_backend("nvshmem")


@pytest.mark.skipif(on_gpu(), reason="the error is for machines without a CUDA GPU")
def test_symm_backend_without_a_gpu_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(RuntimeError) as info:
        iris.iris(1 << 20, backend="symm")
    msg = str(info.value)
    assert msg.startswith("IRIS_OPS_BACKEND=symm needs a CUDA GPU with torch symmetric memory") and "\n" not in msg
    assert not torch.cuda.is_initialized()
    # From the environment, in a fresh process without the interpreter: the reason is the missing GPU.
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(IRIS_OPS_BACKEND="symm", PYTHONPATH=str(REPO_ROOT))
    proc = subprocess.run([sys.executable, "-c", "import iris_ops; iris_ops.iris(1 << 20)"], env=env,
                          capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last == (f"RuntimeError: IRIS_OPS_BACKEND=symm needs a CUDA GPU with torch symmetric memory; "
                    f"torch {torch.__version__} sees no GPU"), proc.stderr[-2000:]


class FakeHandle:
    def __init__(self, ptrs: list[int], size: int) -> None:
        self.buffer_ptrs = ptrs
        self.buffer_size = size


def test_symm_peer_bases_come_from_the_handle() -> None:
    heap = torch.zeros(4096, dtype=torch.uint8)
    me = heap.data_ptr()
    peers = [0x7000_0000_0000, me, 0x7100_0000_0000]
    assert torch_symm.peer_heap_bases(FakeHandle(peers, 4096), heap, 1, 3) == peers
    # torch's pool may place the heap inside a larger buffer: the same offset applies on every peer
    inside = [p - 1024 for p in peers]
    assert torch_symm.peer_heap_bases(FakeHandle(inside, 8192), heap, 1, 3) == [p + 1024 for p in inside]
    with pytest.raises(RuntimeError, match="not inside this rank's symmetric buffer"):
        torch_symm.peer_heap_bases(FakeHandle(inside, 4096), heap, 1, 3)
    with pytest.raises(RuntimeError, match="2 peer buffers, expected 3"):
        torch_symm.peer_heap_bases(FakeHandle(peers[:2], 4096), heap, 1, 3)


# ------------------------------------------------------------------------------------------------
# Two ranks under mpirun


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    skip_unless_ranks(2)
    folder = tmp_path_factory.mktemp("iris_host_api_shm")
    summary = folder.parent / "iris_host_api_summary.json"
    result = run_mpi(2, MPI_DIR / "iris_host_api.py", "--json", str(summary), timeout=300,
                     env={**shm_env(folder), "IRIS_OPS_TIMEOUT_S": "120"})
    data = json.loads(summary.read_text())
    data["output"] = result.stdout
    data["leftovers"] = leftovers(folder)
    return data


MPI_CHECKS: list[str] = list(load_mpi_script("iris_host_api.py", "iris_host_api_mpi").CHECKS)


@pytest.mark.parametrize("check", MPI_CHECKS)
def test_host_api_on_two_ranks(two_ranks: dict[str, Any], check: str) -> None:
    res = two_ranks["checks"][check]
    assert res["ok"], "\n".join(res["errors"])


def test_each_rank_prints_its_own_lines(two_ranks: dict[str, Any]) -> None:
    lines = two_ranks["output"].splitlines()
    for r in range(2):
        assert f"[Iris] [{r}/2] log from rank {r}" in lines
        assert f"[Iris] [{r}/2] stats from rank {r}: 1.25 ms" in lines
        assert f"[Iris] [{r}/2] info from rank {r}" in lines  # stderr, merged by run_mpi
        assert f"[Iris] [{r}/2] debug on after set_logger_level from rank {r}" in lines
        assert f"log_debug hidden by default from rank {r}" not in two_ranks["output"]
    # rank-0-only output is the program's own choice (Iris programs guard with get_rank() == 0)
    assert sum("only rank 0 says this" in line for line in lines) == 1
    assert "[Iris] [0/2] only rank 0 says this" in lines


def test_nothing_left_in_shared_memory(two_ranks: dict[str, Any]) -> None:
    assert two_ranks["leftovers"] == []


def test_an_iris_style_program_runs_unchanged(tmp_path: Path) -> None:
    """An Iris-style atomic-add benchmark (Iris's examples' shape), only `import iris` -> `import iris_ops as iris`."""
    skip_unless_ranks(2)
    folder = tmp_path / "shm"
    out = tmp_path / "matrix.json"
    res = run_mpi(2, MPI_DIR / "iris_style_atomic_add.py", "--buffer_size", "4096", "--num_experiments", "2",
                  "--num_warmup", "1", "--validate", "--output_file", str(out), timeout=300,
                  env={**shm_env(folder), "IRIS_OPS_TIMEOUT_S": "120"})
    lines = res.stdout.splitlines()
    for src in range(2):
        for dst in range(2):
            assert f"[Iris] [{dst}/2] validated atomic_add {src}->{dst}: ok" in lines, res.stdout[-3000:]
    matrix = json.loads(out.read_text())
    assert [(m["source_rank"], m["destination_rank"]) for m in matrix] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert all(m["bandwidth_gbps"] > 0 for m in matrix)
    assert sum(line.startswith("Unidirectional ATOMIC_ADD bandwidth") for line in lines) == 1  # rank 0 only
    assert leftovers(folder) == []
