"""Reading the YAML configs: libyaml's loader gives what PyYAML's pure loader gives, and a
broken or missing file is named with where it breaks."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from eval_pipeline.config import ConfigError, read_yaml

REPO = Path(__file__).resolve().parents[1]
SHIPPED = sorted((REPO / "configs").rglob("*.yaml"))


def test_every_shipped_config_reads_as_the_pure_python_loader_reads_it() -> None:
    assert len(SHIPPED) >= 10
    for path in SHIPPED:
        assert read_yaml(path) == yaml.safe_load(path.read_text(encoding="utf-8")), path


def test_a_broken_file_is_named_with_its_line(tmp_path: Path) -> None:
    broken = tmp_path / "model.yaml"
    broken.write_text("name: m\nprices:\n  input: [1, 2\nprovider: x\n", encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        read_yaml(broken)
    message = str(raised.value)
    assert message.startswith(f"config file {broken} is not valid YAML: ")
    assert "line 4" in message


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=f"config file not found: {tmp_path / 'none.yaml'}"):
        read_yaml(tmp_path / "none.yaml")


def test_yaml_tags_that_build_python_objects_are_refused(tmp_path: Path) -> None:
    hostile = tmp_path / "hostile.yaml"
    hostile.write_text("!!python/object/apply:os.system ['true']\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="is not valid YAML"):
        read_yaml(hostile)
