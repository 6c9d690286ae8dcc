"""Synchronised, warmed-up, many-iteration timing shared by benchmark.py and reference/.

Before every iteration (warm-up included) the device is drained and all ranks meet at a host
barrier. On the GPU a short spin kernel is then queued ahead of the start event, so the step's
launches are already queued when the clock starts: what is timed is the device's work, not the
host's launch latency (as in a real program, whose launches run ahead of the device). A host
barrier can leave the ranks' devices starting many microseconds apart (however the processes
happen to wake), so `start_sync` can queue a device-side barrier between the spin and the start
event (benchmark.py: a heap-flag barrier kernel; reference/: a one-element NCCL all-reduce): every
rank's clock then starts within a few microseconds of the others'. End to end is timed with device
events on the GPU (host clock on the CPU backend); kernels are timed with the event pairs the step records through
`StepTimer.span`. Per iteration the slowest rank's time is kept, since a distributed step is done
only when its last rank is. benchmark.py and reference/ both time through here.

`watch` (a harness.device_watch.DeviceWatch, or None) bounds the waits for the device: every drain marks the stream
first, and the back-to-back loops mark it every few steps (one event record, no synchronize in a timed region), so a
device that stops making progress (a peer's collective that never completes) ends the process instead of hanging it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

from streamk_pgas.harness.device_watch import DeviceWatch
from streamk_pgas.harness.progress import Progress

# ~0.5 ms of device spin (at ~2 GHz) queued before each timed iteration: longer than the host needs
# to launch any step here, so no step waits on its own launches.
QUEUE_AHEAD_CYCLES = 1_000_000
METHOD = ("per iteration: device drained, host barrier of all ranks, a ~0.5 ms device spin queued ahead of the "
          "start event (hides host launch latency), then (start_sync 'device') a device-side barrier of all ranks' "
          "streams, device events around the step; the slowest rank's time per iteration; median over the timed "
          "iterations after warm-up")
START_SYNCS = ("device", "host")
LOOP_METHOD = ("back to back (what a model sees): after warm-up, all ranks drained and met at a host barrier and "
               "(start_sync 'device') a device-side barrier, then an event, `iters` steps launched with nothing "
               "between them, an event; the loop's time over its step count, the slowest rank's; median of "
               "several such loops. 'graph': the same with one captured step replayed from a CUDA graph")
HOST_METHOD = ("host time of one call (perf_counter around it) while the device is kept busy by a spin queued "
               "first, so no launch waits for the device; median over the calls")
LOOP_REPEATS = 5


class StepTimer:
    """Collects named (start, end) spans within one iteration."""

    def __init__(self, use_events: bool) -> None:
        self.use_events = use_events
        self._spans: dict[str, tuple[Any, Any]] = {}

    def _mark(self, stream: Any = None) -> Any:
        if not self.use_events:
            return time.perf_counter()
        import torch

        ev = torch.cuda.Event(enable_timing=True)
        ev.record(stream) if stream is not None else ev.record()
        return ev

    @contextmanager
    def span(self, name: str, stream: Any = None) -> Iterator[None]:
        """Time what is launched inside the block on `stream` (default: the current stream)."""
        if stream is not None and self.use_events:
            import torch

            with torch.cuda.stream(stream):
                start = self._mark(stream)
                yield
                end = self._mark(stream)
        else:
            start = self._mark(stream)
            yield
            end = self._mark(stream)
        self._spans[name] = (start, end)

    def elapsed_ms(self) -> dict[str, float]:
        if self.use_events:
            return {k: s.elapsed_time(e) for k, (s, e) in self._spans.items()}
        return {k: (e - s) * 1e3 for k, (s, e) in self._spans.items()}


def sample_ms(fn: Callable[[], Any], warmup: int, rep: int, gpu: bool) -> list[float]:
    """Milliseconds of `rep` isolated runs of fn: triton.testing.do_bench's samples on a GPU (L2 flushed before
    each run), the host clock on the CPU."""
    if gpu:
        from triton.testing import do_bench

        return list(do_bench(fn, warmup=warmup, rep=rep, return_mode="all"))
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(rep):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def time_iterations(
    step: Callable[[StepTimer], None],
    *,
    iters: int,
    warmup: int,
    barrier: Callable[[], None],
    use_events: bool,
    allgather: Callable[[Any], list[Any]] | None = None,
    before_each: Callable[[], None] | None = None,
    start_sync: Callable[[int], None] | None = None,
    progress: Progress | None = None,
    watch: DeviceWatch | None = None,
) -> tuple[list[float], dict[str, list[float]]]:
    """Run `step` warmup + iters times; return per-iteration e2e ms and per-kernel ms (timed part only).

    `before_each` runs outside the timed region (e.g. resetting flags in a debug run).
    `start_sync(i)` queues iteration i's device-side start barrier (after the spin, before the start event).
    With `allgather`, each iteration's time is the maximum over ranks.
    """
    sync = (lambda: device_sync(watch)) if use_events else (lambda: None)
    e2e: list[float] = []
    kernels: dict[str, list[float]] = {}
    for it in range(warmup + iters):
        if before_each is not None:
            before_each()
        sync()
        barrier()
        if use_events:
            queue_ahead()
        if start_sync is not None:
            start_sync(it)
        timer = StepTimer(use_events)
        with timer.span("__e2e__"):
            step(timer)
        sync()
        if progress is not None:
            progress.tick(it + 1)  # after the drain: outside the timed region
        if it < warmup:
            continue
        spans = timer.elapsed_ms()
        e2e.append(spans.pop("__e2e__"))
        for name, ms in spans.items():
            kernels.setdefault(name, []).append(ms)
    if allgather is not None:
        everyone = allgather((e2e, kernels))
        e2e = [max(vals) for vals in zip(*(r[0] for r in everyone))]
        kernels = {
            name: [max(vals) for vals in zip(*(r[1].get(name, []) for r in everyone))]
            for name in kernels
        }
    return e2e, kernels


def queue_ahead() -> None:
    """Queue ~0.5 ms of device spin on the current stream, so the launches that follow start back to back."""
    import torch

    if hasattr(torch.cuda, "_sleep"):
        torch.cuda._sleep(QUEUE_AHEAD_CYCLES)


def device_sync(watch: DeviceWatch | None = None) -> None:
    """Wait for the device to finish its work; with a watch, the wait is bounded (a mark goes first)."""
    import torch

    if watch is not None:
        watch.mark()
    torch.cuda.synchronize()


def time_loop(
    step: Callable[[], None],
    *,
    iters: int,
    warmup: int,
    barrier: Callable[[], None],
    use_events: bool,
    allgather: Callable[[Any], list[Any]] | None = None,
    start_sync: Callable[[int], None] | None = None,
    repeats: int = LOOP_REPEATS,
    progress: Progress | None = None,
    watch: DeviceWatch | None = None,
) -> list[float]:
    """ms per step of `iters` steps launched back to back, one figure per repeat (the slowest rank's).
    `progress` counts steps (warmup + repeats * iters): its check between two launches costs the host well under a
    microsecond, and it prints only after ~10 s, which no loop on a GPU takes (the interpreter's do). `watch`
    marks the stream every `watch.every` steps (one event record, no synchronize)."""
    sync = (lambda: device_sync(watch)) if use_events else (lambda: None)
    done = 0

    def counted() -> None:
        nonlocal done
        step()
        done += 1
        if progress is not None:
            progress.tick(done)
        if watch is not None:
            watch.step()

    for _ in range(warmup):
        counted()
    per_step: list[float] = []
    for rep in range(repeats):
        sync()
        barrier()
        if start_sync is not None:
            start_sync(rep)
        if use_events:
            import torch

            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                counted()
            end.record()
            if watch is not None:
                watch.mark()
            end.synchronize()
            ms = start.elapsed_time(end)
        else:
            t0 = time.perf_counter()
            for _ in range(iters):
                counted()
            ms = (time.perf_counter() - t0) * 1e3
        per_step.append(ms / iters)
    sync()
    if allgather is not None:
        everyone = allgather(per_step)
        per_step = [max(vals) for vals in zip(*everyone)]
    return per_step


def host_us_per_call(
    step: Callable[[], None],
    *,
    calls: int,
    barrier: Callable[[], None],
    use_events: bool,
    busy_ms_per_call: float = 1.0,
    progress: Progress | None = None,
    watch: DeviceWatch | None = None,
) -> list[float]:
    """Host microseconds of each of `calls` calls of `step`, with the device kept busy (a spin queued first,
    long enough that no launch waits for the device), as a profiler reads a launch's CPU time."""
    sync = (lambda: device_sync(watch)) if use_events else (lambda: None)
    sync()
    barrier()
    if use_events:
        import torch

        if hasattr(torch.cuda, "_sleep"):
            torch.cuda._sleep(int(QUEUE_AHEAD_CYCLES * 2 * busy_ms_per_call * calls))  # ~busy_ms_per_call each
    out: list[float] = []
    for i in range(calls):
        t0 = time.perf_counter()
        step()
        out.append((time.perf_counter() - t0) * 1e6)
        if progress is not None:
            progress.tick(i + 1)  # after the call's clock stopped
        if watch is not None:
            watch.step()  # after the call's clock stopped too
    sync()
    barrier()
    return out


class CapturedStep:
    """`calls` steps captured in one CUDA graph (after the caller's eager warm-up), replayed by calling it. With a
    watch, the eager step's wait is bounded and the watch is paused during the capture (see harness.device_watch)."""

    def __init__(self, step: Callable[[], None], watch: DeviceWatch | None = None, calls: int = 1) -> None:
        import torch

        self.graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            step()  # one more eager step on the capture's stream first, as torch's docs ask
        torch.cuda.current_stream().wait_stream(side)
        device_sync(watch)  # drained here, watched: torch.cuda.graph drains again on entry, with the watch paused
        with watch.paused() if watch is not None else nullcontext():
            with torch.cuda.graph(self.graph):
                for _ in range(calls):
                    step()
        device_sync(watch)

    def __call__(self) -> None:
        self.graph.replay()
