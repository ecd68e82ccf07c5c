"""The simulated agents never reach the world or the answer key: everything they know comes
from the conversation.

Three proofs: their modules import nothing of the world, the lanes, the warehouse, paths,
duckdb or polars (read from the source, and checked in a fresh interpreter); and a sim
started in an empty directory with every ``EVALP_*`` location pointing nowhere still solves
cases when this test feeds it tool results, while an audit hook in its process records that
deciding its replies opened no file, listed no directory and imported no module.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import openai
import pytest

import eval_pipeline.sim.profiles as profiles_package
from eval_pipeline.sim.process import running_sim
from eval_pipeline.world.label.toolbox import LabelToolbox
from eval_pipeline_tests.sim.agent_driver import Driver
from eval_pipeline_tests.sim.conftest import SmallLabelWorld
from eval_pipeline_tests.sim.helpers import AGENT_FORBIDDEN_MODULES, FAKE_KEY
from eval_pipeline_tests.sim.test_agents_solve import right_ids

AGENT_MODULES = ("label_agents", "_label_plans", "_agent_runtime")
LOCATION_VARIABLES = (
    "EVALP_HOME",
    "EVALP_WAREHOUSE",
    "EVALP_WORLD_CONFIG",
    "EVALP_MODELS_DIR",
    "EVALP_PRICES",
    "EVALP_FIXTURES_ROOT",
)


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_agent_modules_import_nothing_of_the_world_lanes_or_warehouse() -> None:
    folder = Path(profiles_package.__file__).parent
    for module in AGENT_MODULES:
        imports = _imports(folder / f"{module}.py")
        assert imports, module
        bad = sorted(i for i in imports if i.startswith((*AGENT_FORBIDDEN_MODULES, "pathlib")))
        assert not bad, f"{module} imports {bad}"
        for name in imports:
            assert name.startswith(("eval_pipeline.sim", "eval_pipeline.records")) or (
                not name.startswith("eval_pipeline")
            ), f"{module} imports {name}"


def test_agent_modules_load_no_forbidden_module_in_a_fresh_interpreter() -> None:
    code = (
        "import sys, json\n"
        "import eval_pipeline.sim.profiles.label_agents\n"
        f"prefixes = {AGENT_FORBIDDEN_MODULES!r}\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(prefixes))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(out.stdout) == []


def test_a_sim_with_no_world_within_reach_still_solves_cases_from_tool_results(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    label_toolbox: LabelToolbox,
    small_label_world: SmallLabelWorld,
) -> None:
    empty = tmp_path / "cwd"
    empty.mkdir()
    monkeypatch.chdir(empty)
    for name in LOCATION_VARIABLES:
        monkeypatch.setenv(name, str(tmp_path / "nowhere" / name.lower()))
    cases = list({c.template: c for c in small_label_world.cases}.values())
    with running_sim(plugins=["eval_pipeline_tests.sim.audit_plugin"]) as sim:
        driver = Driver(sim, label_toolbox, "sim-strong")
        try:
            runs = driver.run_all(cases)
        finally:
            driver.close()
        with openai.OpenAI(base_url=sim.openai_base_url, api_key=FAKE_KEY) as client:
            reply = client.chat.completions.create(
                model="sim-audit", messages=[{"role": "user", "content": "audit"}]
            )
    assert right_ids(cases, runs) == {c.case_id for c in cases}
    audit = json.loads(reply.choices[0].message.content or "{}")
    assert audit["replies"] >= 2 * len(cases), "the agent's replies were decided under audit"
    assert audit["forbidden_loaded"] == []
    assert audit["opened"] == [], "deciding replies opened files"
    assert audit["listed"] == []
    assert audit["imported"] == [], "deciding replies imported modules"
