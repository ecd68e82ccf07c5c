"""Run the simulated provider as a child process and talk to its admin endpoints."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import Any

import httpx

from eval_pipeline.sim.bill import SimBillLine, SimUsageLine
from eval_pipeline.sim.errors import SimAdminError, SimError, SimStartupError
from eval_pipeline.sim.server import LISTENING_PREFIX

DEFAULT_STARTUP_TIMEOUT_S = 30.0
SIM_REQUEST_LOG = "sim-requests.jsonl"
"""The file name a run gives the sim's request log, beside its call journal."""
_STOP_TIMEOUT_S = 5.0


class SimHandle:
    """A running simulated provider: its URLs and its admin endpoints."""

    def __init__(self, base_url: str, stdout_path: Path, stderr_path: Path) -> None:
        self.base_url = base_url
        self.openai_base_url = f"{base_url}/v1"
        self.anthropic_base_url = base_url
        self._stdout_path = stdout_path
        self._stderr_path = stderr_path
        self._client = httpx.Client(base_url=base_url, timeout=30.0, trust_env=False)

    def base_url_for(self, api: str) -> str:
        """The base URL for a model config's wire API (Anthropic Messages or OpenAI)."""
        return self.anthropic_base_url if api == "anthropic_messages" else self.openai_base_url

    def _get(self, path: str) -> Any:
        response = self._client.get(path)
        if response.status_code != 200:
            raise SimAdminError(f"GET {path} -> {response.status_code}: {response.text}")
        return response.json()

    def _post(self, path: str, payload: Mapping[str, Any] | None = None) -> Any:
        response = self._client.post(path, json=payload or {})
        if response.status_code != 200:
            raise SimAdminError(f"POST {path} -> {response.status_code}: {response.text}")
        return response.json()

    def bill(self) -> list[SimBillLine]:
        """Every billed reply so far, priced on its day (raises if a price is missing)."""
        return [SimBillLine.model_validate(line) for line in self._get("/_sim/bill")["lines"]]

    def usage(self) -> list[SimUsageLine]:
        """Every billed reply so far, unpriced."""
        return [SimUsageLine.model_validate(line) for line in self._get("/_sim/usage")["lines"]]

    def profile_errors(self) -> int:
        """Requests a profile failed to answer (a bug in the simulator, not a planted fault)."""
        return int(self._get("/_sim/counters")["profile_errors"])

    def check_no_profile_errors(self) -> None:
        """Raise SimError if any profile failed to answer since the server started."""
        counters = self.counters()
        if counters["profile_errors"]:
            raise SimError(
                f"the simulated provider's profiles failed {counters['profile_errors']} "
                f"time(s); last: {counters['last_profile_error']}"
            )

    def request_count(self) -> int:
        """Every HTTP request that reached a model endpoint, faults included."""
        return int(self._get("/_sim/counters")["request_count"])

    def counters(self) -> dict[str, Any]:
        """``request_count``, ``outcomes`` (by outcome kind) and ``billed``."""
        result: dict[str, Any] = self._get("/_sim/counters")
        return result

    def health(self) -> dict[str, Any]:
        result: dict[str, Any] = self._get("/_sim/health")
        return result

    def reset(self) -> None:
        """Forget the bill, the counters and the occurrence memory (not the clock, nor the
        count of profile errors)."""
        self._post("/_sim/reset")

    def set_clock(self, day: date | None) -> None:
        """Bill on ``day`` from now on; ``None`` returns to the real UTC date."""
        self._post("/_sim/clock", {"date": day.isoformat() if day else None})

    def output(self) -> tuple[str, str]:
        """Everything the server process wrote so far: (stdout, stderr)."""
        return (
            self._stdout_path.read_text(errors="replace"),
            self._stderr_path.read_text(errors="replace"),
        )

    def tenant(self, name: str, request_log: Path | None = None) -> SimTenant:
        """New model endpoints on this server with state of their own (see `SimTenant`);
        `request_log` keeps the tenant's record of every request it gets."""
        answer = self._post(
            "/_sim/tenants",
            {"name": name, "request_log": None if request_log is None else str(request_log)},
        )
        return SimTenant(self, name, f"{self.base_url}{answer['path']}")

    def close(self) -> None:
        self._client.close()


