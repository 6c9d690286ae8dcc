"""The target of a live torch device (spec.Target), read from torch once: the one place that asks torch what the
device is. A problem may also be planned and built for a target that is not this machine's (spec.KNOWN_TARGETS)."""

from __future__ import annotations

from typing import Any

from streamk_pgas.iris_ops.env import on_gpu
from streamk_pgas.spec import INTERPRETER, Target, target_from_properties


def device_target(device: Any = None) -> Target:
    """The target of a torch.device (default: the current GPU); the interpreter for the CPU or with
    TRITON_INTERPRET=1."""
    import torch

    if not on_gpu():
        return INTERPRETER
    dev = torch.device(device) if device is not None else torch.device("cuda", torch.cuda.current_device())
    if dev.type != "cuda":
        return INTERPRETER
    props = torch.cuda.get_device_properties(dev)
    shared = getattr(props, "shared_memory_per_block_optin", None) or 227 * 1024
    return target_from_properties(props.name, hip=bool(getattr(torch.version, "hip", None)), major=props.major,
                                  minor=props.minor, gcn_arch=str(getattr(props, "gcnArchName", "")),
                                  sms=props.multi_processor_count, shared_mem=int(shared),
                                  memory=int(props.total_memory))
