"""The dataset world (issue 27, item 2): a user's own cases from a JSONL or CSV file and
tools as Python callables, frozen and fingerprinted like any world; a row that cannot be
read is one error naming the file, the row and the field."""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipeline.errors import ConfigError, WorldError
from eval_pipeline.world import load_world_config, plugin_for_config
from eval_pipeline.world.dataset.cases import read_case_file
from eval_pipeline.world.dataset.plugin import DatasetWorld

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "arith"


@pytest.fixture(autouse=True)
def _fresh_tool_modules(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test's tools module is its own (`my_tools` in its tmp folder)."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield
    sys.modules.pop("my_tools", None)


def _world_folder(tmp_path: Path, cases: str, tools: str = "", extra: str = "") -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "cases.jsonl").write_text(cases, encoding="utf-8")
    (tmp_path / "my_tools.py").write_text(
        textwrap.dedent(
            '''
            def add(a: int, b: int) -> int:
                """Add two integers."""
                return a + b

            def pay(to: str, cents: int) -> dict:
                """Send money (must never run in an eval)."""
                raise AssertionError("a write tool ran")

            def divide(a: int, b: int) -> float:
                """Divide a by b."""
                return a / b
            '''
        ),
        encoding="utf-8",
    )
    (tmp_path / "world.yaml").write_text(
        f"plugin: dataset\nname: mine\ncases: cases.jsonl\n{tools}{extra}", encoding="utf-8"
    )
    return tmp_path / "world.yaml"


ONE = '{"id": "a1", "prompt": "What is 2 + 3?", "expected": "5", "kind": "integer"}\n'


def test_the_example_builds_a_world_whose_suite_is_its_file_and_its_answers_in_truth() -> None:
    config = load_world_config(EXAMPLE / "world.yaml")
    plugin = plugin_for_config(config)
    world = plugin.generate(config.seed, config.scale)
    answer_key = plugin.answer_key(world)
    cases = plugin.build_suite(world, answer_key)

    assert [c.case_id for c in cases] == [
        "add-small",
        "add-large",
        "add-zero",
        "times-twelve",
        "sum-is-even",
    ]
    assert {c.category for c in cases} == {"addition", "multiplication", "reasoning"}
    assert all(c.prompt.splitlines()[-1].startswith("End with one line: ANSWER:") for c in cases)
    # What an agent may read (the world tables) holds no expected answer.
    visible = json.dumps([t.to_dicts() for t in world.tables.values()])
    assert "145868" not in visible and "145868" in json.dumps(
        answer_key.tables["expected_answers"].to_dicts()
    )
    # Read back from storage, the same world and suite.
    again = plugin.world_from_tables(world.seed, world.scale, dict(world.tables))
    assert again.fingerprint == world.fingerprint
    assert (
        plugin.build_suite(again, plugin.answer_key_from_tables(again, dict(answer_key.tables)))
        == cases
    )
    assert plugin.tool_specs()[0]["input_schema"]["properties"] == {
        "a": {"type": "integer"},
        "b": {"type": "integer"},
    }


