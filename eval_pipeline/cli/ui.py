"""`evalp ui`: the Dagster and MLflow UIs on loopback, with the daemon."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from eval_pipeline import paths
from eval_pipeline.cli.common import PORT_RANGE


@click.command()
@click.option("--port", type=PORT_RANGE, default=3000, show_default=True)
@click.option("--mlflow-port", type=PORT_RANGE, default=5000, show_default=True)
@click.option(
    "--automations",
    is_flag=True,
    help="Turn on the nightly schedule, the model-config sensor and the evaluation chain "
    "(lane runs lead to scores, a night's scores to the summary, gate, tracking and report) "
    "before serving; they stay on in the instance until turned off in the UI.",
)
def ui(port: int, mlflow_port: int, automations: bool) -> None:
    """Serve the Dagster UI (this project's local instance, with its daemon) and the MLflow
    UI (the tracking store) on loopback until interrupted; both refuse a request naming a
    host other than 127.0.0.1, localhost or [::1] (DNS rebinding)."""
    import signal
    import subprocess
    import time

    from dagster import DagsterInstance

    from eval_pipeline.tracking.mlflow_store import (
        default_store,
        mlflow_server_command,
        open_client,
        runs_page,
    )
    from eval_pipeline.tracking.sweep_runs import HEADLINE_VIEW

    home = paths.prepared_dagster_home()
    # Each store is created once, here, before the servers open it: two processes creating
    # a fresh one at once corrupt its schema (the webserver and the daemon, FIELD-NOTES).
    with DagsterInstance.from_config(str(home)):
        pass
    store = default_store()
    sweeps = open_client(store).search_experiments(filter_string="name LIKE 'evalp/sweeps/%'")
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "DAGSTER_HOME": str(home), "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    workspace = str(paths.PROJECT_ROOT / "workspace.yaml")
    if automations:
        for kind in ("schedule", "sensor"):  # Dagster's own commands: the state they set is
            # the instance's, the same the UI's toggles show
            started = subprocess.run(
                [str(bin_dir / "dagster"), kind, "start", "--start-all", "-w", workspace],
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            if started.returncode != 0:
                raise click.ClickException(
                    f"dagster {kind} start --start-all failed: "
                    + (started.stderr.strip().splitlines() or ["(no output)"])[-1]
                )
            click.echo(started.stdout.strip())
    # `dagster dev` is the daemon plus a webserver that answers any Host header (DNS
    # rebinding): the same two, with our webserver accepting loopback host names only.
    commands = {
        f"Dagster  http://127.0.0.1:{port}": [
            sys.executable,
            "-m",
            "eval_pipeline.ui_server",
            "--workspace",
            workspace,
            "--port",
            str(port),
        ],
        f"MLflow   http://127.0.0.1:{mlflow_port}": mlflow_server_command(store, mlflow_port),
    }

    def default_sigint() -> None:  # the servers map SIGTERM to SIGINT: it must not be ignored
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    from contextlib import ExitStack

    from eval_pipeline.dagster_client.queue import running_daemon

    stack = ExitStack()
    daemon = stack.enter_context(running_daemon()).process
    if daemon is None:
        stack.close()
        raise click.ClickException(
            f"a Dagster daemon already serves this instance ({home}): an `evalp demo` or "
            "`evalp sweep` running its lanes, or another `evalp ui`; start the UI once it ends"
        )
    children = [
        subprocess.Popen(command, env=env, preexec_fn=default_sigint)
        for command in commands.values()
    ]
    click.echo(f"DAGSTER_HOME={home}; MLflow store {store.uri}")
    for address in commands:
        click.echo(f"  {address}")
    for sweep_experiment in sweeps:  # MLflow's UI opens a bare experiment link on GenAI traces
        page = runs_page(sweep_experiment.experiment_id, HEADLINE_VIEW)
        click.echo(f"    {sweep_experiment.name}: http://127.0.0.1:{mlflow_port}{page}")
    click.echo(
        "  Dagster daemon (schedules, sensors, run queue): log in "
        f"{paths.var_dir() / 'logs' / 'dagster-daemon.log'}"
    )
    children.append(daemon)

    def stop(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        while all(child.poll() is None for child in children):
            time.sleep(0.5)
    except KeyboardInterrupt:
        click.echo("stopping the servers")
    finally:
        for child in children:
            if child.poll() is None:
                child.terminate()
        for child in children:
            child.wait(timeout=30)
        stack.close()
    ended = [c.returncode for c in children]
    click.echo(f"servers stopped (exit codes {ended})")
