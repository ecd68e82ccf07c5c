"""Registration in MLflow, before any result, and the refusal of anything that changed.

Registering logs a run (`evalp.kind = registration`) in the experiment's own MLflow
experiment (`evalp/experiments/<id>`) holding the spec hash as a tag and the registered
material as an artifact. Every result is logged by :func:`log_result`, which looks the
registration up first and refuses an unregistered spec, an altered one (naming the fields
that changed) or one registered on another fixture set; a result run therefore always
starts after its registration run, and carries the registration's run id.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from eval_pipeline.errors import EvalPipelineError
from eval_pipeline.experiments.spec import ExperimentSpec, Registered, changed_fields
from eval_pipeline.records import FrozenRecord
from eval_pipeline.tracking.mlflow_store import TrackingStore, experiment_id
from eval_pipeline.tracking.provenance import CodeVersion
from eval_pipeline.tracking.runs import (
    code_params,
    finish,
    flatten,
    log_texts,
    log_values,
    start_run,
)

if TYPE_CHECKING:
    from mlflow import MlflowClient

KIND_TAG = "evalp.kind"
ID_TAG = "evalp.experiment_id"
HASH_TAG = "evalp.spec_hash"
REGISTRATION_TAG = "evalp.registration_run_id"
REGISTERED_FILE = "registered.json"


class ExperimentError(EvalPipelineError):
    """An experiment cannot run or log: unregistered, altered, or on another fixture set."""


class Registration(FrozenRecord):
    experiment_id: str
    run_id: str
    spec_hash: str
    registered_at_ms: int
    mlflow_experiment_id: str
    material: Registered


def mlflow_experiment_name(experiment: str) -> str:
    return f"evalp/experiments/{experiment}"


def find_registration(client: MlflowClient, experiment: str) -> Registration | None:
    """The experiment's registration run, or None when it was never registered."""
    found = client.get_experiment_by_name(mlflow_experiment_name(experiment))
    if found is None:
        return None
    runs = client.search_runs(
        [found.experiment_id],
        filter_string=f"tags.`{KIND_TAG}` = 'registration'",
        order_by=["attributes.start_time ASC"],
        max_results=10,
    )
    if not runs:
        return None
    first = runs[0]
    with tempfile.TemporaryDirectory(prefix="evalp-registration-") as folder:
        path = client.download_artifacts(first.info.run_id, REGISTERED_FILE, folder)
        material = Registered.model_validate_json(Path(path).read_text(encoding="utf-8"))
    return Registration(
        experiment_id=experiment,
        run_id=first.info.run_id,
        spec_hash=first.data.tags[HASH_TAG],
        registered_at_ms=int(first.info.start_time),
        mlflow_experiment_id=str(found.experiment_id),
        material=material,
    )


def register(
    client: MlflowClient,
    store: TrackingStore,
    spec: ExperimentSpec,
    material: Registered,
    code: CodeVersion,
) -> tuple[Registration, bool]:
    """Register the spec (True), or return the existing registration of the same material
    (False); a different material under a registered id is refused."""
    existing = find_registration(client, spec.id)
    if existing is not None:
        check_unchanged(existing, material)
        return existing, False
    mlflow_experiment = experiment_id(client, mlflow_experiment_name(spec.id), store)
    digest = material.digest()
    run_id = start_run(
        client,
        mlflow_experiment,
        "registration",
        tags={
            KIND_TAG: "registration",
            ID_TAG: spec.id,
            HASH_TAG: digest,
            "evalp.fixture_id": spec.fixture_id,
            "mlflow.note.content": spec.hypothesis,
        },
    )
    try:
        log_values(
            client,
            run_id,
            params={
                **flatten("spec", {k: v for k, v in material.spec.items() if k != "hypothesis"}),
                **code_params(code),
            },
        )
        log_texts(
            client,
            run_id,
            {
                REGISTERED_FILE: material.canonical(),
                "spec.json": json.dumps(material.spec, indent=1),
            },
        )
    except BaseException:
        finish(client, run_id, "FAILED")
        raise
    finish(client, run_id)
    registration = find_registration(client, spec.id)
    if registration is None or registration.run_id != run_id:
        raise ExperimentError(
            f"experiment {spec.id} was registered twice at once; the first registration "
            f"stands: {registration.run_id if registration else 'none found'}"
        )
    return registration, True


