"""Throughput of the model-call harness against the simulated provider answering in 200 ms.

For 16 and 64 calls in flight it measures calls per second of:
- ours: `CallSession` + `ModelClient.call` (journal, budget reservation, pricing, labels);
- a bare async `openai` loop (the ceiling an SDK client reaches here);
- Inspect AI's `eval()` on the same requests, in a bench-only virtualenv the script
  creates itself (`var/bench-inspect`, never a project dependency).
Each is printed as a fraction of the ideal (in-flight / latency), and ours against Inspect.
Goals: ours >= 0.9 of ideal at 16 and >= 0.8 at 64; ours/Inspect >= 2.0.

    uv run python bench/harness_throughput.py [--rounds 20] [--skip-inspect]

Loops are bounded (rounds x in-flight calls each) and only talk to the sim on loopback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import openai

from eval_pipeline.paths import var_dir
from eval_pipeline.providers.budget import BudgetGate
from eval_pipeline.providers.config import ModelConfig
from eval_pipeline.providers.harness import CallSession, CallTag
from eval_pipeline.providers.types import Message, ModelRequest
from eval_pipeline.sim.process import running_sim

LATENCY_MS = 200.0
LEVELS = (16, 64)
GOALS = {16: 0.9, 64: 0.8}
RATIO_GOAL = 2.0
KEY_ENV = "EVALP_BENCH_SIM_KEY"
BENCH_KEY = "bench-fake-key-not-a-secret"
MODEL = "tool-responder"
MAX_TOKENS = 16


def prompt(level: int, index: int, phase: str) -> str:
    return f"bench {phase} {level} #{index}: repeat the last word royalties{index}"


@dataclass
class Measure:
    calls: int
    seconds: float

    def rate(self) -> float:
        return self.calls / self.seconds


def ideal_rate(level: int) -> float:
    return level / (LATENCY_MS / 1000)


async def run_ours(base_url: str, level: int, rounds: int, work: Path) -> Measure:
    config = ModelConfig(
        name="bench-sim",
        api="openai_compatible",
        provider="simulated",
        model=MODEL,
        base_url=base_url,
        api_key_env=KEY_ENV,
        max_in_flight=level,
        timeout_s=30,
    )
    journal = work / f"ours-{level}.jsonl"
    async with CallSession(
        run_id=f"bench-{level}", journal_path=journal, budget=BudgetGate(Decimal("1000"))
    ) as session:
        client = session.client(config)

        def request(index: int, phase: str) -> ModelRequest:
            return ModelRequest(
                messages=(Message(role="user", content=prompt(level, index, phase)),),
                max_tokens=MAX_TOKENS,
                seed=index,
            )

        await asyncio.gather(
            *(
                client.call(request(i, "warm"), CallTag(lane="bench", case_id=f"w{i}"))
                for i in range(level)
            )
        )
        total = level * rounds
        start = time.perf_counter()
        results = await asyncio.gather(
            *(
                client.call(request(i, "run"), CallTag(lane="bench", case_id=str(i)))
                for i in range(total)
            )
        )
        seconds = time.perf_counter() - start
    failed = [r for r in results if r.status != "ok"]
    if failed:
        raise RuntimeError(f"{len(failed)} harness calls failed, e.g. {failed[0].final}")
    return Measure(total, seconds)


async def run_bare(base_url: str, level: int, rounds: int) -> Measure:
    client = openai.AsyncOpenAI(api_key=BENCH_KEY, base_url=base_url, max_retries=0)
    gate = asyncio.Semaphore(level)

    async def one(index: int, phase: str) -> None:
        async with gate:
            await client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": prompt(level, index, phase)}],
                max_tokens=MAX_TOKENS,
                seed=index,
            )

    try:
        await asyncio.gather(*(one(i, "bare-warm") for i in range(level)))
        total = level * rounds
        start = time.perf_counter()
        await asyncio.gather(*(one(i, "bare") for i in range(total)))
        return Measure(total, time.perf_counter() - start)
    finally:
        await client.close()


INSPECT_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.solver import generate

    level, rounds, log_dir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]

    def task(phase, count):
        samples = [
            Sample(input=f"bench {phase} {level} #{i}: repeat the last word royalties{i}")
            for i in range(count)
        ]
        return Task(dataset=samples, solver=[generate()])

    common = dict(
        model="openai-api/sim/tool-responder",
        max_connections=level,
        max_samples=level,
        max_tokens=16,
        display="none",
        log_dir=log_dir,
        log_level="warning",
        max_retries=0,
    )
    eval(task("inspect-warm", level), **common)
    total = level * rounds
    start = time.perf_counter()
    logs = eval(task("inspect", total), **common)
    seconds = time.perf_counter() - start
    status = logs[0].status
    print(json.dumps({"calls": total, "seconds": seconds, "status": status}))
    """
)


