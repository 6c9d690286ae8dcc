"""The environment variables iris_ops reads: their names, defaults and valid values, in one place, and
`check()`, which a command-line entry calls before any work so that a bad value ends the run with one
line naming the variable and what is valid (ConfigError; exit code 2 through iris_ops.entry.run_main).

    IRIS_OPS_TIMEOUT_S       seconds any host wait for a peer may last (start-up, barriers, exchanges);
                             default 120, valid [5, 86400] (MIN_TIMEOUT_S: see there); a program with a limit
                             of its own sets that instead (set_host_timeout: benchmark.py's --timeout_s)
    IRIS_OPS_BACKEND         heap backend: auto (default), shm, cuda, hip, symm
    IRIS_OPS_SHM_DIR         folder of the shm backend's heap files: default /dev/shm; must exist, be a
                             folder, and take new files
    IRIS_OPS_ABORT_ON_ERROR  1 (default): an uncaught exception on a rank aborts the MPI job; 0: it does not
    STREAMK_PGAS_SHARE_GPU   1: ranks may share a GPU (a correctness test only); 0 or unset: one rank per GPU
    TRITON_INTERPRET         Triton's own: 1 runs kernels in its interpreter on the CPU; set to 1 when unset and
                             there is no GPU (use_interpreter_without_gpu); 0 or 1 (iris_ops.device reads "1")

Any other IRIS_OPS_* variable is refused by check() (a misspelt name would otherwise be ignored).
The rules read from the environment live here too, each once: `interpreted` (TRITON_INTERPRET), `on_gpu`,
`gpu_backend`. Nothing here imports torch at import time (on_gpu, gpu_backend and use_interpreter_without_gpu
do when called), so the check is fast.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

from streamk_pgas.iris_ops.errors import ConfigError

TIMEOUT_ENV = "IRIS_OPS_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 120.0  # when IRIS_OPS_TIMEOUT_S is not set
# The least IRIS_OPS_TIMEOUT_S that a healthy job survives: the limit also bounds start-up, where every rank
# waits for the slowest to import its libraries and finish MPI_Init (about 2 s on a busy 2-core machine; a
# value of 0.5 stopped healthy jobs there), and each host barrier, where ranks may differ by a first
# kernel compile.
MIN_TIMEOUT_S = 5.0
MAX_TIMEOUT_S = 86400.0

BACKEND_ENV = "IRIS_OPS_BACKEND"
BACKENDS = ("shm", "cuda", "hip", "symm")

SHM_DIR_ENV = "IRIS_OPS_SHM_DIR"
DEFAULT_SHM_DIR = "/dev/shm"

ABORT_ENV = "IRIS_OPS_ABORT_ON_ERROR"
SHARE_GPU_ENV = "STREAMK_PGAS_SHARE_GPU"
INTERPRET_ENV = "TRITON_INTERPRET"

KNOWN = (TIMEOUT_ENV, BACKEND_ENV, SHM_DIR_ENV, ABORT_ENV)  # every IRIS_OPS_* name iris_ops reads


def _timeout_problem(text: str) -> str | None:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if math.isfinite(value) and MIN_TIMEOUT_S <= value <= MAX_TIMEOUT_S:
        return None
    why = (" (less fails healthy jobs: every rank's start-up, imports and MPI_Init, must fit in it)"
           if math.isfinite(value) and 0 < value < MIN_TIMEOUT_S else "")
    return f"must be a number of seconds in [{MIN_TIMEOUT_S:g}, {MAX_TIMEOUT_S:g}], got {text!r}{why}"


# A program's own limit on its host waits (set_host_timeout), in place of IRIS_OPS_TIMEOUT_S: (seconds, its name).
_host_limit: tuple[float, str] | None = None


def set_host_timeout(seconds: float | None, set_by: str = "") -> None:
    """From now on every host wait of this process (start-up, barriers, exchanges) gives up after `seconds`,
    whatever IRIS_OPS_TIMEOUT_S says: for a program with a limit of its own that bounds all of its waits (benchmark.py's
    --timeout_s, named `set_by` in the messages). None: IRIS_OPS_TIMEOUT_S again."""
    global _host_limit
    if seconds is None:
        _host_limit = None
        return
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"set_host_timeout: seconds must be a positive finite number, got {seconds!r}")
    _host_limit = (float(seconds), set_by or "the program's limit")


def timeout_source() -> str:
    """What sets the host waits' limit, as the messages name it: the program's own limit, or IRIS_OPS_TIMEOUT_S."""
    return _host_limit[1] if _host_limit is not None else TIMEOUT_ENV


def launch_timeout() -> float:
    """The limit of the ranks' launch (MPI_Init, torch.distributed's rendezvous): the host waits' limit, but at least
    MIN_TIMEOUT_S, since the ranks reach it after importing their libraries, seconds apart on a busy machine
    (an invalid IRIS_OPS_TIMEOUT_S counts as the default here: the ranks start, then refuse it together)."""
    return max(MIN_TIMEOUT_S, timeout_from_env(fallback=DEFAULT_TIMEOUT_S))


def timeout_from_env(fallback: float | None = None) -> float:
    """The host waits' limit in seconds: the program's own (set_host_timeout) when it set one, else
    IRIS_OPS_TIMEOUT_S (DEFAULT_TIMEOUT_S when unset); for a value outside [MIN_TIMEOUT_S, MAX_TIMEOUT_S], a
    ValueError "IRIS_OPS_TIMEOUT_S: ...", or `fallback` when one is given (start-up uses the default, so that the
    ranks can start and refuse the value together)."""
    if _host_limit is not None:
        return _host_limit[0]
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_TIMEOUT_S
    problem = _timeout_problem(text)
    if problem:
        if fallback is not None:
            return fallback
        raise ValueError(f"{TIMEOUT_ENV}: {problem}")
    return float(text)


def interpreted() -> bool:
    """Kernels run in Triton's interpreter on the CPU: TRITON_INTERPRET is "1" (the project's one reading of the
    variable; check() refuses any value but 0 or 1)."""
    return os.environ.get(INTERPRET_ENV) == "1"


def on_gpu() -> bool:
    """Kernels run on a GPU: not in the interpreter, and torch sees a GPU (torch is imported here, when asked)."""
    if interpreted():
        return False
    import torch

    return torch.cuda.is_available()


def gpu_backend() -> str:
    """'cuda', 'hip' or 'cpu': where kernels run (the interpreter counts as 'cpu')."""
    if not on_gpu():
        return "cpu"
    import torch

    return "hip" if getattr(torch.version, "hip", None) else "cuda"


def use_interpreter_without_gpu() -> None:
    """Set TRITON_INTERPRET=1 when it is unset and torch sees no GPU, so that the kernels run on the CPU in
    Triton's interpreter. Triton reads the variable when a kernel is decorated: iris_ops.device calls this as it
    is imported, before any kernel of the project is made."""
    if INTERPRET_ENV in os.environ:
        return
    try:
        import torch
    except ImportError:
        return
    if not torch.cuda.is_available():
        os.environ[INTERPRET_ENV] = "1"


def backend_from_env() -> str:
    """IRIS_OPS_BACKEND, lower case ("auto" when unset); not checked here (see check)."""
    return (os.environ.get(BACKEND_ENV) or "auto").strip().lower()


def shm_dir() -> Path:
    """IRIS_OPS_SHM_DIR, or /dev/shm; not checked here (see check)."""
    return Path(os.environ.get(SHM_DIR_ENV) or DEFAULT_SHM_DIR)


def abort_on_error() -> bool:
    return os.environ.get(ABORT_ENV, "1").strip() != "0"


def share_gpu() -> bool:
    return os.environ.get(SHARE_GPU_ENV, "").strip() == "1"


def shm_dir_problem(folder: Path) -> str | None:
    """Why the shm backend cannot put its heap files in `folder`, or None (a file is made there and removed)."""
    if not folder.exists():
        return f"{folder} does not exist: give a folder in shared memory (default {DEFAULT_SHM_DIR})"
    if not folder.is_dir():
        return f"{folder} is not a folder: give a folder in shared memory (default {DEFAULT_SHM_DIR})"
    try:
        fd, probe = tempfile.mkstemp(prefix=".iris_ops_check_", dir=folder)
    except OSError as exc:
        return f"no file can be made in {folder} ({exc.strerror}): give a writable folder"
    os.close(fd)
    os.unlink(probe)
    return None


def check(backend: str | None = None) -> None:
    """Raise ConfigError for the first variable with a bad value: an unknown IRIS_OPS_* name, a timeout out of
    range, an unknown backend, a shm folder that cannot take files, a flag that is not 0 or 1. `backend`: the
    heap backend the run will use, when known (its default shm folder is then checked too; a set
    IRIS_OPS_SHM_DIR is always checked)."""
    for name in sorted(os.environ):
        if name.startswith("IRIS_OPS_") and name not in KNOWN:
            raise ConfigError(name, f"unknown variable; iris_ops reads {', '.join(KNOWN)}")
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if text:
        problem = _timeout_problem(text)
        if problem:
            raise ConfigError(TIMEOUT_ENV, problem)
    name = backend_from_env()
    if name not in ("auto", *BACKENDS):
        raise ConfigError(BACKEND_ENV, f"must be one of auto, {', '.join(BACKENDS)}; got {os.environ[BACKEND_ENV]!r}")
    if os.environ.get(SHM_DIR_ENV) is not None or (backend or name) == "shm":
        if os.environ.get(SHM_DIR_ENV) == "":
            raise ConfigError(SHM_DIR_ENV, "is empty: give a folder in shared memory, or unset it for "
                              f"{DEFAULT_SHM_DIR}")
        problem = shm_dir_problem(shm_dir())
        if problem:
            raise ConfigError(SHM_DIR_ENV, problem)
    for flag in (ABORT_ENV, SHARE_GPU_ENV, INTERPRET_ENV):  # TRITON_INTERPRET: iris_ops.device reads "1" only
        flag_from_env(flag, False)


def flag_from_env(name: str, default: bool) -> bool:
    """A variable that is 0 or 1 (the project's switches): its value, `default` when unset or empty; a
    ConfigError naming it for any other value."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    if text not in ("0", "1"):
        raise ConfigError(name, f"must be 0 or 1, got {os.environ[name]!r}")
    return text == "1"
