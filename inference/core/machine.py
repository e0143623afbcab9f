"""Facts about the machine this runs on, read from the system or measured here.

    last_level_cache_bytes()   # int, or None when the system does not say ("unknown")
    cpu_name(), logical_cpus()
    peak_flops(torch.float32)  # Measurement: FLOP/s of a large matmul, best of a few, on torch's threads
    memory_bandwidth()         # Measurement: bytes/s reading a tensor far larger than the caches

Measurements are taken once per process (and per torch thread count) and kept: pages and the
serving roofline ask for them freely. They are disturbed by whatever else runs on the machine,
so a Measurement says how it was taken and the best run is reported (others can only slow a run
down). Nothing here touches the global RNG.
"""

from __future__ import annotations

import functools
import os
import platform
import re
import subprocess
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


# ------------------------------------------------------------------------ read, not timed


def _parse_size(text: str) -> int | None:
    """'32768K', '300 MiB', '2048K', '314572800' -> bytes."""
    match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)(i?B)?\s*", text, flags=re.IGNORECASE)
    if not match:
        return None
    factor = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[match.group(2).upper()]
    return int(match.group(1)) * factor


def _llc_from_sysfs(root: Path) -> int | None:
    best: tuple[int, int] | None = None  # (level, bytes)
    for index in sorted(root.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text())
            size = _parse_size((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind in ("Unified", "Data") and size and (best is None or level > best[0]):
            best = (level, size)
    return best[1] if best else None


def _llc_from_lscpu() -> int | None:
    try:
        out = subprocess.run(
            ["lscpu", "-B", "-C=LEVEL,ONE-SIZE,TYPE"], capture_output=True, text=True, timeout=5, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    best: tuple[int, int] | None = None
    for line in out.splitlines()[1:]:
        parts = line.split()
        if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit() and parts[2] in ("Unified", "Data"):
            level, size = int(parts[0]), int(parts[1])
            if best is None or level > best[0]:
                best = (level, size)
    return best[1] if best else None


@functools.cache
def last_level_cache_bytes() -> int | None:
    """Bytes of the largest (last-level) CPU cache that CPU 0 uses, from sysfs or `lscpu`; None if unknown.
    On a virtual machine this is what the hypervisor reports, and the cache is shared with other tenants."""
    return _llc_from_sysfs(SYSFS_CACHE) or _llc_from_lscpu()


def describe_bytes(n_bytes: int | None) -> str:
    """'300 MiB', '23.1 MB' style text for cache and weight sizes; 'unknown' for None."""
    if n_bytes is None:
        return "unknown"
    if n_bytes >= 2**20 and n_bytes % 2**20 == 0:
        return f"{n_bytes // 2**20:,} MiB"
    return f"{n_bytes / 1e6:,.1f} MB"


@functools.cache
def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo), or the platform's processor string."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def logical_cpus() -> int:
    """CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


# ------------------------------------------------------------------------------- measured


def _best_seconds(run, runs: int = RUNS, budget_s: float = BUDGET_S) -> tuple[float, int]:
    """Fastest of up to `runs` calls after one warm-up, stopping once `budget_s` is spent."""
    run()  # warm-up: first-call allocation, kernel selection
    best, done, start = float("inf"), 0, measuring.now()
    while done < runs:
        with measuring.Stopwatch() as watch:
            run()
        best = min(best, watch.ms / 1000)
        done += 1
        if measuring.ms_since(start) > budget_s * 1000:
            break
    return best, done


@functools.cache
def _peak_flops(dtype: torch.dtype, threads: int) -> Measurement:
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(MATMUL_SIZE, MATMUL_SIZE, generator=gen).to(dtype)
    b = torch.randn(MATMUL_SIZE, MATMUL_SIZE, generator=gen).to(dtype)
    with torch.inference_mode():
        seconds, runs = _best_seconds(lambda: torch.mm(a, b))
    flops = 2 * MATMUL_SIZE**3  # a multiply and an add per term
    return Measurement(
        flops / seconds,
        "FLOP/s",
        f"fastest of {runs} {MATMUL_SIZE}×{MATMUL_SIZE} {str(dtype).removeprefix('torch.')} matrix "
        f"products (2·n³ FLOPs each) after a warm-up, on {threads} torch thread"
        f"{'s' if threads > 1 else ''}",
    )


def peak_flops(dtype: torch.dtype = torch.float32) -> Measurement:
    """Arithmetic this machine reaches in one large matrix product, measured once per process and thread count."""
    return _peak_flops(dtype, torch.get_num_threads())


def _bandwidth_bytes() -> int:
    cache = last_level_cache_bytes() or 0
    return max(BANDWIDTH_BYTES, 2 * cache)


@functools.cache
def _memory_bandwidth(threads: int) -> Measurement:
    n_bytes = _bandwidth_bytes()
    data = torch.ones(n_bytes // 4, dtype=torch.float32)
    with torch.inference_mode():
        seconds, runs = _best_seconds(lambda: data.sum())
    return Measurement(
        n_bytes / seconds,
        "bytes/s",
        f"fastest of {runs} sums over a {n_bytes / 2**20:,.0f} MiB float32 tensor (read once each) "
        f"after a warm-up, on {threads} torch thread{'s' if threads > 1 else ''}",
    )


def memory_bandwidth() -> Measurement:
    """Bytes per second this machine reads from memory, measured once per process and thread count."""
    return _memory_bandwidth(torch.get_num_threads())


def weights_fit_in_cache(weight_bytes: int) -> bool | None:
    """True when the weights are no larger than the last-level cache; None when the cache size is unknown."""
    cache = last_level_cache_bytes()
    return None if cache is None else weight_bytes <= cache


def weights_vs_cache(weight_bytes: int, what: str = "This model's weights") -> str:
    """One sentence, true for these weights on this machine: do they fit in the last-level cache, and what
    that means for a decode step (which reads every weight once)."""
    cache = last_level_cache_bytes()
    size = f"{what} take {describe_bytes(weight_bytes)}"
    if cache is None:
        return (
            f"{size}; this machine does not report its cache size, so whether they stay in the CPU's cache "
            "between decode steps is unknown here."
        )
    where = f"this machine's last-level cache holds {describe_bytes(cache)} (as the system reports it)"
    if weight_bytes <= cache:
        return (
            f"{size} and {where}: they fit, so between decode steps they can stay in the cache, and a step "
            "is limited more by the fixed cost of running its many small operations than by reading "
            "weights from memory."
        )
    return (
        f"{size}, more than {where}: every decode step reads most of them from memory, so decode speed "
        "follows memory bandwidth and fewer bytes per weight can make it faster."
    )
