"""The errors iris_ops raises for a bad setting and for a heap that cannot be had, both found before any
work and both meant to end a command-line run with one line and exit code 2 (iris_ops.entry.run_main).

ConfigError has the shape of the project's flag errors: `flag` names the flag or environment variable,
`message` says what is valid; str() is "flag: message". A layer above may raise it for its own flags."""

from __future__ import annotations


class ConfigError(ValueError):
    """A flag or environment variable with a bad value: `flag` names it, the message says what is valid."""

    def __init__(self, flag: str, message: str) -> None:
        super().__init__(f"{flag}: {message}")
        self.flag = flag
        self.message = message


class HeapReserveError(MemoryError):
    """The symmetric heap could not be reserved (on some rank): one line with the bytes asked for, the bytes
    free and where. Raised on every rank of the world, after no rank keeps a heap."""
