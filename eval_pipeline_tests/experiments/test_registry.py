"""Registration on a real MLflow SQLite store: a result cannot be logged against an
unregistered spec, an altered one (the error names the field) or another fixture set, and
leaves no run behind when refused; an accepted result starts after its registration."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipeline.experiments.registry import (
    KIND_TAG,
    ExperimentError,
    check_results_registration,
    find_registration,
    log_result,
    mlflow_experiment_name,
    register,
    require_registration,
)
from eval_pipeline.experiments.spec import ExperimentSpec, Registered, registered_material
from eval_pipeline.paths import CONFIGS_DIR
from eval_pipeline.providers.config import ModelConfig, load_model_config
from eval_pipeline.tracking.mlflow_store import TrackingStore, open_client
from eval_pipeline.tracking.provenance import code_version
from eval_pipeline_tests.experiments.test_parity import spec

JUDGE = {"model": "sim-judge", "rubric_hash": "abc", "max_tokens": 256}


def configs(**changes: object) -> dict[str, ModelConfig]:
    base = load_model_config(CONFIGS_DIR / "models" / "sim-strong.yaml")
    return {name: base.model_copy(update={"name": name, **changes}) for name in ("m-a", "m-b")}


def material(experiment: ExperimentSpec, **config_changes: object) -> Registered:
    return registered_material(experiment, configs(**config_changes), JUDGE)


def a_result(store: TrackingStore, experiment: ExperimentSpec, what: Registered) -> str:
    parent, _ = log_result(
        open_client(store),
        experiment,
        what,
        experiment.fixture_id,
        arm_metrics={"reference": {"mean_points": 90.0}, "candidate": {"mean_points": 91.0}},
        summary_metrics={"candidate.difference": 1.0},
        verdicts={"candidate": "confirmed"},
        artifacts={"parity_report.md": "# report\n"},
        code=code_version(),
        tags={},
    )
    return parent


def result_runs(store: TrackingStore, experiment: str) -> int:
    client = open_client(store)
    found = client.get_experiment_by_name(mlflow_experiment_name(experiment))
    if found is None:
        return 0
    return len(
        client.search_runs([found.experiment_id], filter_string=f"tags.`{KIND_TAG}` = 'result'")
    )


def test_a_result_is_refused_for_an_unregistered_spec_and_nothing_is_logged(
    store: TrackingStore,
) -> None:
    experiment = spec()
    with pytest.raises(ExperimentError, match="unit-parity is not registered"):
        a_result(store, experiment, material(experiment))
    assert result_runs(store, experiment.id) == 0


def test_registration_precedes_the_result_and_registering_again_changes_nothing(
    store: TrackingStore,
) -> None:
    experiment = spec()
    client = open_client(store)
    registration, new = register(client, store, experiment, material(experiment), code_version())
    again, new_again = register(client, store, experiment, material(experiment), code_version())
    assert new and not new_again and again.run_id == registration.run_id
    parent = a_result(store, experiment, material(experiment))
    run = client.get_run(parent)
    assert run.info.start_time > registration.registered_at_ms
    assert run.data.tags["evalp.registration_run_id"] == registration.run_id
    assert result_runs(store, experiment.id) == 3  # the result and one run per arm


@pytest.mark.parametrize(
    ("altered", "config_changes", "named"),
    [
        (spec(margin=3.0), {}, "spec.margin"),
        (spec(hypothesis="a different hypothesis, written afterwards"), {}, "spec.hypothesis"),
        (spec(), {"timeout_s": 99.0}, "model_configs.m-a.timeout_s"),
        (
            spec(reference={"label": "a", "model": "m-a", "lane": "product", "seeds": [0, 1]}),
            {},
            "spec.reference.seeds",
        ),
    ],
)
def test_an_altered_registration_is_refused_naming_the_field(
    store: TrackingStore,
    altered: ExperimentSpec,
    config_changes: dict[str, object],
    named: str,
) -> None:
    client = open_client(store)
    register(client, store, spec(), material(spec()), code_version())
    changed = material(altered, **config_changes)
    with pytest.raises(ExperimentError, match="changed since it was registered") as raised:
        a_result(store, altered, changed)
    assert named in str(raised.value)
    with pytest.raises(ExperimentError, match=named.replace(".", r"\.")):
        register(client, store, altered, changed, code_version())
    assert result_runs(store, altered.id) == 0
    registration = find_registration(client, altered.id)
    assert registration is not None and registration.material == material(spec())


def test_a_result_on_another_fixture_set_is_refused_naming_both(store: TrackingStore) -> None:
    experiment = spec()
    client = open_client(store)
    register(client, store, experiment, material(experiment), code_version())
    with pytest.raises(ExperimentError, match=r"registered on fixture set fx-unit.*fx-regenerated"):
        require_registration(client, experiment, material(experiment), "fx-regenerated")


def test_an_experiment_with_results_is_refused_where_its_registration_is_gone(
    store: TrackingStore, tmp_path: Path
) -> None:
    """Results logged against a registration a store no longer holds (the store deleted,
    emptied or replaced): refused, naming the experiment, the registration and the store;
    a store holding another registration of it (made after the results) likewise."""
    experiment = spec()
    what = material(experiment)
    registration, _ = register(open_client(store), store, experiment, what, code_version())
    check_results_registration(open_client(store), store, experiment, registration.run_id)
    check_results_registration(open_client(store), store, experiment, None)  # no results yet

    new = TrackingStore(
        uri=f"sqlite:///{tmp_path / 'new' / 'mlflow.db'}", artifact_root=(tmp_path / "a2").as_uri()
    )
    with pytest.raises(ExperimentError) as refused:
        check_results_registration(open_client(new), new, experiment, registration.run_id)
    for named in (experiment.id, registration.run_id, new.uri, "holds no registration"):
        assert named in str(refused.value)
    again, _ = register(open_client(new), new, experiment, what, code_version())
    with pytest.raises(ExperimentError, match=f"another registration, {again.run_id}"):
        check_results_registration(open_client(new), new, experiment, registration.run_id)


def test_an_arm_can_name_a_product_and_a_default_one_leaves_the_registered_spec_as_it_was() -> None:
    """A local loop against a deployed endpoint is two arms of one spec (issue 27, item 3);
    specs registered before products existed keep their digest (the default product is left
    out of what is hashed)."""
    from eval_pipeline.products import ProductSpec

    local = spec()
    deployed = spec(
        candidate={
            "label": "b",
            "model": "m-b",
            "lane": "product",
            "seeds": [0],
            "product": {"plugin": "http", "options": {"url": "https://agent.example/eval"}},
        }
    )
    assert "product" not in local.model_dump(mode="json")["candidate"]
    assert deployed.model_dump(mode="json")["candidate"]["product"]["plugin"] == "http"
    assert deployed.arms()["candidate"].product == ProductSpec(
        plugin="http", options={"url": "https://agent.example/eval"}
    )
    assert local.arms()["candidate"].product.is_default
