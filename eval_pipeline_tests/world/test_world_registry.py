"""Worlds are found through the `eval_pipeline.worlds` entry-point group (issue 27): a
world from another distribution runs by name from a world config with no patching (it used
to need a `sitecustomize.py` editing the private `_REGISTRY` dict), the built-in label world
registers the same way, and a broken or clashing registration is one line naming it."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipeline import plugins, world
from eval_pipeline.cases.frozen import FixtureManifest
from eval_pipeline.errors import ConfigError
from eval_pipeline.records import FrozenRecord
from eval_pipeline.world import (
    WORLDS_GROUP,
    WorldRegistration,
    get_world_plugin,
    known_world_plugins,
    parse_world_config,
    plugin_for_config,
)
from eval_pipeline.world.label import LabelWorld

PLUGIN = """
from eval_pipeline.lanes.toolbox import ToolOutcome, Toolbox
from eval_pipeline.providers.types import ToolSpec
from eval_pipeline.records import FrozenRecord
from eval_pipeline.traces import CheckResult
from eval_pipeline.world import WorldRegistration
from eval_pipeline.world.label import LabelWorld


class TwinConfig(FrozenRecord):
    plugin: str = "twin"
    seed: int
    scale: float


ADD = ToolSpec(
    name="add",
    description="Add two integers.",
    input_schema={
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
)


class Adder(Toolbox):
    def __init__(self) -> None:
        super().__init__([ADD])

    def dispatch(self, name, arguments):
        total = arguments["a"] + arguments["b"]
        return ToolOutcome(name=name, arguments=arguments, text=str(total), is_error=False)


class Twin(LabelWorld):
    name = "twin"
    system_prompt = "You are the twin world's assistant."

    def open_toolbox(self, agent_db):
        return Adder()


def add_even(trace):
    return CheckResult(name="add_even", passed=True, reason="twin's own check")


registration = WorldRegistration(
    config_model=lambda: TwinConfig,
    plugin_for=lambda config: Twin(),
    generator_version="twin-1",
    suite_version="twin-suite-1",
    categories=("catalog_lookup",),
    trace_checks=lambda: {"add_even": add_even},
)
not_a_registration = 42
"""


def _distribution(root: Path, name: str, module: str, points: dict[str, str]) -> None:
    """An installed distribution as importlib.metadata finds one: a dist-info folder with
    its entry points, beside the module it names."""
    (root / f"{module}.py").write_text(textwrap.dedent(PLUGIN) if module == "twin_world" else "")
    info = root / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    lines = "".join(f"{key} = {value}\n" for key, value in points.items())
    (info / "entry_points.txt").write_text(f"[{WORLDS_GROUP}]\n{lines}")


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(tmp_path))
    plugins.entry_points_of.cache_clear()
    plugins.load_registration.cache_clear()
    yield tmp_path
    sys.modules.pop("twin_world", None)
    plugins.entry_points_of.cache_clear()
    plugins.load_registration.cache_clear()


def test_the_built_in_label_world_is_an_entry_point() -> None:
    assert "label" in known_world_plugins()
    assert isinstance(get_world_plugin("label"), LabelWorld)


def test_a_world_from_another_distribution_runs_by_name_from_its_config(installed: Path) -> None:
    _distribution(installed, "twin_world", "twin_world", {"twin": "twin_world:registration"})
    assert set(known_world_plugins()) >= {"label", "twin"}
    config = parse_world_config({"plugin": "twin", "seed": 3, "scale": 0.5}, "twin.yaml")
    assert type(config).__name__ == "TwinConfig"
    assert plugin_for_config(config).name == "twin"
    assert get_world_plugin("twin").name == "twin"


def test_both_lanes_open_a_case_with_the_system_prompt_of_the_world_it_was_frozen_from(
    installed: Path,
) -> None:
    from eval_pipeline.cases.frozen import FixtureSet
    from eval_pipeline.lanes.conversation import opening, system_prompt
    from eval_pipeline_tests.cases.test_frozen import WORLD, make_case

    _distribution(installed, "twin_world", "twin_world", {"twin": "twin_world:registration"})
    for plugin, expected in [
        ("label", LabelWorld.system_prompt),
        ("twin", "You are the twin world's assistant."),
    ]:
        manifest = FixtureManifest.model_construct(
            world=WORLD.model_copy(update={"plugin": plugin})
        )
        fixture_set = FixtureSet(path=installed, manifest=manifest, cases=(), tools=())
        first = opening(make_case(1), system_prompt(fixture_set))[0]
        assert (first.role, first.content) == ("system", expected)
    assert "record label" not in system_prompt(fixture_set)


def test_the_product_lane_runs_the_tools_and_trace_checks_of_the_world_it_was_frozen_from(
    installed: Path,
) -> None:
    """A world's own tool is run, not answered `unknown_tool` by the label world's tools;
    its own trace check is known beside the pipeline's."""
    from eval_pipeline.cases.frozen import FixtureSet
    from eval_pipeline.lanes.conversation import open_toolbox
    from eval_pipeline.scoring.trace_checks import all_checks
    from eval_pipeline_tests.cases.test_frozen import WORLD

    _distribution(installed, "twin_world", "twin_world", {"twin": "twin_world:registration"})
    all_checks.cache_clear()
    try:
        manifest = FixtureManifest.model_construct(
            world=WORLD.model_copy(update={"plugin": "twin"})
        )
        fixture_set = FixtureSet(path=installed, manifest=manifest, cases=(), tools=())
        with open_toolbox(fixture_set, installed / "unused.duckdb") as toolbox:
            added = toolbox.execute("add", '{"a": 2, "b": 40}')
            unknown = toolbox.execute("run_sql", '{"query": "select 1"}')
        assert (added.text, added.is_error) == ("42", False)
        assert unknown.error_kind == "unknown_tool" and "tools: add" in unknown.text
        assert {"add_even", "sql_clean", "money_from_calculator"} <= set(all_checks())
    finally:
        all_checks.cache_clear()


def test_a_broken_or_clashing_registration_is_one_line_naming_it(installed: Path) -> None:
    _distribution(
        installed,
        "twin_world",
        "twin_world",
        {"wrong": "twin_world:not_a_registration", "gone": "no_such_module:registration"},
    )
    _distribution(installed, "other_label", "other_label", {"label": "other_label:registration"})
    with pytest.raises(ConfigError, match=r"world plugin 'label' is registered twice"):
        known_world_plugins()
    (installed / "other_label-0.1.dist-info" / "entry_points.txt").write_text("")
    plugins.entry_points_of.cache_clear()
    with pytest.raises(
        ConfigError, match=r"'wrong' \(twin_world:not_a_registration\) names a int, not an"
    ):
        get_world_plugin("wrong")
    with pytest.raises(
        ConfigError,
        match=r"'gone' \(no_such_module:registration\) cannot be loaded: ModuleNotFoundError",
    ):
        get_world_plugin("gone")


def test_reports_list_a_worlds_categories_in_its_order_and_others_by_name() -> None:
    from eval_pipeline.world.label.versions import CATEGORIES

    present = {"adversarial", "royalty_math", "zebra_facts", "catalog_lookup", "arith"}
    assert world.ordered_categories(present) == [
        "catalog_lookup",
        "royalty_math",
        "adversarial",  # the label world's order
        "arith",
        "zebra_facts",  # a dataset's own, by name
    ]
    assert world.world_registration("label").categories == CATEGORIES


@pytest.mark.parametrize("categories", [("Bad Name",), ("a", "a"), ("1st",)])
def test_a_registration_with_categories_that_are_not_distinct_names_is_refused(
    categories: tuple[str, ...],
) -> None:
    with pytest.raises(ConfigError, match="categories must be distinct names"):
        WorldRegistration(
            config_model=lambda: FrozenRecord,
            plugin_for=lambda config: LabelWorld(),
            generator_version="x-1",
            suite_version="x-suite-1",
            categories=categories,
        )


def test_nothing_outside_the_label_world_imports_it() -> None:
    """The pipeline reaches the label world only through its entry point, as any world: a
    module outside `world/label/` that imported it would work for the label world alone."""

    from eval_pipeline_tests.imports import PACKAGE, package_imports, within

    label = PACKAGE / "world" / "label"
    offenders = [
        str(found)
        for found in package_imports()
        if not found.file.is_relative_to(label)
        and within(found.module, "eval_pipeline.world.label")
        and within(found.module, "eval_pipeline.world.label")
    ]
    assert offenders == []
