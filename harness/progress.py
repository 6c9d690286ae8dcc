"""Progress lines for long runs: "<label>: 120/300 (40%), 12 s" on stderr, at most one every few seconds.

Only rank 0 prints, between steps, and only once ~10 s have passed since its last line: between the launches of a
timed back-to-back loop the check costs the host well under a microsecond, and no loop on a GPU lasts 10 s (the
interpreter's loops do, and report there). Phases that share a LastLine count from the last line of any of them,
so a run of several short phases still prints every ~10 s. `--quiet` turns it off.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field


@dataclass
class LastLine:
    """When the last progress line of a run was printed (time.monotonic())."""

    at: float = field(default_factory=lambda: time.monotonic())


class Progress:
    def __init__(self, label: str, total: int, *, enabled: bool = True, every_s: float = 10.0,
                 last_line: LastLine | None = None) -> None:
        self.label = label
        self.total = total
        self.enabled = enabled and total > 0
        self.every_s = every_s
        self.start = time.monotonic()
        self.last_line = last_line if last_line is not None else LastLine(self.start)

    def tick(self, done: int) -> None:
        """Report `done` of `total` if enough time has passed since the last line (or the start)."""
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.last_line.at < self.every_s:
            return
        self.last_line.at = now
        print(f"{self.label}: {done}/{self.total} ({100 * done // self.total}%), {now - self.start:.0f} s",
              file=sys.stderr, flush=True)
