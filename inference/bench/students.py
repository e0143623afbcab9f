"""How many students can one server take? Simulated students press Step at a human pace; the answer is the
largest number of them for which the p95 Step latency stays within a limit (1 s), in-process and on an engine.

    python -m inference.bench.students [--json] [--steps 10] [--max-students 512]

Simulated pacing, Measured latencies. A student is a thread of an app process (as a Streamlit session is) that calls
what the Generate page's Step calls into `inference/`: `trace.step` and `trace.peek` in the page's generation slot,
`step_view`, and (unless `--step-only`) the page's drawing work: the new chip and table row (kept per student, as the
page's session keeps them), the chips' HTML, two Plotly charts as JSON and the step table as Arrow. In-process: one
worker process with the bundled model; engine: `app_processes` workers on one llama-server (`--parallel` slots).
Each student clicks every `period_s` from a seeded random phase, at once when its last Step ran late; latency is
click to result. Left out: Streamlit's own share of a rerun and the browser (tests/test_load_engine.py measures
the whole Step with Chromium). Nothing here imports Streamlit.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import queue
import random
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import plotly.io
import pyarrow as pa
import torch

from inference.core.limits import Limits
from inference.core.loader import encode_prompt, load_model
from inference.core.machine import cpu_name, logical_cpus
from inference.core.measuring import Stopwatch, now
from inference.core.paths import BUNDLED_MODEL_NAME
from inference.core.remote import connect
from inference.core.run import new_trace, record_row, warm_up
from inference.engines import llamacpp
from inference.lessons.generate.figures import (
    cumulative_curve,
    next_token_bars,
    prompt_chips,
    record_chip,
    step_table_row,
    token_html,
)
from inference.lessons.serving.replay import percentile
from inference.sampling.pipeline import SamplingSettings
from inference.sampling.step_view import step_view

IN_PROCESS, ENGINE = "in-process", "engine"
PERIOD_S = 2.0
LIMIT_S = 1.0
STEPS = 10
MAX_STUDENTS = 512
APP_PROCESSES = 2
ENGINE_SLOTS = 8
PROMPTS = (
    "Once upon a time",
    "The little dog wanted to",
    "Lily and her mom went to the park. They saw a big",
    "Tom had a red ball. He",
    "One day, a girl named Sue found a",
    "The sun was hot and the cat",
)

# -- the pure parts: when each student clicks, one student's loop, the threshold search -------------------------


def click_schedule(students: int, steps: int, period_s: float = PERIOD_S, seed: int = 0) -> list[list[float]]:
    """Planned click times (seconds from the start) per student: a random phase in [0, period_s), then every
    period_s. Seeded, so a sweep's levels are comparable and a run can be repeated."""
    if students < 0 or steps < 0 or period_s <= 0:
        raise ValueError(f"need students >= 0, steps >= 0, period_s > 0; got {students}, {steps}, {period_s}")
    rng = random.Random(seed)
    phases = [rng.uniform(0, period_s) for _ in range(students)]
    return [[phase + k * period_s for k in range(steps)] for phase in phases]


def run_student(step: Callable, planned: list[float], clock: Callable, sleep: Callable) -> list[tuple[float, float]]:
    """Click at each planned time (or at once, when the previous Step ran past it): returns (click, end) per Step
    on `clock`, whose zero is the start of the schedule."""
    spans = []
    for planned_at in planned:
        wait = planned_at - clock()
        if wait > 0:
            sleep(wait)
        clicked = clock()
        step()
        spans.append((clicked, clock()))
    return spans


@dataclass
class Search:
    """The threshold search: p95 (seconds) measured per number of students, and the answer."""

    limit_s: float
    measured: dict[int, float] = field(default_factory=dict)
    answer: int = 0  # the largest number measured within the limit (0: even one student is over it)
    capped: bool = False  # the largest number tried was still within the limit: the answer is a lower bound


def largest_within(
    p95_at: Callable[[int], float], limit_s: float = LIMIT_S, max_students: int = MAX_STUDENTS, precision: float = 0.1
) -> Search:
    """Double the number of students (1, 2, 4, ...) until the p95 passes the limit, then bisect between the last
    number within it and the first one over it, until they are `precision` (a fraction) apart, or 1."""
    search = Search(limit_s)

    def within(n: int) -> bool:
        search.measured[n] = p95_at(n)
        return search.measured[n] <= limit_s

    good, bad, n = 0, None, 1
    while n <= max_students:
        if not within(n):
            bad = n
            break
        good, n = n, n * 2
    if bad is None:
        search.answer, search.capped = good, True
        return search
    while bad - good > max(1, int(good * precision)):
        middle = (good + bad) // 2
        if within(middle):
            good = middle
        else:
            bad = middle
    search.answer = good
    return search


# -- one level: N students in worker processes ------------------------------------------------------------------


@dataclass(frozen=True)
class Level:
    """One measured level: N students, `steps` Steps each."""

    mode: str
    students: int
    steps: int
    p50_ms: float
    p95_ms: float
    steps_per_s: float  # Steps completed / wall time of the level
    draw_ms: float  # mean time of the page's drawing work within a Step (0 with --step-only)
    offered_per_s: float  # what the students ask for: N / period


