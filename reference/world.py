"""The reference's process group: who we are, which device, and a host-side barrier and allgather.

Under `mpirun`, ranks come from the OMPI_COMM_WORLD_* environment; rank 0 opens a TCPStore on a
free port (port 0: the OS picks one, so there is no race between choosing and binding) and
broadcasts address and port with mpi4py; MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE/LOCAL_RANK are
set for anything that reads them. Under `torchrun`, its env:// rendezvous is used. A plain
`python` is a world of one.

The device group is NCCL on NVIDIA, RCCL on AMD (torch calls both "nccl") and gloo on the CPU.
Barrier and allgather of timings go through a separate gloo group, so they never put work on the
GPU. Every wait is bounded by --timeout_s: a rank that dies turns into an error, not a hang. Host waits give up on
their own (gloo's and the store's timeouts, a watchdog around MPI start-up); NCCL and torch symmetric-memory kernels
have no timeout on the device, so on a GPU the world's `watch` (harness.device_watch) ends a rank whose device makes
no progress for --timeout_s, with one line.
"""

from __future__ import annotations

import datetime
import os
import socket
import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from streamk_pgas.harness.device_watch import DeviceWatch, cuda_watch, exit_on_stall
from streamk_pgas.iris_ops.bootstrap import startup_failure


@dataclass(frozen=True)
class Placement:
    """What the launcher told this process, read from the environment only."""

    rank: int
    world_size: int
    local_rank: int
    local_size: int
    launcher: str  # "mpirun", "torchrun" or "single"


def placement_from_env() -> Placement:
    env = os.environ
    if "OMPI_COMM_WORLD_SIZE" in env:
        return Placement(
            rank=int(env["OMPI_COMM_WORLD_RANK"]),
            world_size=int(env["OMPI_COMM_WORLD_SIZE"]),
            local_rank=int(env.get("OMPI_COMM_WORLD_LOCAL_RANK", env["OMPI_COMM_WORLD_RANK"])),
            local_size=int(env.get("OMPI_COMM_WORLD_LOCAL_SIZE", env["OMPI_COMM_WORLD_SIZE"])),
            launcher="mpirun",
        )
    if "RANK" in env and "WORLD_SIZE" in env:
        return Placement(
            rank=int(env["RANK"]),
            world_size=int(env["WORLD_SIZE"]),
            local_rank=int(env.get("LOCAL_RANK", env["RANK"])),
            local_size=int(env.get("LOCAL_WORLD_SIZE", env["WORLD_SIZE"])),
            launcher="torchrun",
        )
    return Placement(0, 1, 0, 1, "single")


@dataclass
class World:
    """An initialised world: the device, its process group, and a host (gloo) group."""

    placement: Placement
    device: torch.device
    backend: str  # torch backend name of the device group: "nccl" or "gloo"
    comm_library: str  # "nccl", "rccl" or "gloo"
    host_group: Any
    watch: DeviceWatch | None = None  # bounds the waits for the GPU (None on the CPU, where gloo waits on the host)

    @property
    def rank(self) -> int:
        return self.placement.rank

    @property
    def world_size(self) -> int:
        return self.placement.world_size

    @property
    def group(self) -> Any:
        return dist.group.WORLD

    def barrier(self) -> None:
        """All ranks meet on the host (gloo); no GPU work is queued."""
        dist.barrier(group=self.host_group)

    def allgather(self, obj: Any) -> list[Any]:
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj, group=self.host_group)
        return out

    def agree(self, problem: str | None) -> str | None:
        """Every rank's problem (None: fine); the first one any rank had, so all ranks decide alike."""
        problems = [p for p in self.allgather(problem) if p]
        return problems[0] if problems else None

    def close(self) -> None:
        if self.watch is not None:
            self.watch.stop()
        if dist.is_initialized():
            dist.destroy_process_group()


