"""iris_ops.env.check: every IRIS_OPS_* variable (and STREAMK_PGAS_SHARE_GPU, which iris_ops reads) is
checked before any work; a bad value is one ConfigError line naming the variable and what is valid."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streamk_pgas.iris_ops import env
from streamk_pgas.iris_ops.errors import ConfigError


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("IRIS_OPS_") or name == env.SHARE_GPU_ENV:
            monkeypatch.delenv(name)


def _refusal(monkeypatch: pytest.MonkeyPatch, name: str, value: str, backend: str | None = None) -> ConfigError:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as info:
        env.check(backend)
    assert info.value.flag == name
    assert str(info.value).startswith(f"{name}: ") and "\n" not in str(info.value)
    return info.value


def test_unset_and_good_values_pass(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    env.check()
    env.check("shm")  # the default folder
    for name, value in ((env.TIMEOUT_ENV, "5"), (env.TIMEOUT_ENV, " 120 "), (env.TIMEOUT_ENV, "86400"),
                        (env.BACKEND_ENV, "SHM"), (env.BACKEND_ENV, "auto"), (env.SHM_DIR_ENV, str(tmp_path)),
                        (env.ABORT_ENV, "0"), (env.SHARE_GPU_ENV, "1")):
        monkeypatch.setenv(name, value)
        env.check("shm")
    assert list(tmp_path.iterdir()) == []  # the writability probe is gone


@pytest.mark.parametrize("value", ["abc", "", "nan", "inf", "-1", "0", "0.5", "4.9", "86401", "1e9"])
def test_timeout_out_of_range(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    if value == "":
        monkeypatch.setenv(env.TIMEOUT_ENV, value)
        env.check()  # empty means unset: the default
        return
    err = _refusal(monkeypatch, env.TIMEOUT_ENV, value)
    assert "[5, 86400]" in err.message and repr(value) in err.message
    with pytest.raises(ValueError, match=f"^{env.TIMEOUT_ENV}: "):
        env.timeout_from_env()
    assert env.timeout_from_env(fallback=env.DEFAULT_TIMEOUT_S) == env.DEFAULT_TIMEOUT_S


def test_a_small_timeout_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    err = _refusal(monkeypatch, env.TIMEOUT_ENV, "0.5")
    assert "start-up" in err.message and "MPI_Init" in err.message


@pytest.mark.parametrize(("value", "words"), [
    ("/nonexistent", "/nonexistent does not exist"),
    ("/etc/hostname", "/etc/hostname is not a folder"),
    ("", "is empty"),
])
def test_shm_dir(monkeypatch: pytest.MonkeyPatch, value: str, words: str) -> None:
    assert words in str(_refusal(monkeypatch, env.SHM_DIR_ENV, value))


def test_shm_dir_that_takes_no_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(env.tempfile, "mkstemp", refuse)
    err = _refusal(monkeypatch, env.SHM_DIR_ENV, str(tmp_path))
    assert "no file can be made" in err.message and "Permission denied" in err.message


def test_default_shm_dir_is_checked_for_the_shm_backend_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(env, "DEFAULT_SHM_DIR", "/nonexistent_default")
    env.check("cuda")
    with pytest.raises(ConfigError, match=f"^{env.SHM_DIR_ENV}: /nonexistent_default does not exist"):
        env.check("shm")


@pytest.mark.parametrize(("name", "value", "words"), [
    (env.BACKEND_ENV, "gpu", "must be one of auto, shm, cuda, hip, symm; got 'gpu'"),
    (env.ABORT_ENV, "yes", "must be 0 or 1, got 'yes'"),
    (env.SHARE_GPU_ENV, "2", "must be 0 or 1, got '2'"),
    ("IRIS_OPS_TIMEOUT", "5", "unknown variable; iris_ops reads IRIS_OPS_TIMEOUT_S"),
])
def test_other_variables(monkeypatch: pytest.MonkeyPatch, name: str, value: str, words: str) -> None:
    assert words in str(_refusal(monkeypatch, name, value))


def test_a_programs_own_limit_takes_the_place_of_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """set_host_timeout: every host wait's limit and the name its messages give, until unset; the launch waits at
    least MIN_TIMEOUT_S; a grace allowed once (a first compile) is added to the next wait only."""
    from streamk_pgas.iris_ops.bootstrap import Bootstrap

    monkeypatch.setenv(env.TIMEOUT_ENV, "60")
    try:
        env.set_host_timeout(2.0, "--timeout_s")
        assert (env.timeout_from_env(), env.timeout_source(), env.launch_timeout()) == (2.0, "--timeout_s", 5.0)
        boot = Bootstrap()
        boot.allow_grace(40.0)
        assert boot._limit(None) == 42.0 and boot._limit(None) == 2.0 and boot._limit(3.0) == 3.0
        with pytest.raises(ValueError, match="positive finite"):
            env.set_host_timeout(float("nan"))
    finally:
        env.set_host_timeout(None)
    assert (env.timeout_from_env(), env.timeout_source()) == (60.0, env.TIMEOUT_ENV)
