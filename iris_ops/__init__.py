"""iris_ops: a PGAS symmetric heap and its Triton device API, a drop-in for Iris.

    import iris_ops as iris
    shmem = iris.iris(heap_size=1 << 30)
    buf = shmem.zeros(1024, dtype=torch.float32)
    kernel[grid](buf, shmem.get_rank(), peer, shmem.get_heap_bases())   # kernel uses iris.load/store/...

Host helpers as Iris has them: do_bench, memset_tensor, logger, set_logger_level, DEBUG/INFO/WARNING/ERROR.

Backends: CUDA IPC (NVIDIA), HIP IPC (AMD), POSIX shared memory (CPU, with TRITON_INTERPRET=1), torch
symmetric memory (IRIS_OPS_BACKEND=symm, NVIDIA; never chosen automatically).
"""

from iris_ops.device import (
    ERR_PEER_READY,
    ERR_STREAMK_FIXUP,
    ERR_TILE_READY,
    TIMER_GLOBALTIMER,
    TIMER_LOGICAL,
    TIMER_MEMREALTIME,
    atomic_add,
    atomic_and,
    atomic_cas,
    atomic_max,
    atomic_min,
    atomic_or,
    atomic_sub,
    atomic_xchg,
    atomic_xor,
    decode_error,
    default_timer_kind,
    get,
    load,
    notify,
    notify_add,
    put,
    read_timer,
    record_error,
    spin_budget,
    store,
    translate,
    wait,
    wait_local,
)
from iris_ops.heap import (
    DEBUG,
    ERROR,
    INFO,
    WARNING,
    HeapPlacementError,
    Iris,
    do_bench,
    iris,
    logger,
    memset_tensor,
    set_logger_level,
)

__all__ = [
    "DEBUG",
    "ERROR",
    "ERR_PEER_READY",
    "ERR_STREAMK_FIXUP",
    "ERR_TILE_READY",
    "INFO",
    "TIMER_GLOBALTIMER",
    "TIMER_LOGICAL",
    "TIMER_MEMREALTIME",
    "WARNING",
    "HeapPlacementError",
    "Iris",
    "atomic_add",
    "atomic_and",
    "atomic_cas",
    "atomic_max",
    "atomic_min",
    "atomic_or",
    "atomic_sub",
    "atomic_xchg",
    "atomic_xor",
    "decode_error",
    "default_timer_kind",
    "do_bench",
    "get",
    "iris",
    "load",
    "logger",
    "memset_tensor",
    "notify",
    "notify_add",
    "put",
    "read_timer",
    "record_error",
    "set_logger_level",
    "spin_budget",
    "store",
    "translate",
    "wait",
    "wait_local",
]