def test_a_changed_byte_of_the_case_file_is_a_new_world_and_a_stale_answer_key(
    tmp_path: Path,
) -> None:
    config_path = _world_folder(tmp_path, ONE)
    config = load_world_config(config_path)
    plugin = plugin_for_config(config)
    first = plugin.generate(0, 1.0)
    (tmp_path / "cases.jsonl").write_text(ONE.replace('"5"', '"6"'), encoding="utf-8")
    second = plugin.generate(0, 1.0)
    assert first.fingerprint != second.fingerprint
    with pytest.raises(WorldError, match="changed since its world was made"):
        plugin.answer_key(first)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            '{"id": "a2", "prompt": "p", "expected": "five", "kind": "integer"}',
            r"cases.jsonl:2: expected: 'five' cannot be read as a integer",
        ),
        (
            '{"id": "a2", "prompt": "p", "expected": "5", "kind": "number"}',
            r"(?s)cases.jsonl:2:.*kind: Input should be",
        ),
        (
            '{"id": "a2", "prompt": "p", "expected": "5"}',
            r"(?s)cases.jsonl:2:.*kind: Field required",
        ),
        (
            '{"id": "a1", "prompt": "p", "expected": "5", "kind": "integer"}',
            r"cases.jsonl:2: id 'a1' is also the id of row 1",
        ),
        (
            '{"id": "a2", "prompt": "p", "expected": "5", "kind": "integer", "colour": 1}',
            r"(?s)cases.jsonl:2:.*colour: Extra inputs",
        ),
        (
            '{"id": "a2", "prompt": "p", "expected": "5", "kind": "integer", '
            '"category": "Big Sums"}',
            r"(?s)cases.jsonl:2:.*category: Value error",
        ),
        ("[1, 2]", r"cases.jsonl:2: not a JSON object"),
        ('{"id": "a2", "prompt": ', r"cases.jsonl:2: not a JSON object"),
    ],
)
def test_a_row_that_cannot_be_read_names_the_file_row_and_field(
    tmp_path: Path, line: str, message: str
) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_text(ONE + line + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        read_case_file(path)


def test_a_csv_file_reads_as_the_same_cases_as_its_jsonl(tmp_path: Path) -> None:
    jsonl = tmp_path / "cases.jsonl"
    jsonl.write_text(
        ONE.replace(
            "}",
            ', "core": true, "category": "sums", '
            '"expected_first_call": {"name": "add", "arguments": {"a": 2, "b": 3}}}',
        ),
        encoding="utf-8",
    )
    csv_file = tmp_path / "cases.csv"
    csv_file.write_text(
        "id,prompt,expected,kind,category,core,expected_first_call\n"
        "a1,What is 2 + 3?,5,integer,sums,true,"
        '"{""name"": ""add"", ""arguments"": {""a"": 2, ""b"": 3}}"\n',
        encoding="utf-8",
    )
    from_csv = read_case_file(csv_file)[1]
    from_jsonl = read_case_file(jsonl)[1]
    same = {"resolver": "", "params": {}}
    assert [c.model_copy(update=same) for c in from_csv] == [
        c.model_copy(update=same) for c in from_jsonl
    ]
    assert from_csv[0].core and from_csv[0].expected_first_call is not None


def test_tools_come_from_their_signatures_and_a_write_is_recorded_never_run(tmp_path: Path) -> None:
    config_path = _world_folder(
        tmp_path,
        ONE,
        tools="tools:\n  - function: my_tools:add\n  - function: my_tools:pay\n    write: true\n"
        "  - function: my_tools:divide\n",
    )
    plugin = plugin_for_config(load_world_config(config_path))
    specs = {spec["name"]: spec for spec in plugin.tool_specs()}
    assert specs["pay"]["input_schema"]["required"] == ["to", "cents"]
    assert specs["add"]["description"] == "Add two integers."
    with plugin.open_toolbox(tmp_path / "unused.duckdb") as toolbox:
        assert toolbox.execute("add", '{"a": 2, "b": 3}').text == "5"
        paid = toolbox.execute("pay", '{"to": "x", "cents": 100}')
        assert not paid.is_error and paid.write is not None and toolbox.writes[0]["cents"] == 100
        broken = toolbox.execute("divide", '{"a": 1, "b": 0}')
        assert broken.is_error and "ZeroDivisionError" in broken.text
        off_schema = toolbox.execute("add", '{"a": "two", "b": 3}')
        assert off_schema.error_kind == "bad_arguments"


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ("tools:\n  - function: no_such_module:add\n", r"cannot import 'no_such_module'"),
        ("tools:\n  - function: my_tools:subtract\n", r"has no callable 'subtract'"),
        ("tools:\n  - function: my_tools.add\n", r"not an import path"),
        (
            "tools:\n  - function: my_tools:add\n  - function: my_tools:add\n",
            r"second tool named 'add'",
        ),
    ],
)
def test_a_tool_that_cannot_be_loaded_names_the_config_entry(
    tmp_path: Path, tools: str, message: str
) -> None:
    config_path = _world_folder(tmp_path, ONE, tools=tools)
    with pytest.raises(ConfigError, match=message):
        plugin_for_config(load_world_config(config_path)).tool_specs()


def test_a_dataset_world_without_its_config_cannot_generate() -> None:
    with pytest.raises(WorldError, match="needs its config"):
        DatasetWorld().generate(0, 1.0)


def test_the_world_config_version_follows_the_case_file_and_the_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from eval_pipeline.config_versions import config_version

    folder = tmp_path / "arith"
    shutil.copytree(EXAMPLE, folder)
    monkeypatch.setenv("EVALP_WORLD_CONFIG", str(folder / "world.yaml"))
    before = config_version("world_config")
    (folder / "cases.jsonl").write_text(
        (folder / "cases.jsonl").read_text().replace('"42"', '"43"'), encoding="utf-8"
    )
    after_cases = config_version("world_config")
    (folder / "arith_tools.py").write_text(
        (folder / "arith_tools.py").read_text() + "\n# edited\n", encoding="utf-8"
    )
    after_tools = config_version("world_config")
    assert len({before, after_cases, after_tools}) == 3


def test_a_tools_module_of_the_same_name_loaded_from_elsewhere_is_an_error_not_used(
    tmp_path: Path,
) -> None:
    tools = "tools:\n  - function: my_tools:add\n"
    first = _world_folder(tmp_path / "one", ONE, tools=tools)
    second = _world_folder(tmp_path / "two", ONE, tools=tools)
    assert plugin_for_config(load_world_config(first)).tool_specs()
    with pytest.raises(ConfigError, match=r"module 'my_tools' is already loaded from .*one"):
        plugin_for_config(load_world_config(second)).tool_specs()
