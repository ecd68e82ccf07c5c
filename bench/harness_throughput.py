"""Throughput of the model-call harness against the simulated provider answering in 200 ms.

At 16, 64 and 256 calls in flight it measures calls per second of ours
(`CallSession` + `ModelClient.call`: journal, budget reservation, pricing, labels) through
the transport each kind of shipped config uses:
- ours-sdk, the headline: the official `openai` SDK transport, what the hosted OpenAI
  configs (`openai_chat`, e.g. gpt-4.1) send through;
- ours-anthropic: the official `anthropic` SDK transport, what the Claude configs
  (`anthropic_messages`) send through;
- ours-lean: the lean aiohttp transport, what `openai_compatible` configs (a local or
  self-hosted server, the simulated provider) send through;
and beside them, recording nothing:
- a bare async `openai` loop (the ceiling an SDK client reaches here);
- a bare aiohttp loop (the ceiling of any client built on it here, since the client and
  the sim share the machine's cores);
- Inspect AI's `eval()` on the same prompts, in a bench-only virtualenv the script creates
  itself (`var/bench-inspect`, never a project dependency).

Same scope for all: a whole warm run, timed from opening the client (our session, the
bare SDK client, Inspect's `eval()` call) to closing it, with every call of the run and
whatever each writes (our journal, Inspect's log) inside; "warm" means the process has
already done one such run (imports and first-use costs paid). Each is the median of
`--repeats` runs (at least 3): ours and bare interleaved in this process, Inspect's in
one child process after a warm-up eval. Rates are printed as fractions of the ideal
(in flight / latency), with ours / Inspect, and the client's CPU per call (ours, bare).

Goals: each SDK path >= 0.8 of ideal at 64 and 256 in flight (issue 29); the lean path
>= 0.9 / 0.8 / 0.8 at 16 / 64 / 256; ours-sdk / Inspect (both on the openai SDK) >= 2 at
64 and 256. Exit status: 0 all goals met, 1 a goal missed, 2 none missed but one
could not be measured (Inspect AI skipped or failed). The last line is a summary of ratios.

    uv run python bench/harness_throughput.py [--rounds 10] [--repeats 3] [--skip-inspect]

The machine is shared: quote the ratios, which are measured in one run, not the rates.
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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import openai

from eval_pipeline.paths import PROJECT_ROOT, var_dir
from eval_pipeline.project_configs import load_price_book
from eval_pipeline.providers.budget import BudgetGate
from eval_pipeline.providers.config import ModelConfig
from eval_pipeline.providers.harness import CallSession, CallTag
from eval_pipeline.providers.transport_factory import TransportKind, make_transport
from eval_pipeline.providers.types import Message, ModelRequest
from eval_pipeline.sim.process import SimHandle, running_sim

LATENCY_MS = 200.0
LEVELS = (16, 64, 256)
LEAN_GOALS = {16: 0.9, 64: 0.8, 256: 0.8}
SDK_GOALS = {64: 0.8, 256: 0.8}
"""For each SDK path (ours-sdk, ours-anthropic): the transports the hosted configs use."""
RATIO_GOALS = {64: 2.0, 256: 2.0}
KEY_ENV = "EVALP_BENCH_SIM_KEY"
BENCH_KEY = "bench-fake-key-not-a-secret"
MODEL = "tool-responder"
MAX_TOKENS = 16
TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 10.0


def prompt(level: int, index: int, phase: str) -> str:
    return f"bench {phase} {level} #{index}: repeat the last word royalties{index}"


@dataclass(frozen=True)
class Measure:
    calls: int
    seconds: float
    cpu_seconds: float | None = None

    def rate(self) -> float:
        return self.calls / self.seconds

    def cpu_ms_per_call(self) -> float | None:
        return None if self.cpu_seconds is None else self.cpu_seconds / self.calls * 1000


def ideal_rate(level: int) -> float:
    return level / (LATENCY_MS / 1000)


async def timed(calls: int, run: Callable[[], Awaitable[None]]) -> Measure:
    wall, cpu = time.perf_counter(), time.process_time()
    await run()
    return Measure(calls, time.perf_counter() - wall, time.process_time() - cpu)


def bench_config(base_url: str, level: int, api: str = "openai_compatible") -> ModelConfig:
    return ModelConfig(
        name="bench-sim",
        api=api,  # type: ignore[arg-type]
        provider="simulated",
        model=MODEL,
        base_url=base_url,
        api_key_env=KEY_ENV,
        max_in_flight=level,
        timeout_s=TIMEOUT_S,
        connect_timeout_s=CONNECT_TIMEOUT_S,
    )


async def run_ours(
    base_url: str,
    level: int,
    calls: int,
    phase: str,
    work: Path,
    kind: TransportKind,
    api: str = "openai_compatible",
) -> Measure:
    """One whole run: session and client opened, `calls` calls, session closed."""
    config = bench_config(base_url, level, api)

    async def run() -> None:
        async with CallSession(
            price_book=load_price_book(),
            run_id=f"bench-{phase}-{level}",
            journal_path=work / f"ours-{phase}-{level}-{time.monotonic_ns()}.jsonl",
            budget=BudgetGate(Decimal("1000")),
        ) as session:
            transport = make_transport(config, BENCH_KEY, base_url, kind)
            client = session.client(config, transport=transport)
            results = await asyncio.gather(
                *(
                    client.call(
                        ModelRequest(
                            messages=(Message(role="user", content=prompt(level, i, phase)),),
                            max_tokens=MAX_TOKENS,
                            seed=i,
                        ),
                        CallTag(lane="bench", case_id=str(i)),
                    )
                    for i in range(calls)
                )
            )
        failed = [r for r in results if r.status != "ok"]
        if failed:
            raise RuntimeError(f"{len(failed)} harness calls failed, e.g. {failed[0].final}")

    return await timed(calls, run)


async def run_bare(base_url: str, level: int, calls: int, phase: str) -> Measure:
    """One whole run of a bare SDK loop: client made, `calls` calls, client closed."""

    async def run() -> None:
        client = openai.AsyncOpenAI(
            api_key=BENCH_KEY,
            base_url=base_url,
            max_retries=0,
            timeout=openai.Timeout(TIMEOUT_S, connect=CONNECT_TIMEOUT_S),
        )
        gate = asyncio.Semaphore(level)

        async def one(index: int) -> None:
            async with gate:
                await client.chat.completions.create(
                    model=MODEL,
                    messages=[{"role": "user", "content": prompt(level, index, phase)}],
                    max_tokens=MAX_TOKENS,
                    seed=index,
                )

        try:
            await asyncio.gather(*(one(i) for i in range(calls)))
        finally:
            await client.close()

    return await timed(calls, run)


async def run_aiohttp(base_url: str, level: int, calls: int, phase: str) -> Measure:
    """One whole run of a bare aiohttp loop: the session ours uses (unbounded pool, no
    cookie jar), a JSON body in, the reply's JSON out, nothing recorded; under the garbage
    collector's setting a call session runs under (`providers/collector.py`), so that the
    two differ only in what ours does per call."""
    import aiohttp

    from eval_pipeline.providers.collector import calls_in_flight

    async def run() -> None:
        session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0),
            cookie_jar=aiohttp.DummyCookieJar(),
            trust_env=False,
        )
        headers = {"Authorization": f"Bearer {BENCH_KEY}", "Content-Type": "application/json"}
        gate = asyncio.Semaphore(level)

        async def one(index: int) -> None:
            body = {
                "model": MODEL,
                "messages": [{"role": "user", "content": prompt(level, index, phase)}],
                "max_tokens": MAX_TOKENS,
                "seed": index,
            }
            async with (
                gate,
                session.post(
                    f"{base_url}/chat/completions", data=json.dumps(body), headers=headers
                ) as reply,
            ):
                if reply.status != 200:
                    raise RuntimeError(f"bare aiohttp call {index} got HTTP {reply.status}")
                json.loads(await reply.read())

        calls_in_flight.enter()
        try:
            await asyncio.gather(*(one(i) for i in range(calls)))
        finally:
            await session.close()
            calls_in_flight.exit()

    return await timed(calls, run)


INSPECT_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.solver import generate

    level, calls, repeats, log_dir = (
        int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    )

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
    logs = eval(task("inspect-warm", level), **common)
    assert logs[0].status == "success", logs[0].status
    seconds = []
    for run in range(repeats):
        start = time.perf_counter()
        logs = eval(task(f"inspect-{run}", calls), **common)
        seconds.append(time.perf_counter() - start)
        assert logs[0].status == "success", logs[0].status
    print(json.dumps({"calls": calls, "seconds": seconds}))
    """
)


