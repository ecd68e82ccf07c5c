"""The MLflow store: one `MlflowClient` with explicit run ids, never mlflow's global run.

Embedded by default: a SQLite backend store and an artifact folder under `var/mlflow/`;
`EVALP_MLFLOW_URI` (or the resource's `tracking_uri`) points at any tracking server. A new
SQLite store is created once, under a file lock, before anything uses it: two processes
initialising one file at once corrupt its schema (FIELD-NOTES). A server that cannot be
reached is a `TrackingError` naming the URI, raised before anything is logged.
"""

from __future__ import annotations

import fcntl
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from eval_pipeline import paths
from eval_pipeline.errors import EvalPipelineError
from eval_pipeline.records import FrozenRecord

if TYPE_CHECKING:
    from mlflow import MlflowClient

TRACKING_URI_ENV = "EVALP_MLFLOW_URI"
SCHEMA_LOGGERS = ("mlflow.store.db.utils", "alembic.runtime.migration")
"""Loggers that report a new store's schema being created, at INFO."""
KIND_TAG = "mlflow.experimentKind"
RUNS_KIND = "custom_model_development"
"""The experiment's kind for MLflow clients that read it; MLflow 3.17's own UI ignores it
and takes the mode from the page's `workflowType` (see `runs_page`)."""
SAVED_VIEW_TAG_PREFIX = "mlflow.sharedViewState."
"""An experiment tag under this prefix is a runs-table view the UI lists under "Views" and
opens from `?viewStateShareKey=<rest of the key>`: columns, order, widths."""
MAX_TAG_VALUE_CHARS = 20_000
"""MLflow's limit on an experiment tag's value (`MAX_EXPERIMENT_TAG_VAL_LENGTH`)."""
_PROBE_RETRIES = "MLFLOW_HTTP_REQUEST_MAX_RETRIES"
_PROBE_TIMEOUT = "MLFLOW_HTTP_REQUEST_TIMEOUT"


class TrackingError(EvalPipelineError):
    """The tracking store cannot be used (unreachable, refused, or inconsistent)."""


class TrackingStore(FrozenRecord):
    """Where runs are logged: the tracking URI and, for experiments created here, the
    artifact root."""

    uri: str
    artifact_root: str

    @property
    def embedded(self) -> bool:
        return self.uri.startswith("sqlite:")


def default_store(uri: str = "") -> TrackingStore:
    """`uri`, else `EVALP_MLFLOW_URI`, else the embedded store under var/mlflow/."""
    chosen = uri or os.environ.get(TRACKING_URI_ENV, "")
    root = paths.var_dir() / "mlflow"
    if not chosen:
        chosen = f"sqlite:///{root / 'mlflow.db'}"
    return TrackingStore(uri=chosen, artifact_root=(root / "artifacts").as_uri())


