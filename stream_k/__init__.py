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

from __future__ import annotations

if __name__ == "stream_k":  # imported by its folder's name, from a checkout: be streamk_pgas.stream_k itself
    from streamk_pgas.namespace import alias_toplevel

    alias_toplevel(__name__)

from streamk_pgas.iris_ops.env import use_interpreter_without_gpu
from streamk_pgas.namespace import lazy_attributes

use_interpreter_without_gpu()  # no GPU: the kernels run in Triton's interpreter (chosen before triton is imported)

# The package's names are loaded when first used (PEP 562), so that stream_k.dtypes (torch and spec only) can be
# imported without loading Triton: the vendor baselines (reference/) need the datatype map and nothing else.
_SOURCE = {
    **dict.fromkeys(("KernelConfig", "current_arch", "default_config"), "configs"),
    **dict.fromkeys(("StreamKGemm", "default_num_programs", "matmul"), "gemm"),
    **dict.fromkeys(("store_and_signal", "streamk_gemm_kernel", "streamk_program"), "kernel"),
    **dict.fromkeys(("SCHEDULES", "StreamKPlan", "WorkItem", "plan_streamk", "tile_coords"), "plan"),
}
__all__ = sorted(_SOURCE)
__getattr__, __dir__ = lazy_attributes(__name__, _SOURCE)
