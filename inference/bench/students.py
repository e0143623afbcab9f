"""How many students can one server take? Simulated students press Step at a human pace; the answer is the largest
number of them whose p95 Step latency stays within 1 s, in-process and on an engine.

    python -m inference.bench.students [--json] [--steps 10] [--max-students 512] [--modes in-process,engine]

Simulated pacing, Measured latencies. A student is a thread of an app process (as a Streamlit session is) calling
what the Generate page's Step calls into `inference/` (`trace.step` and `trace.peek` in the page's generation slot,
`step_view`) and the page's drawing work: the new chip and table row (kept per student, as the page's session keeps
them), the chips' HTML, two Plotly charts as JSON and the step table as Arrow. In-process: one worker process with the
bundled model; engine: two workers on one llama-server with 8 slots. Each student clicks every 2 s from a seeded
random phase, at once when its last Step ran late; latency is click to result. Left out: Streamlit's own share of a
rerun and the browser (tests/test_load_engine.py measures the whole Step with Chromium).
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
from contextlib import nullcontext
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
from inference.lessons.generate import figures
from inference.lessons.serving.replay import percentile
from inference.sampling.pipeline import SamplingSettings
from inference.sampling.step_view import step_view

IN_PROCESS, ENGINE = "in-process", "engine"
PERIOD_S, LIMIT_S, STEPS, MAX_STUDENTS = 2.0, 1.0, 10, 512
APP_PROCESSES = {IN_PROCESS: 1, ENGINE: 2}
ENGINE_SLOTS = 8
SETTINGS = SamplingSettings(temperature=0.8, top_p=0.95)  # the Generate page's defaults
PROMPTS = (
    "Once upon a time",
    "The little dog wanted to",
    "Lily and her mom went to the park. They saw a big",
    "Tom had a red ball. He",
    "One day, a girl named Sue found a",
    "The sun was hot and the cat",
)


def click_schedule(students: int, steps: int, period_s: float = PERIOD_S, seed: int = 0) -> list[list[float]]:
    """Planned click times (seconds from the start) per student: a seeded random phase in [0, period_s), then every
    period_s (seeded, so a sweep's levels are comparable)."""
    rng = random.Random(seed)
    phases = [rng.uniform(0, period_s) for _ in range(students)]
    return [[phase + k * period_s for k in range(steps)] for phase in phases]


def run_student(step: Callable, planned: list[float], clock: Callable, sleep: Callable) -> list[tuple[float, float]]:
    """Click at each planned time (at once when the last Step ran past it): (click, end) per Step on `clock`."""
    spans = []
    for planned_at in planned:
        if (wait := planned_at - clock()) > 0:
            sleep(wait)
        clicked = clock()
        step()
        spans.append((clicked, clock()))
    return spans


@dataclass
class Search:
    measured: dict[int, float] = field(default_factory=dict)  # students -> p95 seconds
    answer: int = 0  # the largest number measured within the limit (0: even one student is over it)
    capped: bool = False  # the largest number tried was still within the limit: the answer is a lower bound


def largest_within(p95_at: Callable[[int], float], limit_s=LIMIT_S, max_students=MAX_STUDENTS, precision=0.1):
    """Double the students (1, 2, 4, ...) until the p95 passes the limit, then bisect between the last number within
    it and the first over it until they are `precision` (a fraction) apart, or 1."""
    search = Search()

    def within(n: int) -> bool:
        search.measured[n] = p95_at(n)
        return search.measured[n] <= limit_s

    good, n = 0, 1
    while n <= max_students and within(n):
        good, n = n, n * 2
    if n > max_students:
        search.answer, search.capped = good, True
        return search
    bad = n
    while bad - good > max(1, int(good * precision)):
        middle = (good + bad) // 2
        good, bad = (middle, bad) if within(middle) else (good, middle)
    search.answer = good
    return search


@dataclass(frozen=True)
class Level:
    mode: str
    students: int
    steps: int
    p50_ms: float
    p95_ms: float
    steps_per_s: float  # Steps completed / wall time of the level
    draw_ms: float  # mean time of the page's drawing work within a Step
    offered_per_s: float  # what the students ask for: N / period


class Student:
    """One student's page: its trace and what the Generate page keeps in its session between Steps."""

    def __init__(self, loaded, prompt: str, seed: int, steps: int, slot: threading.Semaphore):
        ids = encode_prompt(loaded.tokenizer, prompt)
        self.trace = new_trace(loaded.model, loaded.tokenizer, ids, steps + 1, seed=seed, stop_at_eos=False)
        self.trace.peek()  # opening the page computes the first distribution
        self.tokenizer, self.seed, self.slot = loaded.tokenizer, seed, slot
        self.prompt_chips, self.chips, self.rows = None, [], []

    def step(self) -> float:
        """A Generate page Step in `inference/` (app_pages/generate.py); the ms its drawing work took."""
        trace, tokenizer = self.trace, self.tokenizer
        with self.slot:
            trace.step(SETTINGS, self.seed)
        with self.slot:
            logits = trace.peek()
        if logits is None:
            return 0.0
        view = step_view(logits, SETTINGS, trace.seen_now(), u=trace.next_uniform())
        with Stopwatch() as drawing:
            self.prompt_chips = self.prompt_chips or figures.prompt_chips(tokenizer, trace.prompt_ids)
            for record in trace.records[len(self.chips) :]:
                self.chips.append(figures.record_chip(tokenizer, record))
                self.rows.append(figures.step_table_row(record_row(record)))
            figures.token_html(tokenizer, trace.prompt_ids, trace.records, chips=self.chips, prompt=self.prompt_chips)
            plotly.io.to_json(figures.next_token_bars(view.table(tokenizer, top_n=20)), validate=False)
            plotly.io.to_json(figures.cumulative_curve(view, tokenizer, SETTINGS.top_p), validate=False)
            pa.Table.from_pylist(self.rows)
        return drawing.ms


def _worker(mode: str, url: str, students: list[int], steps: int, barrier, results) -> None:
    """One app process: set up its students, wait for the other processes, then step them on a human schedule."""
    limits = Limits.from_env()
    torch.set_num_threads(limits.torch_threads)  # as app.py does
    loaded = connect(url) if mode == ENGINE else load_model()
    if mode == IN_PROCESS:
        warm_up(loaded.model, loaded.tokenizer)
    slot = threading.BoundedSemaphore(limits.max_concurrent_generations)
    rehearsal = Student(loaded, PROMPTS[0], 0, 3, slot)  # an app process has drawn pages before: first calls untimed
    rehearsal.step(), rehearsal.step()
    pages = [Student(loaded, PROMPTS[s % len(PROMPTS)], s, steps, slot) for s in students]
    schedule = click_schedule(max(students, default=-1) + 1, steps)
    spans, drawing = {}, []  # list.append is atomic: the threads share it
    barrier.wait()
    start = now()

    def student_thread(student: int, page: Student) -> None:
        spans[student] = run_student(
            lambda: drawing.append(page.step()), schedule[student], lambda: now() - start, time.sleep
        )

    threads = [threading.Thread(target=student_thread, args=pair) for pair in zip(students, pages, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if mode == ENGINE:
        loaded.model.client.close()
    results.put(([span for student in students for span in spans[student]], drawing))


def measure_level(mode: str, students: int, steps: int = STEPS, url: str = "") -> Level:
    """`students` simulated students, `steps` Steps each, split between the mode's worker processes."""
    context = multiprocessing.get_context("spawn")  # fresh interpreters: no threads or torch state inherited
    processes = max(1, min(APP_PROCESSES[mode], students))
    barrier, results = context.Barrier(processes), context.Queue()
    groups = [list(range(students))[p::processes] for p in range(processes)]
    workers = [context.Process(target=_worker, args=(mode, url, g, steps, barrier, results)) for g in groups]
    for worker in workers:
        worker.start()
    spans, drawing = [], []
    try:
        while len(spans) < students * steps:
            try:
                worker_spans, worker_drawing = results.get(timeout=5)
            except queue.Empty:
                if failed := [w.exitcode for w in workers if w.exitcode not in (None, 0)]:
                    raise RuntimeError(f"a student process exited with code {failed[0]}") from None
                continue
            spans, drawing = spans + worker_spans, drawing + worker_drawing
    finally:
        for worker in workers:
            worker.join(60)
            if worker.is_alive():
                worker.kill()
    latencies = [end - clicked for clicked, end in spans]
    wall = max(end for _, end in spans) - min(clicked for clicked, _ in spans)
    p50, p95 = percentile(latencies, 50) * 1000, percentile(latencies, 95) * 1000
    return Level(mode, students, steps, p50, p95, len(spans) / wall, sum(drawing) / len(drawing), students / PERIOD_S)


def sweep(modes=(IN_PROCESS, ENGINE), steps: int = STEPS, max_students: int = MAX_STUDENTS, log=print) -> dict:
    """Both threshold searches, every level measured, and what the figures depend on (machine, date, load)."""
    limits = Limits.from_env()
    conditions = {"date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu_name()}
    conditions |= {"logical_cpus": logical_cpus(), "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()]}
    conditions |= {"model": BUNDLED_MODEL_NAME, "torch_threads": limits.torch_threads}
    conditions["max_concurrent_generations_per_app_process"] = limits.max_concurrent_generations
    out = {"conditions": conditions, "limit_ms": LIMIT_S * 1000, "period_s": PERIOD_S, "steps": steps}
    out["step"] = "model step and the page's drawing work"
    for mode in modes:
        if mode == ENGINE and not llamacpp.is_built():
            out[mode] = {"skipped": "llama-server is not built: python -m inference.engines llamacpp build"}
            continue
        levels: list[Level] = []
        with llamacpp.serve(None, parallel=ENGINE_SLOTS) if mode == ENGINE else nullcontext() as server:

            def p95_at(n: int, mode=mode, server=server, levels=levels) -> float:
                levels.append(level := measure_level(mode, n, steps, server.url if server else ""))
                log(
                    f"{mode:>10}  {n:>4} students  p50 {level.p50_ms:7.0f} ms  p95 {level.p95_ms:7.0f} ms  "
                    f"(drawing {level.draw_ms:.0f} ms)  {level.steps_per_s:6.1f} Steps/s (asked {level.offered_per_s:.1f})"
                )
                return level.p95_ms / 1000

            search = largest_within(p95_at, LIMIT_S, max_students)
        engine = f"llama-server --parallel {ENGINE_SLOTS} (bundled model, f32 GGUF)"
        out[mode] = {
            "engine": engine if mode == ENGINE else "the bundled model in the app process",
            "app_processes": APP_PROCESSES[mode],
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
    parser.add_argument("--modes", default=f"{IN_PROCESS},{ENGINE}")
    args = parser.parse_args(argv)
    modes = tuple(m.strip() for m in args.modes.split(","))
    log = (lambda line: print(line, file=sys.stderr, flush=True)) if args.json else print
    result = sweep(modes, args.steps, args.max_students, log)
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
            continue
        bound = "at least " if found["capped"] else ""
        print(
            f"{mode} ({found['engine']}, {found['app_processes']} app process(es)): {bound}{found['answer']} "
            f"students with p95 Step latency <= {result['limit_ms']:.0f} ms"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