def open_client(store: TrackingStore) -> MlflowClient:
    """A client on `store`, its schema created if new; raises TrackingError when the store
    cannot be reached or read. MLflow's usage telemetry is off unless the user turned it
    on: nothing leaves the machine but what is logged to the store."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    from mlflow import MlflowClient

    # Creating a new store's schema logs two INFO lines into the middle of the progress
    # output; its warnings and errors still show.
    for name in SCHEMA_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)

    if store.embedded:
        database = Path(store.uri.removeprefix("sqlite:///"))
        database.parent.mkdir(parents=True, exist_ok=True)
        lock = database.with_name(database.name + ".init-lock")
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # waits: the first process creates the schema
            client = MlflowClient(tracking_uri=store.uri)
            _probe(client, store)
        finally:
            os.close(fd)
        return client
    # A remote server: fail fast instead of mlflow's minutes of retries.
    os.environ.setdefault(_PROBE_RETRIES, "0")
    os.environ.setdefault(_PROBE_TIMEOUT, "10")
    client = MlflowClient(tracking_uri=store.uri)
    _probe(client, store)
    return client


def _probe(client: MlflowClient, store: TrackingStore) -> None:
    from mlflow.exceptions import MlflowException

    try:
        client.search_experiments(max_results=1)
    except (MlflowException, OSError) as error:
        raise TrackingError(
            f"MLflow tracking store {store.uri} cannot be used: {_first_line(error)}"
        ) from error
    except Exception as error:  # requests' connection errors, whatever the transport raises
        if type(error).__module__.startswith(("requests", "urllib3")):
            raise TrackingError(
                f"MLflow tracking server {store.uri} is unreachable: {_first_line(error)}"
            ) from error
        raise


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0][:300] if text else type(error).__name__


def experiment_id(client: MlflowClient, name: str, store: TrackingStore) -> str:
    """The id of the named MLflow experiment, created (with its artifact folder) if new;
    two processes creating it at once end with the same id."""
    from mlflow.exceptions import MlflowException

    found = client.get_experiment_by_name(name)
    if found is not None:
        if found.tags.get(KIND_TAG) != RUNS_KIND:
            client.set_experiment_tag(found.experiment_id, KIND_TAG, RUNS_KIND)
        return str(found.experiment_id)
    try:
        return str(
            client.create_experiment(
                name,
                artifact_location=f"{store.artifact_root}/{_slug(name)}",
                tags={KIND_TAG: RUNS_KIND},
            )
        )
    except MlflowException:
        again = client.get_experiment_by_name(name)
        if again is None:
            raise
        return str(again.experiment_id)


def runs_page(experiment_id: str, view: str | None = None) -> str:
    """The UI path (after the server's address) of an experiment's runs table. MLflow 3.17's
    UI chooses between its GenAI (traces) and model-training (runs) pages from the URL's
    `workflowType`, else from the browser's last choice, GenAI on a first visit: a bare
    experiment link opens on "Traces 0 / No data"."""
    query = "workflowType=machine_learning" + (f"&viewStateShareKey={view}" if view else "")
    return f"/#/experiments/{experiment_id}/runs?{query}"


def save_runs_view(
    client: MlflowClient, experiment_id: str, key: str, name: str, columns: list[str]
) -> None:
    """Store a named runs-table view on the experiment showing `columns` (metric names),
    newest runs first, each column wide enough for its name; saving again replaces it."""
    import json
    import time

    selected = {f"metrics.`{column}`": column for column in columns}
    state = {
        "selectedColumns": list(selected),
        "columnOrder": list(selected),  # the UI applies widths to the columns it orders only
        "columnWidths": {key: 7 * len(name) + 40 for key, name in selected.items()},
        "orderByKey": "attributes.start_time",
        "orderByAsc": False,
    }
    now = int(time.time() * 1000)
    envelope = {"name": name, "createdAt": now, "updatedAt": now, "state": json.dumps(state)}
    value = json.dumps(envelope)
    if len(value) > MAX_TAG_VALUE_CHARS:
        raise TrackingError(
            f"the runs view {name!r} names {len(columns)} columns ({len(value)} characters); "
            f"an MLflow experiment tag holds {MAX_TAG_VALUE_CHARS}: name fewer"
        )
    client.set_experiment_tag(experiment_id, SAVED_VIEW_TAG_PREFIX + key, value)


def mlflow_server_command(store: TrackingStore, port: int) -> list[str]:
    """`mlflow ui` on loopback over `store` (one worker): what `evalp ui` serves."""
    import sys

    return [
        str(Path(sys.executable).with_name("mlflow")),
        "ui",
        "--backend-store-uri",
        store.uri,
        "--default-artifact-root",
        store.artifact_root,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
    ]


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def has_run(client: MlflowClient, run_id: str) -> bool:
    """Whether the store holds run `run_id`, not deleted (a store deleted or emptied since
    the run was logged does not: what Dagster recorded of it no longer stands)."""
    from mlflow.exceptions import MlflowException
    from mlflow.protos.databricks_pb2 import RESOURCE_DOES_NOT_EXIST, ErrorCode

    try:
        run = client.get_run(run_id)
    except MlflowException as error:
        if error.error_code == ErrorCode.Name(RESOURCE_DOES_NOT_EXIST):
            return False
        raise
    return run.info.lifecycle_stage != "deleted"
