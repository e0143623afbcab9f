"""Facts about the machine this runs on, read from the system (cache size, CPU) or measured here once per process and
torch thread count (peak FLOP/s, memory bandwidth: the best of a few runs, since others on the machine only slow a
run down). Nothing here touches the global RNG."""

from __future__ import annotations

import functools
import os
import platform
import re
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import torch

from inference.core import measuring

SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")
MATMUL_SIZE = 2048  # 2 x 2048^3 = 17 GFLOP: long enough to reach the kernel's steady speed
BANDWIDTH_BYTES = 512 * 2**20  # at least this much, and twice the last-level cache: most reads come from memory
RUNS = 5  # best of this many, after one warm-up
BUDGET_S = 3.0  # stop early once this much time is spent (a slow bf16 path on an old CPU)


@dataclass(frozen=True)
class Measurement:
    value: float  # in `unit`
    unit: str  # "FLOP/s" or "bytes/s"
    how: str  # one sentence: what was timed, how often, on how many threads


def _parse_size(text: str) -> int | None:
    """'32768K', '300 MiB', '314572800' -> bytes (binary units)."""
    match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)(i?B)?\s*", text, flags=re.IGNORECASE)
    return int(match[1]) * 2 ** (10 * " KMG".index(match[2].upper())) if match else None


def _llc_from_sysfs(root: Path) -> int | None:
    sizes = {}  # level -> bytes, of the data and unified caches
    for index in root.glob("index*"):
        with suppress(OSError, ValueError):
            if (index / "type").read_text().strip() in ("Unified", "Data"):
                sizes[int((index / "level").read_text())] = _parse_size((index / "size").read_text())
    return sizes[max(sizes)] if sizes else None


@functools.cache
def last_level_cache_bytes() -> int | None:
    """Bytes of the largest (last-level) cache CPU 0 uses, as the system (on a VM, the hypervisor) reports it."""
    return _llc_from_sysfs(SYSFS_CACHE)


def describe_bytes(n_bytes: int | None) -> str:
    """'300 MiB', '23.1 MB' style text for cache and weight sizes; 'unknown' for None."""
    if n_bytes is None:
        return "unknown"
    return f"{n_bytes // 2**20:,} MiB" if n_bytes >= 2**20 and n_bytes % 2**20 == 0 else f"{n_bytes / 1e6:,.1f} MB"


@functools.cache
def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo), or the platform's processor string."""
    with suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def logical_cpus() -> int:
    """CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _best_seconds(run) -> tuple[float, int]:
    """Fastest of up to RUNS calls after one warm-up, stopping once BUDGET_S is spent; (seconds, runs)."""
    run()  # warm-up: first-call allocation, kernel selection
    times, start = [], measuring.now()
    while len(times) < RUNS and (not times or measuring.ms_since(start) <= BUDGET_S * 1000):
        with measuring.Stopwatch() as watch:
            run()
        times.append(watch.ms / 1000)
    return min(times), len(times)


def _on_threads(threads: int) -> str:
    return f"after a warm-up, on {threads} torch thread{'s' if threads > 1 else ''}"


@functools.cache
def _peak_flops(dtype: torch.dtype, threads: int) -> Measurement:
    gen = torch.Generator().manual_seed(0)
    a, b = (torch.randn(MATMUL_SIZE, MATMUL_SIZE, generator=gen).to(dtype) for _ in range(2))
    with torch.inference_mode():
        seconds, runs = _best_seconds(lambda: torch.mm(a, b))
    name = str(dtype).removeprefix("torch.")
    how = (
        f"fastest of {runs} {MATMUL_SIZE}×{MATMUL_SIZE} {name} matrix products (2·n³ FLOPs each) {_on_threads(threads)}"
    )
    return Measurement(2 * MATMUL_SIZE**3 / seconds, "FLOP/s", how)  # a multiply and an add per term


def peak_flops(dtype: torch.dtype = torch.float32) -> Measurement:
    """Arithmetic this machine reaches in one large matrix product, measured once per process and thread count."""
    return _peak_flops(dtype, torch.get_num_threads())


def _bandwidth_bytes() -> int:
    return max(BANDWIDTH_BYTES, 2 * (last_level_cache_bytes() or 0))


@functools.cache
def _memory_bandwidth(threads: int) -> Measurement:
    n_bytes = _bandwidth_bytes()
    data = torch.ones(n_bytes // 4, dtype=torch.float32)
    with torch.inference_mode():
        seconds, runs = _best_seconds(lambda: data.sum())
    how = f"fastest of {runs} sums over a {n_bytes / 2**20:,.0f} MiB float32 tensor (read once each) {_on_threads(threads)}"
    return Measurement(n_bytes / seconds, "bytes/s", how)


def memory_bandwidth() -> Measurement:
    """Bytes per second this machine reads from memory, measured once per process and thread count."""
    return _memory_bandwidth(torch.get_num_threads())


def weights_fit_in_cache(weight_bytes: int) -> bool | None:
    """True when the weights are no larger than the last-level cache; None when the cache size is unknown."""
    cache = last_level_cache_bytes()
    return None if cache is None else weight_bytes <= cache


TEXT = {
    "unknown": "{size}; this machine does not report its cache size, so whether they stay in the CPU's cache between "
    "decode steps is unknown here.",
    "fits": "{size} and {where}: they fit, so between decode steps they can stay in the cache, and a step is limited "
    "more by the fixed cost of running its many small operations than by reading weights from memory.",
    "exceeds": "{size}, more than {where}: every decode step reads most of them from memory, so decode speed follows "
    "memory bandwidth and fewer bytes per weight can make it faster.",
}


def weights_vs_cache(weight_bytes: int, what: str = "This model's weights") -> str:
    """One sentence, true for these weights on this machine: do they fit in the last-level cache, and what that means
    for a decode step (which reads every weight once)."""
    fits, cache = weights_fit_in_cache(weight_bytes), last_level_cache_bytes()
    where = f"this machine's last-level cache holds {describe_bytes(cache)} (as the system reports it)"
    key = "unknown" if fits is None else "fits" if fits else "exceeds"
    return TEXT[key].format(size=f"{what} take {describe_bytes(weight_bytes)}", where=where)
