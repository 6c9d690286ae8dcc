"""A bounded wait for device work that has no timeout of its own (cuBLAS, NCCL, torch symmetric memory): a collective
whose peer stopped spins on the device forever, and the host waits with it, in a synchronize or in a launch once the
launch queue is full.

The waiting code marks its stream now and then: `mark` records an event on the current stream, `step` marks every
`every`-th call (cheap enough inside a timed loop: one event record per `every` steps, no synchronize). A daemon
thread polls the marks (`query`, which does not block) and, when marks are outstanding and none has completed for
`timeout_s`, calls `on_stall` with the seconds without progress (the entry's: one line, then the process ends, since
a main thread blocked in the CUDA runtime cannot raise). The clock runs from the later of the last completed mark
and the oldest outstanding mark's recording, so an idle device or a host busy elsewhere never counts.

A CUDA graph captured in global mode forbids an event query from any thread: `paused` keeps the thread off the
events for the capture's duration, and that time does not count.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

from streamk_pgas.iris_ops.entry import EXIT_FAILED

EVERY = 8  # steps of a loop between two marks
POLL_S = 0.1  # the longest pause between two polls (shorter for a short timeout_s)


class DeviceWatch:
    """Marks on the device's stream and a thread that ends the wait when they stop completing (see the module).
    `new_event()` makes an object with `record()` (on the current stream) and `query()` (True once the device has
    passed it); `setup` runs first on the thread (e.g. to make the rank's GPU current there)."""

    def __init__(self, timeout_s: float, on_stall: Callable[[float], None], new_event: Callable[[], Any], *,
                 every: int = EVERY, poll_s: float | None = None, clock: Callable[[], float] = time.monotonic,
                 setup: Callable[[], None] | None = None) -> None:
        self.timeout_s = timeout_s
        self.every = every
        self.poll_s = poll_s if poll_s is not None else min(POLL_S, timeout_s / 10)
        self._on_stall = on_stall
        self._new_event = new_event
        self._clock = clock
        self._setup = setup
        self._pending: deque[tuple[Any, float]] = deque()  # (event, when recorded), oldest first
        self._free: deque[Any] = deque()  # events seen complete, recorded again by later marks
        self._last_done = clock()  # when a mark last completed, or watching resumed after a pause
        self._count = 0
        self._lock = threading.Lock()  # held by each poll, and by `paused` for its whole block
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def mark(self) -> None:
        """Record an event on the current stream: the device's progress past this point."""
        try:
            event = self._free.popleft()
        except IndexError:
            event = self._new_event()
        event.record()
        self._pending.append((event, self._clock()))

    def step(self) -> None:
        """One step of a loop: a mark every `every` steps."""
        self._count += 1
        if self._count >= self.every:
            self._count = 0
            self.mark()

    def stalled_for(self, now: float) -> float | None:
        """Forget the completed marks; the seconds without progress if marks are outstanding and none has completed
        for timeout_s, else None."""
        while self._pending and self._pending[0][0].query():
            self._free.append(self._pending.popleft()[0])
            self._last_done = now
        if not self._pending:
            return None
        quiet = now - max(self._last_done, self._pending[0][1])
        return quiet if quiet >= self.timeout_s else None

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No polls during the block (a graph capture); its time does not count as time without progress."""
        with self._lock:
            try:
                yield
            finally:
                self._last_done = self._clock()

    def start(self) -> DeviceWatch:
        self._thread = threading.Thread(target=self._run, name="device-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=max(1.0, 10 * self.poll_s))

    def _run(self) -> None:
        if self._setup is not None:
            self._setup()
        while not self._stopping.wait(self.poll_s):
            with self._lock:
                try:
                    quiet = self.stalled_for(self._clock())
                except Exception:  # a device error: the waiting code gets it from its own next call, and ends
                    continue
            if quiet is not None:
                self._on_stall(quiet)
                return


def stall_line(prog: str, rank: int, quiet_s: float) -> str:
    """The one line of a rank whose device made no progress (the entry's `prog: rank R: Type: text` form)."""
    return (f"{prog}: rank {rank}: TimeoutError: no progress on the device for {quiet_s:.1f} s: a peer stopped or "
            f"died, or never joined a collective (--timeout_s sets the limit); stopping this rank")


def exit_on_stall(prog: str, rank: int) -> Callable[[float], None]:
    """An on_stall that prints `stall_line` on stderr in one write and ends the process with exit code 1 at once:
    the main thread is blocked on the device and cannot raise, and an exit handler would wait for it; the launcher
    stops the other ranks."""

    def stall(quiet_s: float) -> None:
        with suppress(Exception):
            sys.stdout.flush()
        with suppress(Exception):
            os.write(2, (stall_line(prog, rank, quiet_s) + "\n").encode())
        os._exit(EXIT_FAILED)

    return stall


def cuda_watch(device: Any, timeout_s: float, on_stall: Callable[[float], None]) -> DeviceWatch:
    """A started watch of `device` (a torch CUDA device): marks are torch events without timing (the cheapest)."""
    import torch

    index = device.index if device.index is not None else torch.cuda.current_device()
    # The thread makes the rank's GPU current first: a query from a thread on device 0 would make a context there.
    return DeviceWatch(timeout_s, on_stall, torch.cuda.Event, setup=lambda: torch.cuda.set_device(index)).start()