@dataclass
class PageMemory:
    """What the Generate page keeps in its session between Steps: the prompt's chips, a chip and a row per record."""

    prompt_chips: str | None = None
    chips: list[str] = field(default_factory=list)
    rows: list[dict] = field(default_factory=list)


def _page_step(
    trace, tokenizer, settings, seed: int, slot: threading.Semaphore, draw: bool, memory: PageMemory
) -> float:
    """A Generate page Step in `inference/` (app_pages/generate.py); the ms its drawing work took."""
    with slot:
        trace.step(settings, seed)
    with slot:
        logits = trace.peek()
    if logits is None:
        return 0.0
    view = step_view(logits, settings, trace.seen_now(), u=trace.next_uniform())
    with Stopwatch() as drawing:
        if draw:
            if memory.prompt_chips is None:
                memory.prompt_chips = prompt_chips(tokenizer, trace.prompt_ids)
            for record in trace.records[len(memory.chips) :]:
                memory.chips.append(record_chip(tokenizer, record))
                memory.rows.append(step_table_row(record_row(record)))
            token_html(tokenizer, trace.prompt_ids, trace.records, chips=memory.chips, prompt=memory.prompt_chips)
            plotly.io.to_json(next_token_bars(view.table(tokenizer, top_n=20)), validate=False)
            plotly.io.to_json(cumulative_curve(view, tokenizer, settings.top_p), validate=False)
            pa.Table.from_pylist(memory.rows)
    return drawing.ms


