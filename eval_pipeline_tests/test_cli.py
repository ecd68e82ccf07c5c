"""The `evalp` command as a newcomer meets it: help, world, fixtures freeze/verify, errors."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from eval_pipeline.cli import main


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_help_lists_the_commands() -> None:
    code, out, _ = invoke("--help")
    assert code == 0
    for command in ("demo", "world", "fixtures", "sim"):
        assert command in out


def test_world_prints_row_counts_and_fingerprint() -> None:
    code, out, _ = invoke("world", "--seed", "3", "--scale", "0.02")
    assert code == 0, out
    assert re.search(r"statement_lines\s+[\d,]+ rows", out)
    assert re.search(r"^fingerprint [0-9a-f]{64}$", out, re.MULTILINE)


def test_world_with_negative_scale_names_the_field() -> None:
    code, _, err = invoke("world", "--scale", "-1")
    assert code == 2
    assert "scale" in err and "greater than 0" in err


def test_world_config_with_unknown_currency_names_it(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("plugin: label\nseed: 1\ncurrencies: [USD, XAU]\n")
    code, _, err = invoke("world", "--config", str(config))
    assert code == 2
    assert str(config) in err and "currencies" in err and "XAU" in err


def test_unknown_world_plugin_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("plugin: orchestra\nseed: 1\n")
    code, _, err = invoke("world", "--config", str(config))
    assert code == 2
    assert "orchestra" in err and "label" in err


def test_freeze_then_verify_then_tamper(tmp_path: Path) -> None:
    config = tmp_path / "small.yaml"
    config.write_text("plugin: label\nseed: 5\nscale: 0.02\n")
    code, out, err = invoke("fixtures", "freeze", "--config", str(config), "--out", str(tmp_path))
    assert code == 0, err
    fixture_id = re.search(r"^fixture_id (fx-[0-9a-f]+)$", out, re.MULTILINE)
    assert fixture_id is not None
    folder = tmp_path / fixture_id.group(1)
    code, out, _ = invoke("fixtures", "verify", str(folder))
    assert code == 0 and out.startswith(f"ok {fixture_id.group(1)}")
    cases = folder / "cases.jsonl"
    cases.write_bytes(cases.read_bytes().replace(b"ANSWER:", b"ANSWER :", 1))
    code, _, err = invoke("fixtures", "verify", str(folder))
    assert code == 2
    assert "tampered fixture file" in err and str(cases) in err


def _freeze_in_new_process(config: Path, out: Path, seed: int) -> str:
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "eval_pipeline.cli",
            "fixtures",
            "freeze",
            "--config",
            str(config),
            "--seed",
            str(seed),
            "--out",
            str(out),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    found = re.search(r"^fixture_id (fx-[0-9a-f]+)$", completed.stdout, re.MULTILINE)
    assert found is not None, completed.stdout
    return found.group(1)


def test_fixture_id_is_stable_across_processes_and_follows_the_seed(tmp_path: Path) -> None:
    config = tmp_path / "small.yaml"
    config.write_text("plugin: label\nseed: 5\nscale: 0.02\n")
    first = _freeze_in_new_process(config, tmp_path / "a", seed=5)
    second = _freeze_in_new_process(config, tmp_path / "b", seed=5)
    other = _freeze_in_new_process(config, tmp_path / "c", seed=6)
    assert first == second
    assert other != first
    assert (tmp_path / "a" / first / "cases.jsonl").read_bytes() == (
        tmp_path / "b" / second / "cases.jsonl"
    ).read_bytes()
