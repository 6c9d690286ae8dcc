"""The host side of a step's collective error state: error words on the symmetric heap.

A kernel whose wait gives up calls `record_error_all(words, kind, tile, cur_rank, heap_bases, world_size)`
(iris_ops.device), which writes the error into every rank's words; the waits `wait_or_error` and
`wait_local_or_error` give up at once on a rank whose word is set. This module reads the words:

    state = ErrorState(shmem)          # allocates ERROR_WORDS int32 on the heap (every rank, same order)
    kernel[grid](..., ERRORS=state.words, heap_bases=shmem.get_heap_bases(), ...)
    state.peek()                       # between back-to-back steps: never waits (see below)
    state.check(shmem)                 # after a step: meet every rank, then raise CollectiveError if any failed
    state.reset(shmem)                 # every rank together: clear the words before steps start again

Contract: the words must lie on the symmetric heap at the same offset on every rank (allocate them with
the heap's own zeros/empty, in the same allocation order on every rank; `ErrorState(shmem)` does),
because peers write them through pointer translation.

`check(shmem)` is collective: it drains this rank's device work and meets every rank (a bounded host
barrier) before it reads, so every rank's kernels have finished and every record has landed: either
every rank raises or none does. `check()` without the heap reads this rank's words only (after draining
its device work): a peer that gives up later is not seen.

`peek()` is the cheap test between steps: it never waits for the device or for peers. On the CPU it
reads the word; on a GPU it returns what the last finished copy of the words (on a side stream, into
pinned memory, concurrent with running kernels) held, and starts the next copy, so it lags by one call.
Do not call it while the current stream is being captured into a CUDA graph.

Between back-to-back steps, where a peer may hang (stopped, or dead without its launcher noticing):

    for i in range(iters):
        op(a, b)                       # the step's kernels pass state.words as their error words
        if state.peek():               # some rank gave up: do not launch more
            state.check()              # raises CollectiveError here, without meeting the (maybe hung) peers
    state.check(shmem)                 # after the loop: every rank decides alike

Every rank's word is set by the rank that gave up, so every live rank stops within about one wait timeout
of the failure (queued steps drain at once: their waits see the word), and run_main's abort ends the job.
"""

from __future__ import annotations

from typing import Any

import torch

from streamk_pgas.iris_ops.device import ERROR_WORDS, decode_error


class CollectiveError(RuntimeError):
    """A wait gave up on some rank: this rank's output of the step (and of any step since) is not to be trusted."""

    def __init__(self, rank: int, code: int, origin: int | None, timeout_s: float | None = None) -> None:
        by = f"rank {origin}" if origin is not None else "a rank"
        after = f" after ~{timeout_s:g} s" if timeout_s is not None else ""
        super().__init__(f"rank {rank}: {by} gave up{after}: {decode_error(code)}; no rank's output of this step "
                         "can be trusted")
        self.rank = rank
        self.code = code
        self.origin = origin


def describe(words: list[int]) -> tuple[int, int | None]:
    """(code, origin rank or None) of the words' values."""
    code = int(words[0])
    origin = int(words[1]) - 1 if len(words) > 1 and int(words[1]) > 0 else None
    return code, origin


class ErrorState:
    """ERROR_WORDS int32 words on the symmetric heap: this rank's copy of the step's collective error state."""

    def __init__(self, shmem: Any, words: torch.Tensor | None = None) -> None:
        """Allocate the words on `shmem` (every rank must do so in the same allocation order), or adopt
        `words`, an int32 tensor of at least ERROR_WORDS elements already on that heap."""
        if words is None:
            words = shmem.zeros(ERROR_WORDS, dtype=torch.int32)
        if words.dtype != torch.int32 or words.numel() < ERROR_WORDS or not words.is_contiguous():
            raise ValueError(f"ErrorState: words must be a contiguous int32 tensor of at least {ERROR_WORDS} "
                             f"elements; got {words.dtype} x {words.numel()}")
        shmem.require_on_heap(words, "ErrorState words")
        self.words = words
        self.rank: int = shmem.get_rank()
        self._on_gpu = words.device.type == "cuda"
        self._host: torch.Tensor | None = None
        self._stream: Any = None
        self._event: Any = None
        self._last = [0] * ERROR_WORDS

    # -- reading ---------------------------------------------------------------------------------------------
    def _read(self) -> list[int]:
        """The words now (waits for this rank's device work on the current stream)."""
        return [int(v) for v in self.words[:ERROR_WORDS].tolist()]

    def peek(self) -> int:
        """The error code seen without waiting (0: none seen yet). See the module's note on the lag on a GPU."""
        if not self._on_gpu:
            self._last = self._read()
            return self._last[0]
        if self._host is None:
            self._host = torch.zeros(ERROR_WORDS, dtype=torch.int32, pin_memory=True)
            self._stream = torch.cuda.Stream(device=self.words.device)
            self._event = torch.cuda.Event()
        elif self._event.query():
            self._last = [int(v) for v in self._host.tolist()]
        else:
            return self._last[0]  # the previous copy is still in flight
        with torch.cuda.stream(self._stream):
            self._host.copy_(self.words[:ERROR_WORDS], non_blocking=True)
            self._event.record(self._stream)
        return self._last[0]

    def failed(self) -> tuple[int, int | None]:
        """(code, origin) of this rank's words now, after its device work (0 code: no error)."""
        return describe(self._read())

    def check(self, shmem: Any = None, timeout_s: float | None = None) -> None:
        """Raise CollectiveError if a wait gave up. With `shmem`, first drain this rank's device work and meet
        every rank (bounded by IRIS_OPS_TIMEOUT_S), so every rank decides alike. `timeout_s`, when given, is
        the wait's limit, named in the message. The words stay set until reset()."""
        code, origin = self.failed()
        if shmem is not None:
            try:
                shmem.barrier()
            except TimeoutError:  # a peer hangs: what this rank already knows is the better message
                if code:
                    raise CollectiveError(self.rank, code, origin, timeout_s) from None
                raise
            code, origin = self.failed()
        if code:
            raise CollectiveError(self.rank, code, origin, timeout_s)

    def reset(self, shmem: Any) -> None:
        """Clear the words on every rank: all ranks call it together, with no kernel of theirs running
        (it meets every rank before and after clearing, so no peer's late record is lost or left)."""
        shmem.barrier()
        self.clear()
        shmem.barrier()

    def clear(self) -> None:
        """Clear this rank's words and what peek remembers, with no barrier: for a caller that clears its
        other step buffers between barriers of its own (as reset does)."""
        if self._event is not None:
            self._event.synchronize()  # a copy still in flight would bring the old value back
            self._host.zero_()
        self.words[:ERROR_WORDS].zero_()
        self._last = [0] * ERROR_WORDS
