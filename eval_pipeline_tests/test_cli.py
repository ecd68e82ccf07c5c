"""The `evalp` command as a newcomer meets it: help, world, fixtures freeze/verify, errors."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
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


@pytest.mark.parametrize("scale", ["-1", "101"])
def test_world_with_a_scale_out_of_the_worlds_range_names_the_flag(scale: str) -> None:
    """The range is the label world's (its registration's largest scale, 100)."""
    code, _, err = invoke("world", "--scale", scale)
    assert code == 2
    assert "'--scale'" in err and f"{scale} is not in the range 0<x<=100" in err


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


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`evalp <args>` as a user runs it: a real process, its real stderr."""
    return subprocess.run(
        [sys.executable, "-m", "eval_pipeline.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def assert_one_line_error(completed: subprocess.CompletedProcess[str], *named: str) -> str:
    assert completed.returncode == 2, completed.stderr
    assert "Traceback" not in completed.stderr
    lines = completed.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), completed.stderr
    for word in named:
        assert word in lines[0], (word, lines[0])
    return lines[0]


@pytest.fixture
def a_port_in_use() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def test_bad_input_to_every_command_is_one_line_naming_it_with_exit_2(
    tmp_path: Path, a_port_in_use: int
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    cases: list[tuple[tuple[str, ...], tuple[str, ...]]] = [
        (("sim", "serve", "--port", "99999"), ("'--port'", "99999")),
        (("sim", "serve", "--port", str(a_port_in_use)), (str(a_port_in_use), "in use")),
        (("sim", "serve", "--host", "999.1.1.1", "--port", "0"), ("999.1.1.1",)),
        (("sim", "serve", "--port", "0", "--latency-ms", "-5"), ("'--latency-ms'", "-5")),
        (("sim", "serve", "--port", "0", "--seed", "-1"), ("'--seed'", "-1")),
        (("fixtures", "freeze", "--out", str(a_file)), ("'--out'", str(a_file))),
        (("fixtures", "verify", str(tmp_path / "none")), (str(tmp_path / "none"),)),
        (("world", "--config", str(tmp_path / "none.yaml")), ("none.yaml",)),
        (("world", "--seed", "x"), ("'--seed'",)),
        (("ui", "--port", "-5"), ("'--port'",)),
        (("no-such-command",), ("no-such-command",)),
    ]
    for args, named in cases:
        assert_one_line_error(run_cli(*args), *named)


def test_world_seed_flag_is_named_not_the_config_it_overrides() -> None:
    line = assert_one_line_error(run_cli("world", "--seed", "-1"), "'--seed'", "-1")
    assert "label.yaml" not in line


def test_too_small_a_scale_names_scale_and_the_smallest_that_works() -> None:
    line = assert_one_line_error(run_cli("world", "--seed", "3", "--scale", "0.001"), "scale")
    found = re.search(r"the smallest scale that works is ([\d.]+)$", line)
    assert found is not None, line
    smallest = float(found.group(1))
    assert 0.001 < smallest <= 1.0
    works = run_cli("world", "--seed", "3", "--scale", str(smallest))
    assert works.returncode == 0, works.stderr
    just_below = round(smallest - 0.001, 3)
    assert_one_line_error(run_cli("world", "--seed", "3", "--scale", str(just_below)), "scale")