def _worker(
    mode: str, url: str, students: list[int], steps: int, period_s: float, draw: bool, seed: int, barrier, results
):
    """One app process: set up its students' traces, wait for the others, then step them on a human schedule."""
    limits = Limits.from_env()
    torch.set_num_threads(limits.torch_threads)  # as app.py does
    if mode == IN_PROCESS:
        loaded = load_model()
        warm_up(loaded.model, loaded.tokenizer)
    else:
        loaded = connect(url)
    slot = threading.BoundedSemaphore(limits.max_concurrent_generations)
    settings = SamplingSettings(temperature=0.8, top_p=0.95)  # the Generate page's defaults
    # An app process has drawn pages before: pay the first-call costs (Plotly's JSON encoder, pandas) untimed.
    rehearsal = new_trace(loaded.model, loaded.tokenizer, encode_prompt(loaded.tokenizer, PROMPTS[0]), 3, seed=seed)
    rehearsal.peek()
    rehearsal_memory = PageMemory()
    for _ in range(2):
        _page_step(rehearsal, loaded.tokenizer, settings, seed, slot, draw, rehearsal_memory)
    traces = []
    for student in students:
        ids = encode_prompt(loaded.tokenizer, PROMPTS[student % len(PROMPTS)])
        trace = new_trace(loaded.model, loaded.tokenizer, ids, steps + 1, seed=student, stop_at_eos=False)
        trace.peek()  # opening the page computes the first distribution
        traces.append(trace)
    schedule = click_schedule(max(students, default=-1) + 1, steps, period_s, seed)
    spans: dict[int, list[tuple[float, float]]] = {}
    drawing: list[float] = []  # list.append is atomic: the threads share it
    barrier.wait()
    start = now()

    def clock() -> float:
        return now() - start

    def student_thread(student: int, trace) -> None:
        memory = PageMemory()
        spans[student] = run_student(
            lambda: drawing.append(_page_step(trace, loaded.tokenizer, settings, student, slot, draw, memory)),
            schedule[student],
            clock,
            time.sleep,
        )

    threads = [threading.Thread(target=student_thread, args=pair) for pair in zip(students, traces, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if mode == ENGINE:
        loaded.model.client.close()
    results.put(([span for student in students for span in spans[student]], drawing))


def measure_level(mode, students, steps=STEPS, url="", app_processes=1, period_s=PERIOD_S, draw=True) -> Level:
    """Run `students` simulated students for `steps` Steps each, split between `app_processes` worker processes."""
    context = multiprocessing.get_context("spawn")  # fresh interpreters: no threads or torch state inherited
    processes = max(1, min(app_processes, students))
    barrier, results = context.Barrier(processes), context.Queue()
    groups = [list(range(students))[p::processes] for p in range(processes)]
    workers = [
        context.Process(target=_worker, args=(mode, url, group, steps, period_s, draw, 0, barrier, results))
        for group in groups
    ]
    for worker in workers:
        worker.start()
    spans, drawing, reported = [], [], 0
    try:
        while reported < len(workers):
            try:
                worker_spans, worker_drawing = results.get(timeout=5)
            except queue.Empty:
                failed = [w.exitcode for w in workers if w.exitcode not in (None, 0)]
                if failed:
                    raise RuntimeError(f"a student process exited with code {failed[0]}") from None
                continue
            spans, drawing, reported = spans + worker_spans, drawing + worker_drawing, reported + 1
    finally:
        for worker in workers:
            worker.join(60)
            if worker.is_alive():
                worker.kill()
    latencies = [end - clicked for clicked, end in spans]
    wall = max(end for _, end in spans) - min(clicked for clicked, _ in spans)
    p50, p95 = percentile(latencies, 50) * 1000, percentile(latencies, 95) * 1000
    return Level(
        mode, students, steps, p50, p95, len(latencies) / wall, sum(drawing) / len(drawing), students / period_s
    )


# -- the sweep ----------------------------------------------------------------------------------------------------


def sweep(
    modes=(IN_PROCESS, ENGINE),
    steps: int = STEPS,
    limit_s: float = LIMIT_S,
    max_students: int = MAX_STUDENTS,
    app_processes: int = APP_PROCESSES,
    slots: int = ENGINE_SLOTS,
    draw: bool = True,
    log=print,
) -> dict:
    """Both threshold searches, every level measured, and what the figures depend on (machine, date, load)."""
    limits = Limits.from_env()
    out = {
        "conditions": {
            "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "cpu": cpu_name(),
            "logical_cpus": logical_cpus(),
            "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
            "model": BUNDLED_MODEL_NAME,
            "torch_threads": limits.torch_threads,
            "max_concurrent_generations_per_app_process": limits.max_concurrent_generations,
        },
        "limit_ms": limit_s * 1000,
        "period_s": PERIOD_S,
        "steps": steps,
        "step": "model step and the page's drawing work" if draw else "model step only",
    }
    for mode in modes:
        if mode == ENGINE and not llamacpp.is_built():
            out[mode] = {"skipped": "llama-server is not built: python -m inference.engines llamacpp build"}
            continue
        server = llamacpp.serve(None, parallel=slots) if mode == ENGINE else None
        processes = app_processes if mode == ENGINE else 1
        engine = (
            f"llama-server --parallel {slots} (bundled model, f32 GGUF)"
            if server
            else "the bundled model in the app process"
        )
        levels: list[Level] = []

        def p95_at(n: int, mode=mode, server=server, processes=processes, levels=levels) -> float:
            level = measure_level(mode, n, steps, server.url if server else "", processes, PERIOD_S, draw)
            levels.append(level)
            log(
                f"{mode:>10}  {n:>4} students  p50 {level.p50_ms:7.0f} ms  p95 {level.p95_ms:7.0f} ms  "
                f"(drawing {level.draw_ms:.0f} ms)  {level.steps_per_s:6.1f} Steps/s (asked {level.offered_per_s:.1f})"
            )
            return level.p95_ms / 1000

        try:
            search = largest_within(p95_at, limit_s, max_students)
        finally:
            if server is not None:
                server.stop()
        out[mode] = {
            "engine": engine,
            "app_processes": processes,
            "answer": search.answer,
            "capped": search.capped,
            "levels": [asdict(level) for level in sorted(levels, key=lambda level: level.students)],
        }
    out["conditions_after"] = {"load_average_1_5_15": [round(x, 2) for x in os.getloadavg()]}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m inference.bench.students", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON (progress goes to stderr)")
    parser.add_argument("--steps", type=int, default=STEPS, help="Steps per student per level")
    parser.add_argument("--max-students", type=int, default=MAX_STUDENTS)
    parser.add_argument("--limit-ms", type=float, default=LIMIT_S * 1000)
    parser.add_argument("--modes", default=f"{IN_PROCESS},{ENGINE}")
    parser.add_argument("--app-processes", type=int, default=APP_PROCESSES, help="app processes in front of the engine")
    parser.add_argument("--slots", type=int, default=ENGINE_SLOTS, help="llama-server --parallel")
    parser.add_argument("--step-only", action="store_true", help="time the model step alone, without the drawing")
    args = parser.parse_args(argv)
    modes = tuple(m.strip() for m in args.modes.split(","))
    log = (lambda line: print(line, file=sys.stderr, flush=True)) if args.json else print
    result = sweep(
        modes,
        args.steps,
        args.limit_ms / 1000,
        args.max_students,
        args.app_processes,
        args.slots,
        not args.step_only,
        log,
    )
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    c = result["conditions"]
    print(
        f"\nSimulated students, one Step every {PERIOD_S:g} s each (random phase), {args.steps} Steps per level, "
        f"each Step the {result['step']}; Measured on {c['cpu']} ({c['logical_cpus']} logical CPUs), {c['model']}, "
        f"{c['date_utc']}, load average {c['load_average_1_5_15']} before, "
        f"{result['conditions_after']['load_average_1_5_15']} after."
    )
    for mode in modes:
        found = result[mode]
        if "skipped" in found:
            print(f"{mode}: skipped ({found['skipped']})")
        else:
            bound = "at least " if found["capped"] else ""
            print(
                f"{mode} ({found['engine']}, {found['app_processes']} app process(es)): {bound}{found['answer']} "
                f"students with p95 Step latency <= {result['limit_ms']:.0f} ms"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
