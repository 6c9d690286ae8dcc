"""A step's launches and how they are queued: in order on the current stream, or, for a mode with a second
stream, forked onto the op's communication stream and joined back; from its STEP_GRAPH_AFTER-th call on, such a
step is replayed from one CUDA graph captured on the spot (queued piece by piece it costs the host tens of
microseconds; replayed, one launch). STREAMK_PGAS_STEP_GRAPH=0 turns the replay off. A caller's own capture of a
step queues it launch by launch into that capture."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from streamk_pgas.iris_ops.env import flag_from_env
from streamk_pgas.stream_k.launch import BoundLaunch

STEP_GRAPH_ENV = "STREAMK_PGAS_STEP_GRAPH"  # 0: no replay; 1 (default): replay from one graph


def step_graph_enabled() -> bool:
    """Whether second-stream steps are replayed from a graph; a bad value of STREAMK_PGAS_STEP_GRAPH raises
    iris_ops.errors.ConfigError naming it."""
    return flag_from_env(STEP_GRAPH_ENV, True)


STEP_GRAPH_AFTER = 2
KINDS = ("step", "traced", "gemm_alone", "comm_alone")  # what a step may be (overlap.modes builds each)

Launchable = Any  # a BoundLaunch, a copy schedule, or a host-queued device action: called with a stream or None


@dataclass
class StepLaunches:
    """The launches of one kind of step, in order: `pre` on the current stream first, then `main` (named groups:
    the spans of the benchmark's per-kernel timing), `side` on the communication stream (two streams on a GPU),
    then `post` on the current stream."""

    kind: str
    pre: list[Launchable] = field(default_factory=list)
    main: list[tuple[str, list[Launchable]]] = field(default_factory=list)
    side: Launchable | None = None
    side_name: str = "comm"
    post: list[Callable[[], Any]] = field(default_factory=list)
    side_first: bool = False  # the main launches wait on the side one (all_gather_gemm): run in order, it goes first
    pre_name: str = "start"  # the spans of `pre` and `post` in the benchmark's timing
    post_name: str = "compact"
    replay: bool = False  # replayed from one CUDA graph after STEP_GRAPH_AFTER calls
    runs: int = 0
    graph: Any = None
    released: bool = False  # release of the caller's A and B from its launches tried after its first run

    def launches(self) -> list[Launchable]:
        """Every launch of the step (post actions aside) in the order a single stream would run them."""
        side = [self.side] if self.side is not None else []
        main = [x for _, group in self.main for x in group]
        return [*self.pre, *side, *main] if self.side_first else [*self.pre, *main, *side]

    def kernels(self) -> list[BoundLaunch]:
        """The Triton kernel launches of the step, those inside a copy schedule and the post actions' included."""
        out: list[BoundLaunch] = []
        for x in [*self.launches(), *self.post]:
            out.extend(x.launches if hasattr(x, "launches") else [x] if isinstance(x, BoundLaunch) else [])
        return out


class StepRunner:
    """Queues steps on the current stream; forks and joins a second stream where the mode has one."""

    def __init__(self, device: torch.device, two_streams: bool) -> None:
        self.device = device
        self.comm_stream = torch.cuda.Stream(device) if two_streams else None
        if self.comm_stream is not None:
            self._fork = torch.cuda.Event()
            self._join = torch.cuda.Event()
        self._cur_handle: int | None = None
        self._cur_stream: Any = None

    def run(self, step: StepLaunches) -> None:
        if step.replay and self._replay(step):
            return
        self.queue(step)

    def _replay(self, step: StepLaunches) -> bool:
        """Launch the step as one graph replay on the current stream (captured at its STEP_GRAPH_AFTER-th call);
        False where it must be queued launch by launch (earlier calls, inside a caller's capture)."""
        if torch.cuda.is_current_stream_capturing():
            return False
        if step.graph is None:
            step.runs += 1
            if step.runs <= STEP_GRAPH_AFTER:
                return False
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                self.queue(step)
            step.graph = graph
        step.graph.replay()
        return True

    def queue(self, step: StepLaunches) -> None:
        """Queue the step's launches: pre and main on the current stream, the side one on the communication stream
        between a fork and a join, then the post actions."""
        for action in step.pre:
            action()
        if step.side is None or self.comm_stream is None:
            if step.side is not None and step.side_first:
                step.side()
            for _, group in step.main:
                for launch in group:
                    launch()
            if step.side is not None and not step.side_first:
                step.side()
            for action in step.post:
                action()
            return
        # torch.cuda.Event's record/wait without their Python wrappers (this is the per-step host path).
        cur, comm = self.current_stream(), self.comm_stream
        event = torch._C._CudaEventBase
        event.record(self._fork, cur)
        event.wait(self._fork, comm)
        if step.side_first:
            step.side(comm)
        for _, group in step.main:
            for launch in group:
                launch(cur)
        if not step.side_first:
            step.side(comm)
        event.record(self._join, comm)
        event.wait(self._join, cur)
        for action in step.post:
            action()

    def current_stream(self) -> torch.cuda.Stream:
        """The current stream as a torch object, made again only when the current stream changes."""
        handle = torch._C._cuda_getCurrentRawStream(self.device.index)
        if handle != self._cur_handle:
            self._cur_stream = torch.cuda.current_stream(self.device)
            self._cur_handle = handle
        return self._cur_stream
