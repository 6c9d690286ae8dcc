"""The README's quick-start launch lines and its op snippet, taken from README.md (so they cannot drift) and run as
written from an empty folder, as root and as a user: as root where the tests run as root, as a user in a user
namespace (`unshare --user`: the same files, but Open MPI and the launcher see a uid that is not 0), or as this user
where the tests do not run as root (the root case is then skipped)."""

from __future__ import annotations

import functools
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO_ROOT, leftovers, shm_env

README = (REPO_ROOT / "README.md").read_text()
BIN = Path(sys.executable).parent  # streamk-pgas, torchrun and mpirun of this install


def code_block(after: str) -> list[str]:
    """The lines of the first indented code block that follows the README line containing `after`."""
    lines = README.splitlines()
    start = next(i for i, line in enumerate(lines) if after in line)
    block: list[str] = []
    for line in lines[start + 1:]:
        if line.startswith("    "):
            block.append(line[4:])
        elif block and line.strip():
            break
    return block


def launch_lines() -> list[str]:
    """The package block of the quick start: its commands without their comments (the install is this test run's)."""
    commands = [line.split("  #")[0].strip() for line in code_block("Installed as a package instead")]
    return [c for c in commands if c and not c.startswith("pip install")]


@functools.cache
def user_namespace() -> bool:
    try:
        return subprocess.run(["unshare", "--user", "--map-user=1000", "--map-group=1000", "true"],
                              capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def as_who(who: str, cmd: list[str]) -> list[str]:
    """`cmd` run as root or as a user, or a skip where this machine cannot."""
    root = os.geteuid() == 0
    if who == "root":
        if not root:
            pytest.skip("the tests do not run as root")
        return cmd
    if not root:
        return cmd
    if not user_namespace():
        pytest.skip("no user namespace (unshare --user) to run as a user")
    return ["unshare", "--user", "--map-user=1000", "--map-group=1000", *cmd]


def run_both(cmd: list[str], folder: Path, timeout: float = 300,
             whos: tuple[str, ...] = ("root", "user")) -> dict[str, tuple[int, str]]:
    """`cmd` as root and as a user at once (each in a folder of its own under `folder`): {who: (code, output)}."""
    procs = {}
    for who in whos:
        try:
            full = as_who(who, cmd)
        except pytest.skip.Exception:
            continue
        cwd = folder / who
        cwd.mkdir()
        env = {**os.environ, **shm_env(cwd / "shm"), "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
               "OMP_NUM_THREADS": "1"}
        env.pop("TRITON_INTERPRET", None)  # as a new user's shell: the project chooses the interpreter itself
        procs[who] = subprocess.Popen(full, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True)
    if not procs:
        pytest.skip("neither as root nor as a user on this machine")
    out = {}
    for who, proc in procs.items():
        try:
            text, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            text, _ = proc.communicate()
        out[who] = (proc.returncode, text)
        assert leftovers(folder / who / "shm") == [], f"{who}: left in shared memory"
    return out


def test_the_readme_has_the_lines_this_file_runs() -> None:
    assert launch_lines() == ["streamk-pgas quickstart", "streamk-pgas bench --help",
                              "streamk-pgas bench --nproc 2 --algorithm all_reduce --validate"]
    assert "torchrun --nproc-per-node 2 layer.py" in README


@pytest.mark.parametrize("line", launch_lines())
def test_launch_line_runs_as_written(line: str, tmp_path: Path) -> None:
    for who, (code, out) in run_both(shlex.split(line), tmp_path).items():
        assert code == 0, f"{line} as {who} exited {code}:\n{out[-4000:]}"
        if "--help" in line:
            assert out.startswith("usage:"), out[-2000:]
        else:
            assert out.rstrip().splitlines()[-1].startswith("PASS: 1 of 1 run(s) validated on every rank"), out[-3000:]
            assert "warning" not in out.lower() and "lose updates" not in out, out[-3000:]


# What the test adds after the snippet: every rank checks C against a float64 product of every rank's shards.
CHECK = """
import sys

if torch.cuda.is_available():
    torch.cuda.synchronize()
shards = get_bootstrap().allgather((a_shard.double().cpu(), b_shard.double().cpu()))
want = sum(a @ b for a, b in shards)
err = float(torch.linalg.norm(c.double().cpu() - want) / torch.linalg.norm(want))
assert err < 2e-2, f"relative error {err}"
sys.stdout.write(f"SNIPPET_OK rank {get_bootstrap().rank} error {err:.2e}\\n")  # one write: ranks share the stream
sys.stdout.flush()
"""


def test_op_snippet_runs_as_written(tmp_path: Path) -> None:
    snippet = "\n".join(code_block("## The op from a torch program"))
    script = tmp_path / "layer.py"
    script.write_text(snippet + "\n" + CHECK)
    ran = False
    for who in ("root", "user"):  # one after the other: as a user only once it runs (an expected failure costs one)
        try:
            runs = run_both(["torchrun", "--nproc-per-node", "2", str(script)], tmp_path, whos=(who,))
        except pytest.skip.Exception:
            continue
        for name, (code, out) in runs.items():
            ran = True
            assert code == 0, f"the snippet as {name} exited {code}:\n{out[-4000:]}"
            assert len(re.findall(r"SNIPPET_OK rank \d", out)) == 2, out[-3000:]
    if not ran:
        pytest.skip("neither as root nor as a user on this machine")