def pick_device(requested: str, local_rank: int) -> torch.device:
    if requested == "cpu" or (requested == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise RuntimeError("--device cuda: torch sees no GPU")
    index = local_rank % torch.cuda.device_count()
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


def _mpi_store(p: Placement, timeout: datetime.timedelta) -> Any:
    """Rank 0 binds a TCPStore on a free port; the address and port reach the others through mpi4py."""
    from streamk_pgas.iris_ops.bootstrap import startup_watchdog

    # MPI_Init waits for every rank (holding the GIL): a rank that never starts is bounded by a watchdog.
    with startup_watchdog(timeout.total_seconds(), "MPI start-up", rank=p.rank, limit_set_by="--timeout_s"):
        from mpi4py import MPI

    comm = MPI.COMM_WORLD
    store = None
    info = None
    if p.rank == 0:
        same_host = p.local_size == p.world_size
        addr = "127.0.0.1" if same_host else socket.gethostbyname(socket.gethostname())
        store = dist.TCPStore(addr, 0, p.world_size, is_master=True, timeout=timeout, wait_for_workers=False)
        info = (addr, store.port)
    # A bounded wait first: if a rank died before getting here, fail instead of blocking in bcast.
    req = comm.Ibarrier()
    deadline = time.monotonic() + timeout.total_seconds()
    while not req.Test():
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank {p.rank}: not all {p.world_size} ranks arrived within "
                               f"{timeout.total_seconds():.0f} s (--timeout_s)")
        time.sleep(1e-3)
    addr, port = comm.bcast(info, root=0)
    os.environ.update(MASTER_ADDR=addr, MASTER_PORT=str(port), RANK=str(p.rank),
                      WORLD_SIZE=str(p.world_size), LOCAL_RANK=str(p.local_rank),
                      LOCAL_WORLD_SIZE=str(p.local_size))
    if store is None:
        store = dist.TCPStore(addr, port, p.world_size, is_master=False, timeout=timeout)
    return store


def _have_mpi4py() -> bool:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def init_world(requested_device: str, timeout_s: float, prog: str = "python -m reference") -> World:
    """Start the process groups. Device group: NCCL/RCCL on a GPU, gloo on the CPU. On a GPU, a started watch
    whose one line on a stall begins with `prog`."""
    p = placement_from_env()
    device = pick_device(requested_device, p.local_rank)
    backend = "nccl" if device.type == "cuda" else "gloo"
    comm_library = "gloo" if backend == "gloo" else ("rccl" if getattr(torch.version, "hip", None) else "nccl")
    timeout = datetime.timedelta(seconds=timeout_s)
    kwargs: dict[str, Any] = {"backend": backend, "timeout": timeout}
    if backend == "nccl":
        kwargs["device_id"] = device  # eager communicator creation, bound to this GPU
    if p.launcher == "mpirun" and not _have_mpi4py() and "MASTER_PORT" in os.environ:
        # No mpi4py to share a port: fall back to a MASTER_ADDR/MASTER_PORT the user exported.
        os.environ.update(RANK=str(p.rank), WORLD_SIZE=str(p.world_size), LOCAL_RANK=str(p.local_rank))
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        kwargs.update(init_method="env://", rank=p.rank, world_size=p.world_size)
    elif p.launcher == "mpirun":
        kwargs.update(store=_mpi_store(p, timeout), rank=p.rank, world_size=p.world_size)
    elif p.launcher == "single":
        store = dist.TCPStore("127.0.0.1", 0, 1, is_master=True, timeout=timeout, wait_for_workers=False)
        kwargs.update(store=store, rank=0, world_size=1)
    else:
        kwargs["init_method"] = "env://"
    try:
        dist.init_process_group(**kwargs)
    except (RuntimeError, TimeoutError, ValueError) as exc:  # torch's DistError family: a store time-out, a refusal
        raise TimeoutError(startup_failure(p.rank, "torch.distributed start-up", timeout_s, exc, "--timeout_s")
                           ) from None
    host_group = dist.group.WORLD if backend == "gloo" else dist.new_group(backend="gloo", timeout=timeout)
    watch = cuda_watch(device, timeout_s, exit_on_stall(prog, p.rank)) if device.type == "cuda" else None
    return World(placement=p, device=device, backend=backend, comm_library=comm_library, host_group=host_group,
                 watch=watch)
