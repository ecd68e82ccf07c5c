"""The main job from a fresh state folder, and `evalp audit` on its report.

Runs `evalp demo` in a new EVALP_HOME (warehouse, Dagster home, MLflow store, fixtures
root all new), then reads every run's step statistics from the Dagster instance: the wall
time per step (asset), their sum, and the share of the demo's wall spent outside the
steps (Dagster itself: run and step orchestration, event logging, process start-up and
imports). Then runs `evalp demo` again with nothing changed (everything up to date: it
should only check and report) and times `evalp audit` on the report. Goals: outside the
steps <= 10% of the demo's wall; the second demo <= 30% of the first; the audit <= 10 s.
Exits 1 when a goal is missed; the last line is a summary.

    uv run python bench/demo.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

DAGSTER_SHARE_GOAL = 0.10
AUDIT_GOAL_S = 10.0
SECOND_DEMO_GOAL = 0.30


def main() -> int:
    home = Path(tempfile.mkdtemp(prefix="bench-demo-"))
    env = {
        **os.environ,
        "EVALP_HOME": str(home),
        "EVALP_WAREHOUSE": str(home / "warehouse.duckdb"),
        "EVALP_FIXTURES_ROOT": str(home / "fixtures"),
        "DAGSTER_HOME": str(home / "dagster_home"),
    }
    evalp = [sys.executable, "-m", "eval_pipeline.cli"]
    started = time.perf_counter()
    demo = subprocess.run([*evalp, "demo"], env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if demo.returncode != 0:
        print(demo.stdout[-2000:], demo.stderr[-2000:])
        print(f"summary: the demo failed (exit {demo.returncode})")
        return 1

    os.environ.update(env)
    import dagster as dg

    per_step: dict[str, float] = defaultdict(float)
    with dg.DagsterInstance.get() as instance:
        for run in instance.get_runs():
            for stats in instance.get_run_step_stats(run.run_id):
                if stats.start_time is not None and stats.end_time is not None:
                    key = stats.step_key.split("[")[0]
                    per_step[key] += stats.end_time - stats.start_time
    in_steps = sum(per_step.values())
    outside = max(wall - in_steps, 0.0)
    print(f"demo from a fresh state folder: {wall:.1f} s wall, {in_steps:.1f} s inside steps")
    for step, seconds in sorted(per_step.items(), key=lambda item: -item[1]):
        print(f"  {step:<28} {seconds:7.1f} s  {seconds / wall:6.1%}")

    began = time.perf_counter()
    again = subprocess.run([*evalp, "demo"], env=env, capture_output=True, text=True, check=False)
    second = time.perf_counter() - began
    if again.returncode != 0:
        print(again.stdout[-2000:], again.stderr[-2000:])
        print(f"summary: the second demo failed (exit {again.returncode})")
        return 1
    skipped = next(
        (line for line in again.stdout.splitlines() if line.startswith("up to date")), "none"
    )
    print(f"second demo, nothing changed: {second:.1f} s wall ({second / wall:.1%} of the first)")
    print(f"  {skipped[:160]}")

    report = home / "reports" / "sweep" / "report.md"
    audits = []
    for _ in range(3):
        began = time.perf_counter()
        audited = subprocess.run(
            [*evalp, "audit", str(report), "--quiet"],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        audits.append(time.perf_counter() - began)
        if audited.returncode != 0:
            print(audited.stdout[-1500:], audited.stderr[-1500:])
            print("summary: the audit of the demo's report failed")
            return 1
    audits.sort()
    audit = audits[1]
    runs = ", ".join(f"{a:.1f}" for a in audits)
    print(f"evalp audit {report.name}: median {audit:.1f} s of 3 ({runs})")
    share = outside / wall
    met = share <= DAGSTER_SHARE_GOAL and audit <= AUDIT_GOAL_S
    met = met and second / wall <= SECOND_DEMO_GOAL
    print(
        f"summary: outside-steps/demo {share:.3f} (goal <= {DAGSTER_SHARE_GOAL:.2f}); "
        f"second/first demo {second / wall:.3f} (goal <= {SECOND_DEMO_GOAL:.2f}); "
        f"audit/goal {audit / AUDIT_GOAL_S:.2f} (goal <= 1.00); "
        f"{'goals met' if met else 'goals NOT met'}"
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
