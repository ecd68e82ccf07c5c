"""Mutation testing of one core module against its own tests (mutmut 3).

    ./dev mutate NAME [--max-children N] [--tree PATH] [--quiet]
    ./dev mutate --list
    ./dev mutate NAME --check MUTANT [TEST ...]

NAME is a table under ``[tool.evalp.mutate]`` in pyproject.toml: the module to mutate and
the test files that are its own tests. Each module runs in its own work folder,
``.mutmut/NAME/``, with a pyproject.toml that is the project's own plus that module's
``only_mutate`` and ``pytest_add_cli_args_test_selection`` under ``[tool.mutmut]`` (mutmut
reads its config from the working directory's pyproject.toml only). So each module keeps
its own mutmut cache and test-to-function map, and a kill is credited only to that
module's own tests, never to a test elsewhere that happens to share a session fixture.

The score is killed / (mutants - equivalent). Equivalent mutants are listed, each with a
one-line reason, in the table of ``bench/mutation.md`` (rows ``| `mutant` | reason |``);
a listed mutant that is killed is reported as stale. Exits 1 when a mutant survives that is
not listed as equivalent or the score is under the goal, 2 when mutmut itself fails.

``--check MUTANT TEST...`` runs the given tests (the module's own by default) against one
mutant of the last run, in its mutants/ folder: the way to show that a new test is the one
that kills a survivor. Exits 0 when the tests fail (the mutant is killed), 1 when they pass.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "bench" / "mutation.md"
GOAL = 0.90
LINKED = (
    "eval_pipeline",
    "eval_pipeline_tests",
    "configs",
    "data",
    "docs",
    "deploy",
    "README.md",
    "workspace.yaml",
)
"""What a work folder links to in the tree (mutmut copies them into its mutants/ folder)."""
STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 34: "skipped"}
TIMEOUTS = {36, -24, 24, 152, 255}
EQUIVALENT_ROW = re.compile(r"^\|\s*`([^`]+__mutmut_\d+)`\s*\|(.+)\|\s*$")


@dataclass(frozen=True)
class Target:
    name: str
    module: str
    tests: tuple[str, ...]
    mutants: tuple[str, ...] = ()
    """Globs of mutant names to run (all of the module's when empty)."""


@dataclass
class Score:
    name: str
    module: str
    total: int = 0
    killed: int = 0
    equivalent: list[str] = field(default_factory=list)
    survived: list[str] = field(default_factory=list)
    timeout: list[str] = field(default_factory=list)
    untested: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)

    @property
    def counted(self) -> int:
        return self.total - len(self.equivalent)

    @property
    def ratio(self) -> float:
        return self.killed / self.counted if self.counted else 1.0

    def line(self) -> str:
        return (
            f"{self.name} ({self.module}): {self.killed}/{self.counted} killed "
            f"({self.ratio:.1%}; {self.total} mutants, {len(self.equivalent)} equivalent; "
            f"{len(self.survived)} survived, {len(self.timeout)} timeout, "
            f"{len(self.untested)} no tests or not checked)"
        )


def pyproject(tree: Path) -> dict[str, Any]:
    with (tree / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)


def targets(tree: Path) -> dict[str, Target]:
    table = pyproject(tree).get("tool", {}).get("evalp", {}).get("mutate", {})
    return {
        name: Target(
            name=name,
            module=spec["module"],
            tests=tuple(spec["tests"]),
            mutants=tuple(spec.get("mutants", ())),
        )
        for name, spec in table.items()
    }


def equivalents(report: Path) -> dict[str, str]:
    """Mutant name -> reason, from the equivalent-mutant table rows of the report."""
    if not report.exists():
        return {}
    rows = (EQUIVALENT_ROW.match(line) for line in report.read_text("utf-8").splitlines())
    return {m.group(1): m.group(2).strip() for m in rows if m}


def toml_list(values: tuple[str, ...]) -> str:
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"


def prepare(tree: Path, target: Target) -> Path:
    """The module's work folder: links into the tree and a pyproject.toml for this module."""
    work = tree / ".mutmut" / target.name
    work.mkdir(parents=True, exist_ok=True)
    for name in LINKED:
        link = work / name
        if not link.is_symlink() and not link.exists():
            link.symlink_to(tree / name)
    text = (tree / "pyproject.toml").read_text("utf-8")
    header = "[tool.mutmut]\n"
    if text.count(header) != 1:
        raise SystemExit("pyproject.toml needs exactly one [tool.mutmut] table")
    own = (
        f"{header}only_mutate = {toml_list((target.module,))}\n"
        f"pytest_add_cli_args_test_selection = {toml_list(target.tests)}\n"
    )
    config = work / "pyproject.toml"
    wanted = text.replace(header, own)
    if not config.exists() or config.read_text("utf-8") != wanted:
        config.write_text(wanted, "utf-8")
    return work


def unkilled(work: Path, target: Target) -> list[str]:
    """The mutants of the last run that were not killed (to run again after new tests)."""
    meta = work / "mutants" / (target.module + ".meta")
    if not meta.exists():
        return []
    exit_codes: dict[str, int | None] = json.loads(meta.read_text("utf-8"))["exit_code_by_key"]
    return sorted(
        mutant
        for mutant, code in exit_codes.items()
        if code is None or STATUS.get(code) != "killed"
    )


