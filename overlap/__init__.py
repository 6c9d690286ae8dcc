"""The overlapped GEMM + communication as a library op (see overlap.op).

    config      OverlapConfig: the problem and every kernel choice; InvalidConfig, the checks of its fields
    parts       the launches a step is made of, bound to one op
    modes       one class per mode: its step (launches), its cost, its checks
    planner     the defaults: mode, SM split, the GEMM (stream_k.select), communication tile; the tuning cache
    resolution  resolve_config (plans the rest, checks the whole), heap_bytes
    buffers     every tensor of one op (heap and device)
    step        a step's launches; queueing them (two streams, graph replay)
    op          OverlapOp: create, call, check_errors, reset, launches
    kernels, kernel_args, communication/, copy_steps    the device side
"""

if __name__ == "overlap":  # imported by its folder's name, from a checkout: be streamk_pgas.overlap itself
    from streamk_pgas.namespace import alias_toplevel

    alias_toplevel(__name__)

from streamk_pgas.iris_ops.env import use_interpreter_without_gpu

use_interpreter_without_gpu()  # no GPU: the kernels run in Triton's interpreter (chosen before triton is imported)

from streamk_pgas.overlap.config import InvalidConfig, OverlapConfig, SlowModeWarning  # noqa: E402
from streamk_pgas.overlap.op import OverlapOp  # noqa: E402
from streamk_pgas.overlap.resolution import heap_bytes, resolve_config  # noqa: E402

__all__ = ["InvalidConfig", "OverlapConfig", "OverlapOp", "SlowModeWarning", "heap_bytes", "resolve_config"]
