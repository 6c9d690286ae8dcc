"""Stream-K GEMM (Osama et al., PPoPP 2023) in Triton: a persistent kernel whose programs split the output
tiles' MAC-loop iterations evenly, combine split tiles through a workspace with per-program locks, and
hand every finished tile to an epilogue hook that stores it and marks it ready (tile flags).

    plan      StreamKPlan / plan_streamk: the work split (host)
    kernel    streamk_program (device function), streamk_gemm_kernel, store_and_signal (default epilogue)
    configs   KernelConfig / default_config: tile sizes, stages, warps per dtype and arch
    gemm      StreamKGemm (workspace, epochs, launch, errors), matmul
    launch    BoundLaunch: a Triton launch bound once (arguments resolved), replayed for a few microseconds
    tiles     tile order (grouped row-major), shared with the communication that follows the GEMM
    dtypes    datatype names and C's dtype
"""

from iris_ops.env import use_interpreter_without_gpu

use_interpreter_without_gpu()  # no GPU: the kernels run in Triton's interpreter (chosen before triton is imported)

from stream_k.configs import KernelConfig, current_arch, default_config  # noqa: E402
from stream_k.gemm import StreamKGemm, default_num_programs, matmul  # noqa: E402
from stream_k.kernel import store_and_signal, streamk_gemm_kernel, streamk_program  # noqa: E402
from stream_k.plan import SCHEDULES, StreamKPlan, WorkItem, plan_streamk, tile_coords  # noqa: E402

__all__ = [
    "SCHEDULES",
    "KernelConfig",
    "StreamKGemm",
    "StreamKPlan",
    "WorkItem",
    "current_arch",
    "default_config",
    "default_num_programs",
    "matmul",
    "plan_streamk",
    "store_and_signal",
    "streamk_gemm_kernel",
    "streamk_program",
    "tile_coords",
]
