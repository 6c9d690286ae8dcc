"""The overlapped GEMM + communication as a library op (see overlap.op).

    config      OverlapConfig: the problem and every kernel choice; resolve() plans the rest, checks the whole
    planner     the defaults: mode, SM split, the GEMM (stream_k.select), communication tile; the tuning cache
    buffers     every tensor of one op (heap and device); heap_bytes
    modes       one class per mode: its step (launches), its cost, its checks
    parts       the launches a step is made of, bound to one op
    step        a step's launches; queueing them (two streams, graph replay)
    op          OverlapOp: create, call, check_errors, reset, launches
    kernels, kernel_args, communication/, copy_steps    the device side
"""

from iris_ops.env import use_interpreter_without_gpu

use_interpreter_without_gpu()  # no GPU: the kernels run in Triton's interpreter (chosen before triton is imported)

from overlap.config import InvalidConfig, OverlapConfig, heap_bytes  # noqa: E402
from overlap.op import OverlapOp  # noqa: E402

__all__ = ["InvalidConfig", "OverlapConfig", "OverlapOp", "heap_bytes"]
