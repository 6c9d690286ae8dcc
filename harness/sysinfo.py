"""What ran where: device, software versions and git commit, for the JSON run log."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

from streamk_pgas.iris_ops.env import gpu_backend, interpreted

REPO_ROOT = Path(__file__).resolve().parent.parent
COMMIT_ENV = "STREAMK_PGAS_COMMIT"  # the commit to record, when the tree has no .git (or a stale one)


def device_info(device: Any = None) -> dict[str, Any]:
    import torch

    backend = gpu_backend()
    if backend == "cpu":
        return {
            "backend": "cpu",
            "name": platform.processor() or platform.machine(),
            "sm_count": os.cpu_count() or 1,
            "interpreter": interpreted(),
        }
    idx = torch.cuda.current_device() if device is None else torch.device(device).index
    props = torch.cuda.get_device_properties(idx)
    return {
        "backend": backend,
        "name": props.name,
        "index": idx,
        "sm_count": props.multi_processor_count,
        "l2_bytes": getattr(props, "L2_cache_size", None),
        "total_memory_bytes": props.total_memory,
        "capability": f"{props.major}.{props.minor}",
        "gcn_arch": getattr(props, "gcnArchName", None),
    }


def _module_version(name: str) -> str | None:
    try:
        mod = __import__(name)
    except Exception:
        return None
    return getattr(mod, "__version__", "unknown")


@lru_cache(maxsize=1)
def software_versions() -> dict[str, Any]:
    import torch
    import triton

    versions: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
        "mpi4py": _module_version("mpi4py"),
        "numpy": _module_version("numpy"),
    }
    try:
        if torch.cuda.is_available() and hasattr(torch.cuda, "nccl"):
            v = torch.cuda.nccl.version()
            versions["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception:
        versions["nccl"] = None
    # Only when MPI is already running (under mpirun): importing mpi4py.MPI initialises MPI, and a
    # process that mpirun did not start becomes an MPI singleton whose Open MPI shared-memory segment
    # (/dev/shm/sm_segment.*, 16 MiB) is never removed.
    mpi = sys.modules.get("mpi4py.MPI")
    try:
        versions["mpi_library"] = mpi.Get_library_version().strip().splitlines()[0] if mpi is not None else None
    except Exception:
        versions["mpi_library"] = None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10, check=False,
        )
        versions["driver"] = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout else None
    except Exception:
        versions["driver"] = None
    return versions


@lru_cache(maxsize=1)
def git_info() -> dict[str, Any]:
    """The commit the code came from. STREAMK_PGAS_COMMIT, when set, wins: a copied tree may carry a stale
    .git whose HEAD is not the code that ran."""

    def run(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10)
        except Exception:
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    given = os.environ.get(COMMIT_ENV)
    if given:
        return {"commit": given, "dirty": None, "commit_source": COMMIT_ENV}
    commit = run("rev-parse", "HEAD")
    status = run("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status) if status is not None else None, "commit_source": "git"}


def nvlink_env() -> dict[str, str]:
    """The NVLink multicast switches, where set; recorded so that a log says how they stood."""
    keys = ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")
    return {k: os.environ[k] for k in keys if k in os.environ}