class SimTenant:
    """Model endpoints of a running simulated provider with their own counters, occurrence
    memory, usage and request log: what a provider of its own would be to its clients, in a
    process shared with the server's other tenants (a run's lanes and judge)."""

    def __init__(self, server: SimHandle, name: str, base_url: str) -> None:
        self.server = server
        self.name = name
        self.base_url = base_url
        self.openai_base_url = f"{base_url}/v1"
        self.anthropic_base_url = base_url

    def base_url_for(self, api: str) -> str:
        """The base URL for a model config's wire API (Anthropic Messages or OpenAI)."""
        return self.anthropic_base_url if api == "anthropic_messages" else self.openai_base_url

    def counters(self) -> dict[str, Any]:
        """This tenant's ``request_count``, ``outcomes``, ``billed`` and profile errors."""
        result: dict[str, Any] = self.server._get(f"/_sim/tenants/{self.name}/counters")
        return result

    def check_no_profile_errors(self) -> None:
        """Raise SimError if any profile failed to answer this tenant."""
        counters = self.counters()
        if counters["profile_errors"]:
            raise SimError(
                f"the simulated provider's profiles failed {counters['profile_errors']} "
                f"time(s) for {self.name}; last: {counters['last_profile_error']}"
            )


@contextmanager
def running_tenant(
    server: SimHandle,
    label: str,
    *,
    request_log: Path | None = None,
    allow_profile_errors: bool = False,
) -> Iterator[SimTenant]:
    """A new tenant of a running server for the block (named `label` and a random suffix,
    so a session opened again gets a fresh one): to its clients what `running_sim` would
    start, without a process of its own. Unless `allow_profile_errors`, a profile that
    failed it during the block raises SimError on exit, as `running_sim` does."""
    tenant = server.tenant(f"{label}-{secrets.token_hex(4)}", request_log)
    yield tenant
    if not allow_profile_errors:
        tenant.check_no_profile_errors()


def _command(
    seed: int,
    latency_ms: float,
    profile_options: Mapping[str, Any] | None,
    plugins: Sequence[str],
    request_log: Path | None,
) -> list[str]:
    command = [
        sys.executable,
        "-m",
        "eval_pipeline.sim",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--seed",
        str(seed),
        "--latency-ms",
        repr(float(latency_ms)),
        "--parent-pid",
        str(os.getpid()),
    ]
    if request_log is not None:
        command += ["--request-log", str(request_log)]
    if profile_options is not None:
        command += ["--profile-options", json.dumps(profile_options)]
    for plugin in plugins:
        command += ["--plugin", plugin]
    return command


def _wait_for_url(
    process: subprocess.Popen[bytes], stdout_path: Path, stderr_path: Path, timeout_s: float
) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        for line in stdout_path.read_text(errors="replace").splitlines():
            if line.startswith(LISTENING_PREFIX):
                return line[len(LISTENING_PREFIX) :].strip()
        code = process.poll()
        if code is not None:
            stderr = stderr_path.read_text(errors="replace")
            raise SimStartupError(
                f"the simulated provider exited with code {code} before listening; "
                f"stderr:\n{stderr}"
            )
        if time.monotonic() > deadline:
            stderr = stderr_path.read_text(errors="replace")
            raise SimStartupError(
                f"the simulated provider did not print {LISTENING_PREFIX.strip()!r} within "
                f"{timeout_s:g} s; stderr so far:\n{stderr}"
            )
        time.sleep(0.01)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=_STOP_TIMEOUT_S)


@contextmanager
def running_sim(
    *,
    seed: int = 0,
    latency_ms: float = 0,
    profile_options: Mapping[str, Any] | None = None,
    plugins: Sequence[str] = (),
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S,
    request_log: Path | None = None,
    allow_profile_errors: bool = False,
) -> Iterator[SimHandle]:
    """Start ``python -m eval_pipeline.sim --port 0 ...`` and yield its :class:`SimHandle`.

    The child's stdout and stderr go to temporary files (see :meth:`SimHandle.output`);
    the server is terminated (SIGTERM, then SIGKILL after 5 s) on exit, and stops by
    itself if this process dies first. Unless `allow_profile_errors`, a profile that
    failed during the block raises SimError on exit: a simulator bug is never taken for
    planted flakiness. `request_log` keeps the server's own record of every request.
    """
    with tempfile.TemporaryDirectory(prefix="evalp-sim-") as tmp:
        stdout_path = Path(tmp) / "stdout.txt"
        stderr_path = Path(tmp) / "stderr.txt"
        with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
            process = subprocess.Popen(
                _command(seed, latency_ms, profile_options, plugins, request_log),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        try:
            url = _wait_for_url(process, stdout_path, stderr_path, startup_timeout_s)
            handle = SimHandle(url, stdout_path, stderr_path)
            try:
                yield handle
                if not allow_profile_errors:
                    handle.check_no_profile_errors()
            finally:
                handle.close()
        finally:
            _stop(process)
