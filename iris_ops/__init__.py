"""iris_ops: a PGAS symmetric heap and its Triton device API, a drop-in for Iris.

    import iris_ops as iris
    shmem = iris.iris(heap_size=1 << 30)
    buf = shmem.zeros(1024, dtype=torch.float32)
    kernel[grid](buf, shmem.get_rank(), peer, shmem.get_heap_bases())   # kernel uses iris.load/store/...

Host helpers as Iris has them: do_bench, memset_tensor, logger, set_logger_level, DEBUG/INFO/WARNING/ERROR.

Backends: CUDA IPC (NVIDIA), HIP IPC (AMD), POSIX shared memory (CPU, with TRITON_INTERPRET=1), torch
symmetric memory (IRIS_OPS_BACKEND=symm, NVIDIA; never chosen automatically).

Beyond Iris: a step's collective error state (record_error_all, wait_or_error, wait_local_or_error on the
device; ErrorState, CollectiveError on the host: iris_ops.error_state); the environment variables and their
check (iris_ops.env.check, ConfigError); HeapReserveError for a heap that cannot be had (every rank raises
it); how a command-line entry ends (iris_ops.entry.run_main); `python -m iris_ops.torchrun`.

The package's names are loaded when first used (PEP 562), so that `iris_ops.errors`, `iris_ops.env`,
`iris_ops.bootstrap` and `iris_ops.entry`, which need neither torch nor Triton, can be imported by a
program that runs without them (the vendor baselines, a flag check) without loading the rest.
"""

from __future__ import annotations

if __name__ == "iris_ops":  # imported by its folder's name, from a checkout: be streamk_pgas.iris_ops itself
    from streamk_pgas.namespace import alias_toplevel

    alias_toplevel(__name__)

from streamk_pgas.namespace import lazy_attributes

_DEVICE = ("ERR_PEER_READY", "ERR_STREAMK_FIXUP", "ERR_TILE_READY", "ERROR_WORDS", "TIMER_GLOBALTIMER", "TIMER_LOGICAL",
           "TIMER_MEMREALTIME", "atomic_add", "atomic_and", "atomic_cas", "atomic_max", "atomic_min", "atomic_or",
           "atomic_sub", "atomic_xchg", "atomic_xor", "decode_error", "default_timer_kind", "get", "load", "notify",
           "notify_add", "put", "read_timer", "record_error", "record_error_all", "spin_budget", "store", "translate",
           "wait", "wait_local", "wait_local_or_error", "wait_or_error")
_HEAP = ("DEBUG", "ERROR", "INFO", "WARNING", "HeapPlacementError", "Iris", "do_bench", "iris", "logger",
         "memset_tensor", "set_logger_level")
_SOURCE = {**dict.fromkeys(_DEVICE, "device"), **dict.fromkeys(_HEAP, "heap"),
           "CollectiveError": "error_state", "ErrorState": "error_state",
           "ConfigError": "errors", "HeapReserveError": "errors"}
__all__ = sorted(_SOURCE)
__getattr__, __dir__ = lazy_attributes(__name__, _SOURCE)
