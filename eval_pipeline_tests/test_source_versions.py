"""Code versions follow the source: an asset's version moves when any module it runs is
edited, and only then (issue 26: `scores-1` stood unchanged across 13 scoring commits)."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from eval_pipeline import source_versions
from eval_pipeline.defs.code_versions import asset_code_version
from eval_pipeline.paths import PROJECT_ROOT
from eval_pipeline.source_versions import (
    PACKAGE_DIR,
    SourceVersionError,
    _imported,
    import_closure,
    plugin_source_version,
    source_version,
)


def _package(root: Path, modules: dict[str, str]) -> Path:
    """A package named like ours (`eval_pipeline`) under `root`, from dotted names."""
    package = root / "eval_pipeline"
    for name, text in {"__init__": "", **modules}.items():
        file = package.joinpath(*name.split(".")).with_suffix(".py")
        file.parent.mkdir(parents=True, exist_ok=True)
        for parent in file.relative_to(package).parents:
            (package / parent / "__init__.py").touch()
        file.write_text(text)
    return package


MODULES = {
    "stage.adapter": "import os\n\ndef compute():\n    from eval_pipeline.domain import rules\n"
    "    return rules.apply()\n",
    "domain.rules": "from .helpers import halve\n\ndef apply():\n    return halve(4)\n",
    "domain.helpers": "def halve(x):\n    return x / 2\n",
    "domain.unrelated": "def other():\n    return 1\n",
    "plain": "from eval_pipeline.domain.helpers import halve as h\n",
    "aliased": "import eval_pipeline.domain.unrelated as u\n",
}


def test_the_closure_follows_function_level_relative_and_from_imports_and_nothing_else(
    tmp_path: Path,
) -> None:
    package = _package(tmp_path, MODULES)
    closure = import_closure(["eval_pipeline.stage.adapter"], package)
    assert list(closure) == [
        "eval_pipeline",
        "eval_pipeline.domain",
        "eval_pipeline.domain.helpers",
        "eval_pipeline.domain.rules",
        "eval_pipeline.stage",
        "eval_pipeline.stage.adapter",
    ]
    assert closure["eval_pipeline.domain.rules"] == package / "domain" / "rules.py"
    assert "eval_pipeline.domain.helpers" in import_closure(["eval_pipeline.plain"], package)
    assert "eval_pipeline.domain.unrelated" in import_closure(["eval_pipeline.aliased"], package)


def test_a_closure_asks_about_each_imported_name_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`from eval_pipeline.domain.helpers import halve` names a function, not a module: two
    modules importing it made the walk look the name up twice (every asset's closure at
    every definitions load asked about 800 times instead of about 200)."""
    package = _package(
        tmp_path,
        {
            **MODULES,
            "domain.rules": "from .helpers import halve\nfrom eval_pipeline.plain import h\n",
            "domain.more": "from eval_pipeline.domain.helpers import halve\n",
            "stage.adapter": "from eval_pipeline.domain import rules, more\n",
        },
    )
    asked: list[str] = []
    real = source_versions.module_file

    def counting(name: str, package_dir: Path = PACKAGE_DIR) -> Path | None:
        asked.append(name)
        return real(name, package_dir)

    monkeypatch.setattr(source_versions, "module_file", counting)
    closure = import_closure(["eval_pipeline.stage.adapter"], package)
    assert "eval_pipeline.domain.helpers.halve" in asked
    assert "eval_pipeline.domain.helpers" in closure
    walked = asked[1:]  # after the root's own check
    assert len(walked) == len(set(walked)), sorted(n for n in set(walked) if walked.count(n) > 1)


def test_editing_a_function_two_imports_away_moves_the_version_and_an_unrelated_edit_does_not(
    tmp_path: Path,
) -> None:
    package = _package(tmp_path, MODULES)
    before = source_version("eval_pipeline.stage.adapter", package_dir=package)
    assert before == source_version("eval_pipeline.stage.adapter", package_dir=package)
    assert len(before) == 16 and int(before, 16) >= 0

    (package / "domain" / "unrelated.py").write_text("def other():\n    return 2\n")
    assert source_version("eval_pipeline.stage.adapter", package_dir=package) == before

    (package / "domain" / "helpers.py").write_text("def halve(x):\n    return x / 3\n")
    after = source_version("eval_pipeline.stage.adapter", package_dir=package)
    assert after != before
    # the version is of the bytes, not of the moment: undoing the edit restores it
    (package / "domain" / "helpers.py").write_text("def halve(x):\n    return x / 2\n")
    assert source_version("eval_pipeline.stage.adapter", package_dir=package) == before


def test_a_root_that_is_not_a_module_of_the_package_is_refused_naming_it(tmp_path: Path) -> None:
    package = _package(tmp_path, MODULES)
    with pytest.raises(SourceVersionError, match=r"'eval_pipeline.stage.missing' is not a module"):
        source_version("eval_pipeline.stage.missing", package_dir=package)
    with pytest.raises(SourceVersionError, match=r"'json' is not a module of the eval_pipeline"):
        import_closure(["json"], package)


