"""`EVALP_MODELS_DIR` adds a user's model configs to the shipped ones (issue 28): it used to
replace the whole folder, so a folder with only your own model lost the judge's config and
the sweep failed with an error that did not say the judge needed it."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipeline.errors import ConfigError
from eval_pipeline.paths import CONFIGS_DIR
from eval_pipeline.project_configs import scan_model_configs
from eval_pipeline.scoring.judge import load_judge

MINE = "name: mine\napi: openai_compatible\nprovider: local\nmodel: my-model\n"


def test_a_folder_with_only_your_model_keeps_the_shipped_ones_and_the_judge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "mine.yaml").write_text(MINE)
    monkeypatch.setenv("EVALP_MODELS_DIR", str(tmp_path))
    scan = scan_model_configs()
    judge = load_judge()
    configs = scan.require(["mine", judge.model, "sim-strong"])
    assert configs["mine"].model == "my-model"
    shipped = scan_model_configs(CONFIGS_DIR / "models").configs
    assert set(shipped) | {"mine"} == set(scan.configs)
    assert scan.directories == (CONFIGS_DIR / "models", tmp_path.resolve())


def test_a_file_named_as_a_shipped_one_replaces_it_and_a_clashing_name_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shipped = (CONFIGS_DIR / "models" / "sim-strong.yaml").read_text()
    (tmp_path / "sim-strong.yaml").write_text(shipped.replace("timeout_s:", "timeout_s: 7 #"))
    monkeypatch.setenv("EVALP_MODELS_DIR", str(tmp_path))
    assert scan_model_configs().configs["sim-strong"].timeout_s == 7
    (tmp_path / "another-strong.yaml").write_text(shipped)  # a second file named sim-strong
    with pytest.raises(ConfigError, match="model config name 'sim-strong' is used twice"):
        scan_model_configs()
