"""`./dev`: the process it starts is the one doing the work, and it syncs only when needed.

A `kill -9` of `./dev` used to kill `uv run`, orphaning the Python child, which went on
working (and writing). Now `./dev` execs the environment's entry point itself.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from eval_pipeline import paths

DEV = paths.PROJECT_ROOT / "dev"


def _processes_with(marker: str) -> list[int]:
    """Pids of live processes whose command line holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().split()[2]
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if marker in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def test_a_killed_dev_leaves_no_orphan_working(tmp_path: Path) -> None:
    seed = str(secrets.randbelow(10**9) + 10**9)  # marks this server's command line
    server = subprocess.Popen(
        [str(DEV), "sim", "serve", "--port", "0", "--seed", seed],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert line.startswith("SIM LISTENING"), line
        server.send_signal(signal.SIGKILL)  # what `kill -9 <pid of ./dev>` does
        server.wait(timeout=10)
        deadline = time.monotonic() + 5
        while _processes_with(seed) and time.monotonic() < deadline:
            time.sleep(0.1)
        survivors = _processes_with(seed)
        assert survivors == [], f"orphaned workers still running: {survivors}"
    finally:
        for pid in _processes_with(seed):  # never leave one behind, even when failing
            os.kill(pid, signal.SIGKILL)
        if server.stdout is not None:
            server.stdout.close()


FAKE_UV = """#!/usr/bin/env bash
# A stand-in for uv: counts syncs and builds a tiny environment.
echo "$@" >> "$(dirname "$0")/uv-calls"
mkdir -p .venv/bin
ln -sf "$(type -P true)" .venv/bin/python
printf '#!/usr/bin/env bash\\necho "evalp $*"\\n' > .venv/bin/evalp
chmod +x .venv/bin/evalp
"""


def test_dev_syncs_only_when_the_lock_or_project_changed(tmp_path: Path) -> None:
    project = tmp_path / "project"
    tools = tmp_path / "tools"
    project.mkdir()
    tools.mkdir()
    for name in ("dev", "uv.lock", "pyproject.toml"):
        shutil.copy2(paths.PROJECT_ROOT / name, project / name)
    (tools / "uv").write_text(FAKE_UV)
    (tools / "uv").chmod(0o755)
    env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}"}
    calls = tools / "uv-calls"

    def dev(*args: str) -> str:
        done = subprocess.run(
            [str(project / "dev"), *args], cwd=project, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def syncs() -> int:
        return len(calls.read_text().splitlines()) if calls.exists() else 0

    assert dev("world", "--seed", "3") == "evalp world --seed 3"
    assert syncs() == 1
    assert dev("--help") == "evalp --help"
    assert syncs() == 1, "nothing changed: no sync"
    with (project / "uv.lock").open("a") as lock:
        lock.write("\n# a changed lock\n")
    dev("--help")
    assert syncs() == 2, "the lock changed: synced again"
    dev("--help")
    assert syncs() == 2


def test_dev_compiles_the_packages_own_bytecode_and_again_once_a_module_changed(
    tmp_path: Path,
) -> None:
    """`uv sync --compile-bytecode` leaves the editable project alone, and a machine with
    PYTHONDONTWRITEBYTECODE=1 never writes it: every process compiled the package again."""
    project = tmp_path / "project"
    tools = tmp_path / "tools"
    tools.mkdir()
    shutil.copytree(
        paths.PROJECT_ROOT / "eval_pipeline",
        project / "eval_pipeline",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    for name in ("dev", "uv.lock", "pyproject.toml"):
        shutil.copy2(paths.PROJECT_ROOT / name, project / name)
    # A stand-in for uv whose environment's python is a real one (compileall runs in it).
    (tools / "uv").write_text(FAKE_UV.replace('"$(type -P true)"', f'"{sys.executable}"'))
    (tools / "uv").chmod(0o755)
    env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}", "PYTHONDONTWRITEBYTECODE": "1"}

    def dev(*args: str) -> None:
        done = subprocess.run(
            [str(project / "dev"), *args], cwd=project, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr

    def stale() -> list[str]:
        """Modules without bytecode compiled from their current source (timestamp pycs:
        the source's mtime and size in the header)."""
        found = []
        for source in sorted((project / "eval_pipeline").rglob("*.py")):
            cached = Path(importlib.util.cache_from_source(str(source)))
            header = cached.read_bytes()[8:16] if cached.exists() else b""
            status = source.stat()
            expected = (int(status.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little") + (
                status.st_size & 0xFFFFFFFF
            ).to_bytes(4, "little")
            if header != expected:
                found.append(str(source.relative_to(project)))
        return found

    dev("setup")
    assert stale() == []
    module = project / "eval_pipeline" / "paths.py"
    module.write_text(module.read_text() + "\n# changed\n")
    os.utime(module, (time.time() + 5, time.time() + 5))  # a later mtime whatever the clock
    assert stale() == ["eval_pipeline/paths.py"]
    dev("--help")
    assert stale() == []
