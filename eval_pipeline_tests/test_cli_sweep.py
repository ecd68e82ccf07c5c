"""`evalp sweep` against a server that refuses every call, then against the same server
fixed (issue 25, finding 7): the refused sweep exits 1 printing the server's own reason,
and the same sweep run again re-runs the refused cases (harness errors heal like
infrastructure errors) and exits 0. Before the fix it exited 0 twice and said "ran 0"."""

from __future__ import annotations

import re
import shutil
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from eval_pipeline import paths
from eval_pipeline.sim.process import SimHandle, running_sim
from eval_pipeline_tests.demo_helpers import build_main_job, run_evalp, small_world_env

ONE_SEED = "name: small\nmodels: [sim-strong]\nseeds: [0]\n"
REFUSAL = b'{"error":{"message":"No connected db."}}'
RELAY = """name: relay
api: openai_compatible
provider: relay-under-test
model: sim-strong
price_model: local-llama
base_url: {url}
seed_header: x-evalp-seed
max_in_flight: 16
context_window_tokens: 200000
timeout_s: 30
connect_timeout_s: 5
retry: {{max_attempts: 2, base_delay_s: 0.1, max_delay_s: 1, max_total_s: 10}}
"""


class Relay:
    """A loopback model server: refuses every call with HTTP 400 until `fixed`, then
    passes each call to the simulated provider (the sim-strong agent) and back."""

    def __init__(self, sim: SimHandle) -> None:
        self.sim = sim
        self.fixed = False
        relay = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                status, reply = relay.answer(self.path, body, self.headers.get("x-evalp-seed"))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def answer(self, path: str, body: bytes, seed: str | None) -> tuple[int, bytes]:
        if not self.fixed:
            return 400, REFUSAL
        headers = {"Content-Type": "application/json", "Authorization": "Bearer sim"}
        if seed is not None:
            headers["x-evalp-seed"] = seed
        target = self.sim.openai_base_url + path.removeprefix("/v1")
        request = urllib.request.Request(target, data=body, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=60) as reply:
                return int(reply.status), reply.read()
        except urllib.error.HTTPError as refused:
            return int(refused.code), refused.read()


@pytest.fixture
def relay() -> Iterator[Relay]:
    with running_sim() as sim:
        server = Relay(sim)
        thread = threading.Thread(target=server.server.serve_forever, daemon=True)
        thread.start()
        try:
            yield server
        finally:
            server.server.shutdown()
            server.server.server_close()


def ran(stdout: str) -> dict[str, int]:
    """`cases N (ran R, ...)` per lane asset, from the sweep's lane lines."""
    return {
        found.group(1): int(found.group(2))
        for found in re.finditer(
            r"^\s+(\w+_lane_runs)\s+relay\|0\s+cases \d+ \(ran (\d+)", stdout, re.M
        )
    }


@pytest.mark.slow
@pytest.mark.timeout(1200)  # the main job and two sweeps, on a shared machine
def test_a_refused_sweep_exits_1_with_the_servers_reason_and_heals_once_fixed(
    isolated_state: Path, relay: Relay
) -> None:
    env = small_world_env(isolated_state)
    Path(env["EVALP_SWEEP_CONFIG"]).write_text(ONE_SEED)
    models = isolated_state / "models"
    shutil.copytree(paths.CONFIGS_DIR / "models", models)
    (models / "relay.yaml").write_text(RELAY.format(url=relay.url))
    env["EVALP_MODELS_DIR"] = str(models)
    build_main_job(env)  # the fixtures a sweep runs on; the demo's own lanes are not needed

    refused = run_evalp(["sweep", "--models", "relay", "--seeds", "0"], env)
    assert refused.returncode == 1, (refused.stdout, refused.stderr)
    assert "No connected db." in refused.stderr
    assert "HTTP 400" in refused.stderr
    assert "Traceback" not in refused.stderr
    first = ran(refused.stdout)
    assert set(first) == {"model_lane_runs", "product_lane_runs"} and all(first.values())

    relay.fixed = True
    healed = run_evalp(["sweep", "--models", "relay", "--seeds", "0"], env)
    assert healed.returncode == 0, (healed.stdout, healed.stderr)
    assert "No connected db." not in healed.stderr
    assert ran(healed.stdout) == first  # every refused case ran again, and only those
    assert re.findall(r"relay\|0\s+cases .*? ‡ (\d+) ", healed.stdout) == ["0", "0"]