def test_the_asset_graph_declares_each_stage_at_its_adapters_source_version() -> None:
    from eval_pipeline.definitions import defs

    graph = defs.resolve_asset_graph()
    versions = {
        key.to_user_string(): graph.get(key).code_version
        for key in graph.get_all_asset_keys()
        if graph.get(key).is_materializable
    }
    scores = asset_code_version("scores", "eval_pipeline.defs.score_assets")
    assert versions["model_lane_scores"] == versions["product_lane_scores"] == scores
    assert versions["sweep_summary"] == scores
    assert versions["ship_gate"] == asset_code_version("gate", "eval_pipeline.defs.score_assets")
    assert versions["model_lane_runs"] == asset_code_version(
        "lanes", "eval_pipeline.defs.lane_assets"
    )
    assert all("@" in version for version in versions.values() if version), versions


GRAPH_VERSIONS = (
    "import json\n"
    "from eval_pipeline.definitions import defs\n"
    "g = defs.resolve_asset_graph()\n"
    "print(json.dumps({k.to_user_string(): g.get(k).code_version\n"
    "    for k in g.get_all_asset_keys() if g.get(k).is_materializable}))\n"
)


def _graph_versions(project: Path) -> dict[str, str]:
    """The code versions of the asset graph that `project`'s copy of the package loads."""
    env = {**os.environ, "PYTHONPATH": str(project)}
    done = subprocess.run(
        [sys.executable, "-c", GRAPH_VERSIONS],
        cwd=project, env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    loaded_from = subprocess.run(
        [sys.executable, "-c", "import eval_pipeline; print(eval_pipeline.__file__)"],
        cwd=project, env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert Path(loaded_from).is_relative_to(project), loaded_from
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.slow
def test_halving_every_score_in_a_copy_of_the_source_makes_the_scores_and_what_follows_stale(
    tmp_path: Path,
) -> None:
    """The edit issue 26 made (every score halved in `scoring/score.py`) moves the code
    version of every asset that runs the scorer, as the definitions load it; before, the
    scores stayed `scores-1` and the demo printed the old headline as current."""
    project = tmp_path / "project"
    for part in ("eval_pipeline", "configs", "data"):
        shutil.copytree(
            PROJECT_ROOT / part, project / part, ignore=shutil.ignore_patterns("__pycache__")
        )
    before = _graph_versions(project)
    scorer = project / "eval_pipeline" / "scoring" / "score.py"
    text = scorer.read_text()
    assert text.count("score=min(tiers),") == 1
    scorer.write_text(text.replace("score=min(tiers),", "score=min(tiers) / 2,"))
    after = _graph_versions(project)
    assert before.keys() == after.keys()
    moved = {key for key in before if before[key] != after[key]}
    assert {"model_lane_scores", "product_lane_scores", "sweep_summary", "ship_gate"} <= moved


@pytest.mark.slow
def test_editing_the_label_worlds_code_makes_the_world_and_its_fixtures_stale(
    tmp_path: Path,
) -> None:
    """The world assets reach the label world through its entry point, not an import: its
    source is hashed as a plugin's, so an edit to its suite moves their code versions with
    no version string bumped."""
    project = tmp_path / "project"
    for part in ("eval_pipeline", "configs", "data"):
        shutil.copytree(
            PROJECT_ROOT / part, project / part, ignore=shutil.ignore_patterns("__pycache__")
        )
    before = _graph_versions(project)
    templates = project / "eval_pipeline" / "world" / "label" / "suite" / "templates.py"
    templates.write_text(templates.read_text() + "\n# an edit to how questions are asked\n")
    after = _graph_versions(project)
    moved = {key for key in before if before[key] != after[key]}
    assert {"world", "answer_key", "fixtures"} <= moved
    # no string was bumped: the label world's versions are the same beside every other world's
    assert "label-3/label-suite-4" in after["fixtures"].split("@")[0].split("+")


def test_a_plugins_source_version_covers_its_whole_package_or_its_lone_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "their_world"
    (package / "inner").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "entry.py").write_text("registration = None\n")
    (package / "inner" / "rules.py").write_text("RATE = 1\n")
    (tmp_path / "lone_world.py").write_text("registration = None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    whole = plugin_source_version("their_world.entry")
    lone = plugin_source_version("lone_world")
    (package / "inner" / "rules.py").write_text("RATE = 2\n")
    assert plugin_source_version("their_world.entry") != whole
    assert plugin_source_version("lone_world") == lone
    with pytest.raises(SourceVersionError, match="no_such_world"):
        plugin_source_version("no_such_world")


def _imports_by_syntax(name: str, file: Path) -> set[str]:
    """The same question answered from the syntax tree: what the text reading must match."""
    is_package = file.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(file.read_bytes())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            anchor = name.split(".")
            if node.level:
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, node.module] if node.module else anchor)
            else:
                base = node.module or ""
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    modules = {m for m in found if m.split(".")[0] == "eval_pipeline"}
    parts = {".".join(m.split(".")[:i]) for m in modules for i in range(1, m.count(".") + 1)}
    return (modules | parts) - {name}


def test_reading_imports_as_text_finds_what_the_syntax_tree_finds_in_every_module() -> None:
    files = sorted(PACKAGE_DIR.rglob("*.py"))
    assert len(files) > 100
    for file in files:
        parts = file.relative_to(PACKAGE_DIR).with_suffix("").parts
        name = ".".join(("eval_pipeline", *parts)).removesuffix(".__init__")
        assert _imported(name, file) == _imports_by_syntax(name, file), file