def check_results_registration(
    client: MlflowClient, store: TrackingStore, spec: ExperimentSpec, recorded: str | None
) -> None:
    """Refuse an experiment whose results exist (logged against registration `recorded`)
    when the store no longer holds that registration: registering it now would date the
    registration after its results, which is what pre-registration rules out."""
    if recorded is None:
        return
    registration = find_registration(client, spec.id)
    if registration is not None and registration.run_id == recorded:
        return
    held = (
        "it holds no registration of it"
        if registration is None
        else f"it holds another registration, {registration.run_id}"
    )
    raise ExperimentError(
        f"experiment {spec.id} has results logged against registration run {recorded}, "
        f"which the MLflow store {store.uri} no longer holds ({held}); it is not registered "
        "again after its results exist: restore the store from a backup, or ask the question "
        "afresh under a new experiment id (a copy of its spec with a new `id`)"
    )


def check_unchanged(registration: Registration, material: Registered) -> None:
    """Refuse material that differs from what was registered, naming every changed field."""
    if material.digest() == registration.spec_hash:
        return
    before = json.loads(registration.material.canonical())
    after = json.loads(material.canonical())
    fields = changed_fields(before, after)
    raise ExperimentError(
        f"experiment {registration.experiment_id} changed since it was registered "
        f"(run {registration.run_id}): {', '.join(fields)}. A pre-registration cannot be "
        "edited; restore it, or register the changed experiment under a new id"
    )


def require_registration(
    client: MlflowClient, spec: ExperimentSpec, material: Registered, fixture_id: str
) -> Registration:
    """The registration a result may be logged against, or an ExperimentError saying
    exactly what is wrong: never registered, changed since, or another fixture set."""
    registration = find_registration(client, spec.id)
    if registration is None:
        raise ExperimentError(
            f"experiment {spec.id} is not registered: run `evalp experiment register {spec.id}` "
            "before any result exists"
        )
    check_unchanged(registration, material)
    if fixture_id != spec.fixture_id:
        raise ExperimentError(
            f"experiment {spec.id} was registered on fixture set {spec.fixture_id}, but the "
            f"fixture set at hand is {fixture_id} (the world or suite was regenerated): its "
            "results would not answer the registered question"
        )
    return registration


def log_result(
    client: MlflowClient,
    spec: ExperimentSpec,
    material: Registered,
    fixture_id: str,
    *,
    arm_metrics: Mapping[str, Mapping[str, float]],
    summary_metrics: Mapping[str, float],
    verdicts: Mapping[str, str],
    artifacts: Mapping[str, str],
    code: CodeVersion,
    tags: Mapping[str, str],
) -> tuple[str, dict[str, str]]:
    """Log a result: a parent run (verdicts, report) and a nested run per arm, in the
    experiment's MLflow experiment, only against an unchanged registration."""
    registration = require_registration(client, spec, material, fixture_id)
    if registration.registered_at_ms > int(time.time() * 1000):
        raise ExperimentError(
            f"experiment {spec.id}: its registration run is dated in the future; "
            "the clock is wrong and the order of registration and result cannot be shown"
        )
    base_tags = {
        KIND_TAG: "result",
        ID_TAG: spec.id,
        HASH_TAG: registration.spec_hash,
        REGISTRATION_TAG: registration.run_id,
        "evalp.fixture_id": fixture_id,
        **tags,
    }
    parent = start_run(client, registration.mlflow_experiment_id, "result", tags=base_tags)
    arm_runs: dict[str, str] = {}
    try:
        log_values(
            client,
            parent,
            params=code_params(code),
            metrics=summary_metrics,
            tags={f"evalp.verdict.{name}": verdict for name, verdict in verdicts.items()},
        )
        log_texts(client, parent, artifacts)
        for arm, metrics in arm_metrics.items():
            run_id = start_run(
                client,
                registration.mlflow_experiment_id,
                f"arm {arm}",
                tags={**base_tags, "evalp.arm": arm},
                parent_run_id=parent,
            )
            arm_runs[arm] = run_id
            log_values(
                client,
                run_id,
                params=flatten("arm", spec.arms()[arm].model_dump(mode="json")),
                metrics=metrics,
            )
            finish(client, run_id)
    except BaseException:
        for run_id in [parent, *arm_runs.values()]:
            finish(client, run_id, "FAILED")
        raise
    finish(client, parent)
    return parent, arm_runs
