"""Small host-side guards: kernel launches name exactly the kernel's arguments (Triton's interpreter
ignores an unknown keyword that a compiled launch refuses), and the run log's commit."""

from __future__ import annotations

import pytest

from streamk_pgas.harness import sysinfo
from streamk_pgas.overlap.kernels import comm_kernel
from streamk_pgas.stream_k.launch import check_arguments as _check_arguments


def test_launch_arguments_must_match_the_kernel() -> None:
    args = {name: None for name in comm_kernel.arg_names}
    _check_arguments(comm_kernel, args)  # exactly the kernel's arguments: fine
    with pytest.raises(TypeError, match=r"unknown arguments \['epoch'\]"):
        _check_arguments(comm_kernel, {**args, "epoch": 1})
    del args["MOVE"]
    with pytest.raises(TypeError, match=r"missing \['MOVE'\]"):
        _check_arguments(comm_kernel, args)


def test_commit_given_in_the_environment_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    """A copied tree can carry a stale .git: the commit passed in wins."""
    sysinfo.git_info.cache_clear()
    monkeypatch.setenv("STREAMK_PGAS_COMMIT", "0123abc")
    try:
        info = sysinfo.git_info()
        assert info == {"commit": "0123abc", "dirty": None, "commit_source": "STREAMK_PGAS_COMMIT"}
    finally:
        sysinfo.git_info.cache_clear()
    monkeypatch.delenv("STREAMK_PGAS_COMMIT")
    assert sysinfo.git_info()["commit_source"] == "git"
    sysinfo.git_info.cache_clear()