def run_mutmut(work: Path, target: Target, max_children: int, quiet: bool, names: list[str]) -> int:
    mutmut = Path(sys.executable).parent / "mutmut"
    command = [str(mutmut), "run", "--max-children", str(max_children), *names]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    if quiet:
        done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            sys.stdout.write(done.stdout[-4000:])
            sys.stderr.write(done.stderr[-4000:])
        return done.returncode
    return subprocess.run(command, cwd=work, env=env).returncode


def score(work: Path, target: Target, known: dict[str, str]) -> Score:
    meta = work / "mutants" / (target.module + ".meta")
    result = Score(name=target.name, module=target.module)
    exit_codes: dict[str, int | None] = json.loads(meta.read_text("utf-8"))["exit_code_by_key"]
    for mutant, code in sorted(exit_codes.items()):
        if target.mutants and not any(fnmatch(mutant, glob) for glob in target.mutants):
            continue
        result.total += 1
        if code is None:
            status = "not checked"
        else:
            status = STATUS.get(code, "timeout" if code in TIMEOUTS else "suspicious")
        if mutant in known:
            result.equivalent.append(mutant)
            if status == "killed":
                result.stale.append(mutant)
        elif status == "killed":
            result.killed += 1
        elif status == "timeout":
            result.timeout.append(mutant)
        elif status in ("no tests", "not checked"):
            result.untested.append(mutant)
        else:
            result.survived.append(mutant)
    # A listed mutant that the tests now kill counts as killed, not as equivalent.
    result.killed += len(result.stale)
    result.equivalent = [m for m in result.equivalent if m not in result.stale]
    return result


def show(work: Path, mutants: list[str]) -> None:
    mutmut = Path(sys.executable).parent / "mutmut"
    for mutant in mutants:
        diff = subprocess.run(
            [str(mutmut), "show", mutant], cwd=work, capture_output=True, text=True
        ).stdout
        print(diff.rstrip())


def check(work: Path, target: Target, mutant: str, tests: list[str]) -> int:
    """Run `tests` against one mutant; 0 when they fail (killed), 1 when they pass."""
    mutants = work / "mutants"
    if not mutants.is_dir():
        print(f"no mutants in {work}: run `./dev mutate {target.name}` first")
        return 2
    known = json.loads((mutants / (target.module + ".meta")).read_text("utf-8"))
    if mutant not in known["exit_code_by_key"]:  # an unknown name would run the original
        print(f"{mutant} is not a mutant of {target.module} (see `mutmut results` in {work})")
        return 2
    env = {**os.environ, "MUTANT_UNDER_TEST": mutant, "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
    done = subprocess.run([*command, *(tests or target.tests)], cwd=mutants, env=env)
    verdict = "killed" if done.returncode == 1 else "not killed"
    print(
        f"{mutant}: {verdict} by {' '.join(tests or target.tests)} (pytest exit {done.returncode})"
    )
    return 0 if done.returncode == 1 else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="./dev mutate", description=__doc__.split("\n")[0])
    parser.add_argument("name", nargs="?", help="a module under [tool.evalp.mutate]")
    parser.add_argument("--list", action="store_true", help="list the modules and their tests")
    parser.add_argument("--max-children", type=int, default=1, help="mutmut workers (1)")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the source tree to mutate")
    parser.add_argument("--quiet", action="store_true", help="print mutmut's output on failure")
    parser.add_argument("--no-diffs", action="store_true", help="do not show survivors' diffs")
    parser.add_argument("--check", metavar="MUTANT", help="run tests against this mutant")
    parser.add_argument(
        "--rerun", action="store_true", help="run the last run's surviving mutants again"
    )
    parser.add_argument("tests", nargs="*", help="with --check: the tests to run")
    args = parser.parse_intermixed_args(argv)
    tree: Path = args.tree.resolve()
    known_targets = targets(ROOT)
    if args.list or not args.name:
        for target in known_targets.values():
            print(f"{target.name}: {target.module} <- {' '.join(target.tests)}")
        return 0 if args.list else 2
    if args.name not in known_targets:
        print(f"unknown module {args.name!r}; known: {', '.join(known_targets)}")
        return 2
    target = known_targets[args.name]
    if args.check:
        return check(tree / ".mutmut" / target.name, target, args.check, args.tests)
    work = prepare(tree, target)
    names = list(target.mutants)
    if args.rerun:
        # mutmut keeps a cached verdict unless the mutant is named: name the survivors.
        names = unkilled(work, target)
        if target.mutants:
            names = [n for n in names if any(fnmatch(n, glob) for glob in target.mutants)]
        if not names:
            names = list(target.mutants)
    code = run_mutmut(work, target, args.max_children, args.quiet, names)
    if code != 0:
        print(f"mutmut run exited {code} in {work}")
        return 2
    result = score(work, target, equivalents(REPORT))
    unexplained = result.survived + result.timeout + result.untested
    if unexplained and not args.no_diffs:
        print("Survivors not listed as equivalent in bench/mutation.md:")
        show(work, unexplained)
    for mutant in result.stale:
        print(f"listed as equivalent but killed (remove it from bench/mutation.md): {mutant}")
    print(result.line())
    return 0 if not unexplained and result.ratio >= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
