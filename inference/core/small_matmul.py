"""Products for one row or a few rows at once (`small_matmul.c`): a decode step, and the speculative verify pass's
gamma + 1 tokens.

A decode step of a small model is bound by reading its weights. A pass of 5 tokens reads the same weights, so it
could cost about one step, but MKL's SGEMM for 5 rows cost 1.7-1.9x a one-token step on our 2-core AMD EPYC (a
verify pass of the bundled model: 9.4-10.0 ms against 5.3-5.9 ms for one token, busy, one thread). The kernel loads
each weight row once into AVX2 registers and multiplies it into every row's accumulator: 5.8 ms for the same pass.
For one row it takes one weight row at a time (see small_matmul.c for the variant it beat). The same library holds
`fused_step.c`, a whole forward pass of 1 to 8 tokens (`inference.core.fused_step`), whose products are
`packed_matmul.c`'s: weights packed once in panels of 16 outputs (`pack`), each output one register lane summed in
order, so a row's numbers do not depend on the row count (a verify pass's rows equal one-token steps bit for bit).

It is C, compiled on first use with the system's C compiler into `~/.cache/inference-lab/small-matmul/` (about a
second; the file's name is a hash of the source and the flags) and called through ctypes, which releases the GIL.
Where there is no compiler, no AVX2 and FMA, or the build fails, `available()` is False, says why in `unavailable`,
and callers keep `F.linear`. Results differ from `F.linear` by the order of the additions only (tests).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import torch

# The products, and the whole forward pass of a few tokens built on them (`fused_step.c`, driven by
# `inference.core.fused_step`), and a speculative round's draw (`draws.c`): one library, so one build.
SOURCES = [Path(__file__).with_name(name) for name in ("small_matmul.c", "packed_matmul.c", "fused_step.c", "draws.c")]
CACHE_DIR = Path(os.environ.get("INFERENCE_LAB_KERNEL_DIR", Path.home() / ".cache" / "inference-lab" / "small-matmul"))
FLAGS = ["-O3", "-mavx2", "-mfma", "-shared", "-fPIC"]
LIBRARIES = ["-lm"]
MAX_ROWS = 8  # the kernel's unrolled row counts (a verify pass is gamma + 1 <= 8 tokens at the page's gamma)

_lock = threading.Lock()
_state: dict = {}  # "lib": the loaded library, or "why": the reason there is none


def _cpu_has_avx2_fma() -> bool:
    if platform.machine() not in ("x86_64", "AMD64"):
        return False
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        return False
    words = set(flags.split())
    return {"avx2", "fma"} <= words


def _build() -> ctypes.CDLL:
    """The compiled kernel, built once per source and flags (a temporary name, then an atomic rename, so two
    processes building at once never load a half-written file)."""
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if compiler is None:
        raise OSError("no C compiler (cc or gcc) on this machine")
    sources = b"".join(source.read_bytes() for source in SOURCES)
    digest = hashlib.sha256(sources + " ".join(FLAGS + LIBRARIES).encode()).hexdigest()[:16]
    target = CACHE_DIR / f"small_matmul-{digest}.so"
    if not target.exists():
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=CACHE_DIR, suffix=".so", delete=False) as partial:
            pass
        try:
            subprocess.run(
                [compiler, *FLAGS, "-o", partial.name, *map(str, SOURCES), *LIBRARIES],
                check=True,
                capture_output=True,
                timeout=120,
            )
            os.replace(partial.name, target)
        finally:
            if os.path.exists(partial.name):
                os.unlink(partial.name)
    lib = ctypes.CDLL(str(target))
    lib.small_matmul.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 3
    lib.small_matmul.restype = ctypes.c_int
    lib.fused_step.restype = ctypes.c_int
    lib.packed_matmul.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 3
    lib.packed_matmul.restype = ctypes.c_int
    lib.packed_matmul_use_avx512.argtypes = [ctypes.c_int]
    lib.packed_matmul_use_avx512.restype = ctypes.c_int
    pointer, size = ctypes.c_void_p, ctypes.c_int64
    # draws.c: (probs, vocab, u, ids), (logits, rows, vocab, temperature, q), (logits, vocab, temperature, u, q, ids)
    lib.head_draw.argtypes = [pointer, size, ctypes.c_double, pointer]
    lib.head_draw.restype = ctypes.c_int64
    lib.temperature_softmax.argtypes = [pointer, size, size, ctypes.c_float, pointer]
    lib.temperature_softmax.restype = None
    lib.temperature_draw.argtypes = [pointer, size, ctypes.c_float, ctypes.c_double, pointer, pointer]
    lib.temperature_draw.restype = ctypes.c_int64
    # (p, q, vocab, u, out, ids)
    lib.residual_draw.argtypes = [pointer, pointer, size, ctypes.c_double, pointer, pointer]
    lib.residual_draw.restype = ctypes.c_int64
    lib.top_tokens.argtypes = [pointer, size, size, pointer]  # (values, vocab, k, ids)
    lib.top_tokens.restype = ctypes.c_int64
    # (logits, n, vocab, temperature, q, drafted, uniforms, k, p, p_drafted, q_drafted, ratios, residual, top ids,
    # top values, ids, result)
    lib.verify_round.argtypes = [pointer, size, size, ctypes.c_float] + [pointer] * 3 + [size] + [pointer] * 9
    lib.verify_round.restype = None
    # (shape, weights, embedded, tokens, past, cos, signed sin, past K, past V, K/V strides, new K, new V, keep, logits)
    lib.fused_step.argtypes = [pointer, pointer, pointer, size, size, pointer, pointer]
    lib.fused_step.argtypes += [pointer, pointer, pointer, pointer, pointer, size, pointer]
    # fused_step.c's draft_round: (shape, weights, embed, first, feed, fed, past, cos, signed sin, past K, past V,
    # strides, new K, new V, gamma, temperature, uniforms, rows, vocab, stop ids, stops, tokens, logits, q,
    # pass seconds, shortlist logits, ids)
    lib.draft_round.argtypes = (
        [pointer] * 5 + [size, size] + [pointer] * 7 + [size, ctypes.c_float, pointer, pointer, size]
    )
    lib.draft_round.argtypes += [pointer, size] + [pointer] * 6
    lib.draft_round.restype = ctypes.c_int64
    # fused_step.c's block_pass: (shape, weights, embed, ids, n, past, cos, signed sin, past K, past V, strides,
    # new K, new V, keep, logits)
    lib.block_pass.argtypes = [pointer] * 4 + [size, size] + [pointer] * 7 + [size, pointer]
    lib.block_pass.restype = ctypes.c_int
    return lib


def _library() -> ctypes.CDLL | None:
    with _lock:
        if not _state:
            if os.environ.get("INFERENCE_LAB_SMALL_MATMUL", "1") == "0":
                _state["why"] = "switched off (INFERENCE_LAB_SMALL_MATMUL=0)"
            elif not _cpu_has_avx2_fma():
                _state["why"] = "this CPU has no AVX2 and FMA"
            else:
                try:
                    _state["lib"] = _build()
                except (OSError, subprocess.SubprocessError) as err:
                    detail = getattr(err, "stderr", b"") or b""
                    _state["why"] = f"the kernel did not build: {err} {detail.decode(errors='replace')[-300:]}".strip()
        return _state.get("lib")


def library() -> ctypes.CDLL | None:
    """The loaded library (built on first use), or None where `unavailable` says why."""
    return _library()


def available() -> bool:
    return _library() is not None


def unavailable() -> str | None:
    """Why the kernel is not used here, or None when it is."""
    _library()
    return _state.get("why")


def linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """`F.linear(x, weight)` (no bias) for float32 x [..., in] with at most `MAX_ROWS` rows and a contiguous float32
    weight [out, in], through the kernel. Callers check `available()` and the sizes first."""
    if weight.dtype != torch.float32 or x.dtype != torch.float32 or not weight.is_contiguous():
        raise ValueError("small_matmul takes float32 rows and a contiguous float32 weight")  # else: wrong numbers
    rows = x.reshape(-1, x.shape[-1]).contiguous()
    out = torch.empty(rows.shape[0], weight.shape[0], dtype=torch.float32)
    status = _library().small_matmul(
        rows.data_ptr(), weight.data_ptr(), out.data_ptr(), rows.shape[0], rows.shape[1], weight.shape[0]
    )
    if status != 0:
        raise ValueError(f"small_matmul takes 1 to {MAX_ROWS} rows, not {rows.shape[0]}")
    return out.view(*x.shape[:-1], weight.shape[0])


PANEL = 16  # outputs per panel of a packed weight (packed_matmul.c)


def pack(weight: torch.Tensor) -> torch.Tensor:
    """A float32 weight [outs, in] as packed_matmul.c reads it: [ceil(outs / 16), in, 16], panel p holding outputs
    16p .. 16p + 15 (zero rows pad the last one). A copy: the model's tensor is only read."""
    outs, width = weight.shape
    panels = -(-outs // PANEL)
    padded = torch.zeros(panels * PANEL, width, dtype=torch.float32)
    padded[:outs] = weight.detach()
    return padded.view(panels, PANEL, width).transpose(1, 2).contiguous()


def packed_linear(x: torch.Tensor, packed: torch.Tensor, outs: int) -> torch.Tensor:
    """`F.linear(x, weight)` for x [rows, in] (1 to `MAX_ROWS` rows) and `pack(weight)`, through packed_matmul.c."""
    rows = x.contiguous()
    out = torch.empty(rows.shape[0], outs, dtype=torch.float32)
    status = _library().packed_matmul(
        rows.data_ptr(), packed.data_ptr(), out.data_ptr(), rows.shape[0], rows.shape[1], outs
    )
    if status != 0:
        raise ValueError(f"packed_matmul takes 1 to {MAX_ROWS} rows, not {rows.shape[0]}")
    return out


def use_avx512(wanted: bool) -> bool:
    """Let packed_matmul.c use AVX-512 where the CPU has it (the default), or keep it to AVX2 (the tests compare the
    two). Returns whether AVX-512 is now in use."""
    return bool(_library().packed_matmul_use_avx512(int(wanted)))