def find_uv() -> str | None:
    """uv on PATH, else the one `./dev` bootstraps into `.uv-bootstrap/`."""
    found = shutil.which("uv")
    if found is not None:
        return found
    boot = PROJECT_ROOT / ".uv-bootstrap" / "bin" / "uv"
    return str(boot) if boot.exists() else None


def inspect_python(root: Path) -> tuple[Path | None, str]:
    """The bench-only virtualenv's Python with inspect-ai, creating it if needed."""
    python = root / "bin" / "python"
    check = [str(python), "-c", "import inspect_ai, openai"]
    if python.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        version = subprocess.run(
            [str(python), "-c", "import inspect_ai; print(inspect_ai.__version__)"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        return python, f"inspect-ai {version} in {root}"
    uv = find_uv()
    if uv is None:
        return None, "uv not found, so the bench-only Inspect AI environment can't be made"
    steps = [
        [uv, "venv", "-q", str(root)],
        [uv, "pip", "install", "-q", "--python", str(python), "inspect-ai", "openai"],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            return None, f"`{' '.join(step)}` failed: {done.stderr.strip()[-500:]}"
    return python, f"installed into {root}"


def run_inspect(
    python: Path, base_url: str, level: int, calls: int, repeats: int, work: Path
) -> list[Measure]:
    script = work / "inspect_bench.py"
    script.write_text(INSPECT_SCRIPT, encoding="utf-8")
    env = {**os.environ, "SIM_API_KEY": BENCH_KEY, "SIM_BASE_URL": base_url}
    done = subprocess.run(
        [
            str(python),
            str(script),
            str(level),
            str(calls),
            str(repeats),
            str(work / f"inspect-logs-{level}"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"Inspect AI run failed: {done.stderr.strip()[-800:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return [Measure(int(result["calls"]), float(seconds)) for seconds in result["seconds"]]


@dataclass
class Row:
    level: int
    ours: list[Measure]
    """Ours through the openai SDK transport (the headline)."""
    anthropic: list[Measure]
    lean: list[Measure]
    bare: list[Measure]
    aiohttp: list[Measure]
    inspect: list[Measure]

    @property
    def ideal(self) -> float:
        return ideal_rate(self.level)

    def fraction(self, measures: list[Measure]) -> float | None:
        if not measures:
            return None
        return statistics.median(m.rate() for m in measures) / self.ideal

    def cpu_ms(self, measures: list[Measure]) -> float | None:
        values = [m.cpu_ms_per_call() for m in measures]
        known = [v for v in values if v is not None]
        return statistics.median(known) if known else None

    def ours_over(self, measures: list[Measure]) -> float | None:
        ours, theirs = self.fraction(self.ours), self.fraction(measures)
        return ours / theirs if ours is not None and theirs else None

    def ours_over_inspect(self) -> float | None:
        return self.ours_over(self.inspect)


def fmt(value: float | None, spec: str = "6.2f") -> str:
    return format(value, spec) if value is not None else format("n/a", ">" + spec.split(".")[0])


PATHS: dict[str, tuple[TransportKind, str]] = {
    "ours": ("sdk", "openai_chat"),
    "anthropic": ("sdk", "anthropic_messages"),
    "lean": ("aiohttp", "openai_compatible"),
}
"""Each of ours' rows: the transport and the config api it stands for."""


def measure_level(
    sim: SimHandle, level: int, args: argparse.Namespace, python: Path | None, work: Path
) -> tuple[Row, str | None]:
    calls = level * args.rounds
    # Warm-up runs (not timed): first use of each code path in this process.
    for kind, api in PATHS.values():
        asyncio.run(run_ours(sim.base_url_for(api), level, level, "warm", work, kind, api))
    url = sim.openai_base_url
    asyncio.run(run_bare(url, level, level, "bare-warm"))
    asyncio.run(run_aiohttp(url, level, level, "aiohttp-warm"))
    row = Row(level, [], [], [], [], [], [])
    for repeat in range(args.repeats):  # interleaved, so drift hits each alike
        for name, (kind, api) in PATHS.items():
            sim.reset()
            getattr(row, name).append(
                asyncio.run(
                    run_ours(
                        sim.base_url_for(api), level, calls, f"{name}{repeat}", work, kind, api
                    )
                )
            )
        sim.reset()
        row.bare.append(asyncio.run(run_bare(url, level, calls, f"bare{repeat}")))
        sim.reset()
        row.aiohttp.append(asyncio.run(run_aiohttp(url, level, calls, f"aiohttp{repeat}")))
    sim.reset()
    note = None
    if python is not None:
        try:
            row.inspect = run_inspect(python, url, level, calls, args.repeats, work)
        except (RuntimeError, subprocess.TimeoutExpired, ValueError, KeyError) as error:
            note = f"run failed at {level} in flight: {error}"
    return row, note


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="calls per run = rounds x level")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per client (>= 3)")
    parser.add_argument("--levels", default=",".join(map(str, LEVELS)), help="e.g. 16,64,256")
    parser.add_argument("--skip-inspect", action="store_true")
    args = parser.parse_args()
    if args.repeats < 3:
        parser.error("--repeats must be at least 3 (medians of at least three runs)")
    levels = [int(level) for level in args.levels.split(",")]
    unknown = [level for level in levels if level not in LEAN_GOALS]
    if unknown:
        parser.error(f"levels with goals: {', '.join(map(str, LEAN_GOALS))}; not {unknown}")
    os.environ[KEY_ENV] = BENCH_KEY

    load_before = os.getloadavg()
    inspect_note = "skipped (--skip-inspect)"
    python: Path | None = None
    if not args.skip_inspect:
        python, inspect_note = inspect_python(var_dir() / "bench-inspect")

    rows: list[Row] = []
    with (
        tempfile.TemporaryDirectory(prefix="evalp-bench-") as tmp,
        running_sim(latency_ms=LATENCY_MS) as sim,
    ):
        for level in levels:
            row, note = measure_level(sim, level, args, python, Path(tmp))
            rows.append(row)
            if note is not None:
                inspect_note, python = note, None
    load_after = os.getloadavg()

    print(
        f"simulated provider at {LATENCY_MS:.0f} ms; each run: {args.rounds} x in-flight calls, "
        "timed whole (client open -> every call -> close), in a warm process; "
        f"medians of {args.repeats} runs per client (ours, bare and aiohttp interleaved here, "
        "Inspect AI's evals in one child process after a warm-up eval)"
    )
    print(
        f"machine: {os.cpu_count()} cores, load average "
        f"{' '.join(f'{x:.2f}' for x in load_before)} before, "
        f"{' '.join(f'{x:.2f}' for x in load_after)} after"
    )
    print(f"Inspect AI: {inspect_note}")
    print(
        f"{'in flight':>9} {'ideal/s':>8} {'ours-sdk':>8} {'cpu ms':>6} {'anthropic':>9} "
        f"{'cpu ms':>6} {'lean':>6} {'cpu ms':>6} {'bare':>6} {'cpu ms':>6} {'aiohttp':>7} "
        f"{'inspect':>7} {'sdk/insp':>8}   (rates as fractions of ideal; ours-sdk: the openai "
        "SDK transport, anthropic: the anthropic SDK transport, lean: the aiohttp transport; "
        "bare: the openai SDK and aiohttp: a bare aiohttp loop, both recording nothing; cpu "
        "ms: the client's CPU per call)"
    )
    missed: list[str] = []
    unmeasured: list[str] = []
    for row in rows:
        ratio = row.ours_over_inspect()
        print(
            f"{row.level:>9} {row.ideal:8.1f} {fmt(row.fraction(row.ours), '8.2f')} "
            f"{fmt(row.cpu_ms(row.ours))} {fmt(row.fraction(row.anthropic), '9.2f')} "
            f"{fmt(row.cpu_ms(row.anthropic))} {fmt(row.fraction(row.lean))} "
            f"{fmt(row.cpu_ms(row.lean))} {fmt(row.fraction(row.bare))} "
            f"{fmt(row.cpu_ms(row.bare))} {fmt(row.fraction(row.aiohttp), '7.2f')} "
            f"{fmt(row.fraction(row.inspect), '7.2f')} {fmt(ratio, '8.2f')}"
        )
        judged = [("lean", row.lean, LEAN_GOALS.get(row.level))] + [
            (name, measures, SDK_GOALS.get(row.level))
            for name, measures in (("ours-sdk", row.ours), ("anthropic", row.anthropic))
        ]
        for name, measures, goal in judged:
            fraction = row.fraction(measures)
            if goal is not None and (fraction is None or fraction < goal):
                missed.append(f"{name} {fmt(fraction, '.2f')} < {goal} of ideal at {row.level}")
        ratio_goal = RATIO_GOALS.get(row.level)
        if ratio_goal is not None:
            if ratio is None:
                unmeasured.append(f"ours-sdk/Inspect at {row.level}")
            elif ratio < ratio_goal:
                missed.append(f"ours-sdk/Inspect {ratio:.2f} < {ratio_goal} at {row.level}")
    for line in missed:
        print(f"  goal missed: {line}")
    for line in unmeasured:
        print(f"  goal not measured: {line}")
    status = 1 if missed else 2 if unmeasured else 0
    verdict = {0: "goals met", 1: "goals NOT met", 2: "goals not all measured"}[status]

    def series(name: str, values: list[tuple[int, float | None]]) -> str:
        return f"{name} " + " ".join(f"{level}={fmt(value, '.2f')}" for level, value in values)

    summary = [
        series("ours-sdk/ideal", [(r.level, r.fraction(r.ours)) for r in rows]),
        series("anthropic/ideal", [(r.level, r.fraction(r.anthropic)) for r in rows]),
        series("lean/ideal", [(r.level, r.fraction(r.lean)) for r in rows]),
        series("bare/ideal", [(r.level, r.fraction(r.bare)) for r in rows]),
        series("ours-sdk/bare", [(r.level, r.ours_over(r.bare)) for r in rows]),
        series("ours-sdk/inspect", [(r.level, r.ours_over_inspect()) for r in rows]),
    ]
    print(f"summary: {'; '.join(summary)}; {verdict} (exit {status})")
    return status


if __name__ == "__main__":
    sys.exit(main())
