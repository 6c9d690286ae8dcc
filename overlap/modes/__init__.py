"""One class per mode (spec.MODES): its step (the launches of each kind of step, overlap.parts), its cost (the
planner's model), its checks (the SM split). Each module's docstring says what the mode launches, with one rank
and with several. `MODE_STEPS` is the one dispatch table: nothing else branches on a mode's name.

    bulk_sync         GEMM, then communication
    two_streams       GEMM and communication kernels on two streams
    fused             one kernel, GEMM and communication programs
    fused_sequential  one kernel, each GEMM program moves its own tiles
    copy_engine       GEMM on every SM, the copy engines move the data
"""

from __future__ import annotations

from streamk_pgas import spec
from streamk_pgas.overlap.modes.base import ModeSteps
from streamk_pgas.overlap.modes.bulk_sync import BulkSync
from streamk_pgas.overlap.modes.copy_engine import CopyEngine
from streamk_pgas.overlap.modes.fused import Fused
from streamk_pgas.overlap.modes.fused_sequential import FusedSequential
from streamk_pgas.overlap.modes.two_streams import TwoStreams

MODE_STEPS: dict[str, ModeSteps] = {m.name: m for m in (BulkSync(), TwoStreams(), Fused(), FusedSequential(),
                                                        CopyEngine())}
assert tuple(MODE_STEPS) == tuple(spec.MODES)

__all__ = ["MODE_STEPS", "ModeSteps"]