def inspect_python(root: Path) -> tuple[Path | None, str]:
    """The bench-only virtualenv's Python with inspect-ai, creating it if needed."""
    python = root / "bin" / "python"
    check = [str(python), "-c", "import inspect_ai, openai"]
    if python.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return python, "existing"
    uv = shutil.which("uv")
    if uv is None:
        return None, "uv is not on PATH, so the bench-only Inspect AI environment can't be made"
    steps = [
        [uv, "venv", "-q", str(root)],
        [uv, "pip", "install", "-q", "--python", str(python), "inspect-ai", "openai"],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            return None, f"`{' '.join(step)}` failed: {done.stderr.strip()[-500:]}"
    return python, "installed"


def run_inspect(python: Path, base_url: str, level: int, rounds: int, work: Path) -> Measure:
    script = work / "inspect_bench.py"
    script.write_text(INSPECT_SCRIPT, encoding="utf-8")
    env = {**os.environ, "SIM_API_KEY": BENCH_KEY, "SIM_BASE_URL": base_url}
    done = subprocess.run(
        [str(python), str(script), str(level), str(rounds), str(work / f"inspect-logs-{level}")],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    if done.returncode != 0:
        raise RuntimeError(f"Inspect AI run failed: {done.stderr.strip()[-800:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["status"] != "success":
        raise RuntimeError(f"Inspect AI eval status {result['status']}")
    return Measure(int(result["calls"]), float(result["seconds"]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="rounds of in-flight calls")
    parser.add_argument("--skip-inspect", action="store_true")
    parser.add_argument(
        "--repeats", type=int, default=3, help="ours and bare are measured this often (median)"
    )
    args = parser.parse_args()
    os.environ[KEY_ENV] = BENCH_KEY

    inspect_note = "skipped (--skip-inspect)"
    python: Path | None = None
    if not args.skip_inspect:
        python, inspect_note = inspect_python(var_dir() / "bench-inspect")

    rows: list[dict[str, float | int | None]] = []
    with (
        tempfile.TemporaryDirectory(prefix="evalp-bench-") as tmp,
        running_sim(latency_ms=LATENCY_MS) as sim,
    ):
        work = Path(tmp)
        for level in LEVELS:
            ours_rates, bare_rates = [], []
            for _ in range(args.repeats):  # interleaved, so drift hits both alike
                ours_rates.append(
                    asyncio.run(run_ours(sim.openai_base_url, level, args.rounds, work)).rate()
                )
                bare_rates.append(
                    asyncio.run(run_bare(sim.openai_base_url, level, args.rounds)).rate()
                )
            theirs: Measure | None = None
            if python is not None:
                try:
                    theirs = run_inspect(python, sim.openai_base_url, level, args.rounds, work)
                except (RuntimeError, subprocess.TimeoutExpired, ValueError) as error:
                    inspect_note = f"run failed: {error}"
                    python = None
            rows.append(
                {
                    "level": level,
                    "ideal": ideal_rate(level),
                    "ours": statistics.median(ours_rates),
                    "bare": statistics.median(bare_rates),
                    "inspect": theirs.rate() if theirs else None,
                }
            )

    print(
        f"simulated provider latency {LATENCY_MS:.0f} ms, {args.rounds} rounds per level; "
        f"ours and bare: median of {args.repeats} interleaved runs, Inspect AI: one run"
    )
    print(f"Inspect AI: {inspect_note}")
    header = (
        f"{'in flight':>9} {'ideal/s':>8} {'ours/s':>8} {'ours%':>6} {'bare/s':>8} "
        f"{'bare%':>6} {'inspect/s':>9} {'insp%':>6} {'ours/insp':>9}"
    )
    print(header)
    ok = True
    for row in rows:
        level = int(row["level"] or 0)
        ideal = float(row["ideal"] or 0)
        ours_rate = float(row["ours"] or 0)
        bare_rate = float(row["bare"] or 0)
        inspect_rate = row["inspect"]
        ratio = ours_rate / float(inspect_rate) if inspect_rate else None
        inspect_text = (
            f"{float(inspect_rate):9.1f} {float(inspect_rate) / ideal:6.2f}"
            if inspect_rate
            else f"{'n/a':>9} {'n/a':>6}"
        )
        print(
            f"{level:>9} {ideal:8.1f} {ours_rate:8.1f} {ours_rate / ideal:6.2f} "
            f"{bare_rate:8.1f} {bare_rate / ideal:6.2f} {inspect_text} "
            f"{(f'{ratio:9.2f}' if ratio else 'n/a'):>9}"
        )
        goal = GOALS[level]
        if ours_rate / ideal < goal:
            ok = False
            print(f"  below goal: ours {ours_rate / ideal:.2f} < {goal} of ideal at {level}")
        if ratio is not None and ratio < RATIO_GOAL:
            ok = False
            print(f"  below goal: ours/Inspect {ratio:.2f} < {RATIO_GOAL} at {level}")
    print("goals met" if ok else "goals NOT met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
