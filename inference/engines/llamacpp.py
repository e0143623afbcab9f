"""llama.cpp's `llama-server`: build it, convert a model to GGUF, serve it on loopback.

The recipe (versions, flags, measured speeds, pitfalls) is `ENGINES.md` in the project's shared notes; the
commands are `python -m inference.engines llamacpp build|convert|serve`. The sources come from the llama.cpp
vendored in a pinned `llama-cpp-python` sdist, so the only download is from the Python package index.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from inference.core import real_model
from inference.core.loader import check_folder, classify_source
from inference.core.measuring import ms_since, now
from inference.core.model_config import context_length
from inference.core.paths import BUNDLED_MODEL_DIR, BUNDLED_MODEL_NAME
from inference.engines.lifetime import ServerProcess, dying_with_parent, wait_healthy

SDIST_PACKAGE = "llama-cpp-python"
SDIST_VERSION = "0.3.36"
# The sdist has no .git, so cmake cannot find the commit by itself: this is the one its CHANGELOG names.
LLAMA_CPP_COMMIT = "0c1e570"
CACHE_ENV = "INFERENCE_LAB_LLAMACPP_DIR"
DEFAULT_CACHE = Path.home() / ".cache" / "inference-lab" / "llama.cpp"

CMAKE_FLAGS = [
    "-G",
    "Ninja",
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    # Portable: still AVX2/FMA (x86-64-v3), but runs on any such CPU, not only on the build machine.
    "-DGGML_NATIVE=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    # The prebuilt web UI would be downloaded from Hugging Face at build time; the API does not need it.
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    # OpenSSL is only for downloading models over HTTPS; we serve local files.
    "-DLLAMA_OPENSSL=OFF",
    f"-DLLAMA_BUILD_COMMIT={LLAMA_CPP_COMMIT}",
]
BUILD_TARGETS = ("llama-server", "llama-quantize")


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE).expanduser()


def source_dir() -> Path:
    return cache_dir() / f"llama.cpp-{LLAMA_CPP_COMMIT}"


def binary(name: str) -> Path:
    return source_dir() / "build" / "bin" / name


def is_built() -> bool:
    return all(binary(name).is_file() and os.access(binary(name), os.X_OK) for name in BUILD_TARGETS)


def _log(message: str) -> None:
    print(f"[llamacpp {time.strftime('%H:%M:%S')}] {message}", flush=True)


def fetch_sources() -> Path:
    """Download the pinned sdist with pip (the package index is the only network used) and unpack its
    `vendor/llama.cpp` into the cache. Reused when already there."""
    target = source_dir()
    if (target / "CMakeLists.txt").is_file() and (target / "convert_hf_to_gguf.py").is_file():
        return target
    cache_dir().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir(), prefix="download-") as tmp:
        _log(f"pip download {SDIST_PACKAGE}=={SDIST_VERSION} (sdist)")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                f"{SDIST_PACKAGE}=={SDIST_VERSION}",
                "--no-binary",
                SDIST_PACKAGE,
                "--no-deps",
                "-q",
                "-d",
                tmp,
            ],
            check=True,
        )
        archives = list(Path(tmp).glob("*.tar.gz"))
        if len(archives) != 1:
            raise RuntimeError(f"expected one sdist archive in {tmp}, found {[a.name for a in archives]}")
        _log(f"unpacking {archives[0].name}")
        prefix = f"{archives[0].name.removesuffix('.tar.gz')}/vendor/llama.cpp/"
        unpacked = Path(tmp) / "llama.cpp"
        with tarfile.open(archives[0]) as tar:
            members = []
            for member in tar.getmembers():
                if member.name.startswith(prefix) and member.name != prefix.rstrip("/"):
                    member.name = member.name[len(prefix) :]
                    members.append(member)
            tar.extractall(unpacked, members=members, filter="data")
        # The vendored .git is a file pointing at a submodule folder that is not in the sdist: git would fail on it.
        (unpacked / ".git").unlink(missing_ok=True)
        shutil.rmtree(target, ignore_errors=True)
        unpacked.rename(target)
    return target


@contextmanager
def _file_lock(path: Path):
    """One process at a time past this point for `path`: a second `build` (say CI starting while an earlier
    one still compiles) waits for the first, then finds its result, instead of running ninja in the same folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _log(f"another process holds {path.name}; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def build(jobs: int | None = None) -> Path:
    """Build `llama-server` and `llama-quantize` into the cache (skipped when both are there).
    Returns the folder holding the binaries."""
    with _file_lock(cache_dir() / ".build.lock"):
        return _build(jobs)


def _build(jobs: int | None) -> Path:
    if is_built():
        _log(f"reusing the build in {binary('llama-server').parent}")
        return binary("llama-server").parent
    for tool in ("cmake", "ninja"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"{tool} is missing: install it (Debian: apt-get install cmake ninja-build g++)")
    started = now()
    src = fetch_sources()
    _log(f"configuring {src}")
    subprocess.run(["cmake", "-S", str(src), "-B", str(src / "build"), *CMAKE_FLAGS], check=True)
    jobs = jobs or os.cpu_count() or 2
    _log(f"building {', '.join(BUILD_TARGETS)} with {jobs} jobs (about 5 minutes on 2 cores)")
    subprocess.run(["cmake", "--build", str(src / "build"), "--target", *BUILD_TARGETS, "-j", str(jobs)], check=True)
    if not is_built():
        raise RuntimeError(f"the build finished but {binary('llama-server')} is missing")
    _log(f"built in {ms_since(started) / 1000:.0f} s: {binary('llama-server').parent}")
    return binary("llama-server").parent


# -- convert ---------------------------------------------------------------------------------------

GGUF_TYPES = ("f32", "f16", "q8_0", "q4_K_M")
CONVERTER = Path(__file__).with_name("convert_custom_bpe.py")


def model_folder(source: str | None) -> tuple[Path, str]:
    """A Hugging Face model folder and its name: the bundled model for an empty source, else a local folder."""
    kind = classify_source(source)
    if kind == "bundled":
        return BUNDLED_MODEL_DIR, BUNDLED_MODEL_NAME
    if kind == "real":  # converted once from the wheel's GGUF (inference.core.real_model)
        return real_model.real_model_folder(), real_model.REAL_MODEL_NAME
    folder = Path(str(source).strip()).expanduser()
    check_folder(folder)  # the loader's safety rules: safetensors only, no custom code
    return folder, folder.name


def _fingerprint(folder: Path) -> str:
    """Content hash of what the GGUF is made from, so a retrained model gets a new file."""
    digest = hashlib.sha256()
    for path in sorted(folder.glob("*.safetensors")) + [folder / "config.json", folder / "tokenizer.json"]:
        if path.is_file():
            digest.update(path.name.encode())
            with path.open("rb") as f:
                for block in iter(lambda: f.read(2**20), b""):
                    digest.update(block)
    return digest.hexdigest()[:12]


def gguf_path(source: str | None, gguf_type: str) -> Path:
    folder, name = model_folder(source)
    return cache_dir() / "gguf" / f"{name}-{_fingerprint(folder)}" / f"model-{gguf_type}.gguf"


def convert(source: str | None = None, gguf_type: str = "f32") -> Path:
    """A GGUF of the bundled model (or a local folder) in the cache, made once: f32/f16 by the vendored
    converter, q8_0/q4_K_M by `llama-quantize` from the f32 file. A `.json` beside it keeps the model's
    context length and name for `serve`."""
    if gguf_type not in GGUF_TYPES:
        raise ValueError(f"`gguf_type` has to be one of {', '.join(GGUF_TYPES)}, but is {gguf_type!r}")
    target = gguf_path(source, gguf_type)
    if target.is_file():
        return target
    with _file_lock(target.with_suffix(".lock")):  # two pages or tests asking at once convert once
        if target.is_file():
            return target
        return _convert(source, gguf_type, target)


def _convert(source: str | None, gguf_type: str, target: Path) -> Path:
    folder, name = model_folder(source)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    started = now()
    if gguf_type in ("f32", "f16"):
        src = fetch_sources()
        env = {**os.environ, "LLAMA_CPP": str(src)}
        result = subprocess.run(
            [
                sys.executable,
                str(CONVERTER),
                str(folder),
                "--model-name",
                name,
                "--outtype",
                gguf_type,
                "--outfile",
                str(partial),
            ],
            env=env,
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
            raise RuntimeError(f"convert_hf_to_gguf.py failed for {folder}: {' / '.join(tail)}")
    else:
        if not is_built():
            raise RuntimeError("llama-quantize is not built: run python -m inference.engines llamacpp build")
        f32 = convert(source, "f32")
        result = subprocess.run(
            [str(binary("llama-quantize")), str(f32), str(partial), gguf_type.upper()], capture_output=True, text=True
        )
        if result.returncode != 0:
            raise RuntimeError(f"llama-quantize failed: {' / '.join(result.stderr.strip().splitlines()[-3:])}")
    partial.rename(target)
    config = json.loads((folder / "config.json").read_text())
    from transformers import PretrainedConfig

    sidecar = {
        "name": name,
        "source": str(folder),
        "type": gguf_type,
        "bytes": target.stat().st_size,
        "context": context_length(PretrainedConfig(**config)),
        "seconds": round(ms_since(started) / 1000, 1),
    }
    target.with_suffix(".json").write_text(json.dumps(sidecar, indent=1))
    _log(f"{target} ({target.stat().st_size / 1e6:.1f} MB) in {sidecar['seconds']} s")
    return target


def gguf_context(gguf: Path) -> int | None:
    sidecar = Path(gguf).with_suffix(".json")
    if sidecar.is_file():
        return int(json.loads(sidecar.read_text())["context"])
    return None


# -- serve -----------------------------------------------------------------------------------------

# f32 KV cache and flash attention off: 2e-5 from transformers' probabilities instead of 3e-4 (and faster here);
# a unified KV cache (-kvu), without which parallel slots do not batch; /metrics for the serving pages.
SERVER_FLAGS = ["-ctk", "f32", "-ctv", "f32", "-fa", "off", "-kvu", "--metrics"]
HEALTH_TIMEOUT_S = 60.0


@dataclass
class LlamaServer(ServerProcess):
    """A running `llama-server`, started by `serve`; `stop()` ends it (also as a context manager)."""

    url: str
    process: subprocess.Popen
    gguf: Path
    parallel: int
    log_path: Path
    started_s: float = 0.0  # seconds from start to the first healthy answer


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(
    model: str | Path | None = None,
    parallel: int = 1,
    port: int | None = None,
    threads: int | None = None,
    log_path: Path | None = None,
    extra_args: list[str] | None = None,
) -> LlamaServer:
    """Start `llama-server` on 127.0.0.1 for a GGUF file (or the f32 GGUF of the bundled model / a model
    folder, converted once), wait until `/health` answers, and return it. Each of `parallel` slots holds
    the model's whole context. The caller stops it: `server.stop()` or `with serve(...) as server:`.

        server = serve(parallel=4)       # -> server.url == "http://127.0.0.1:<port>"
    """
    if not is_built():
        raise RuntimeError("llama-server is not built: run python -m inference.engines llamacpp build")
    gguf = (
        Path(model) if model and str(model).endswith(".gguf") else convert(None if model is None else str(model), "f32")
    )
    if not gguf.is_file():
        raise FileNotFoundError(f"No GGUF file at {gguf}")
    if parallel < 1:
        raise ValueError(f"`parallel` has to be at least 1, but is {parallel}")
    port = port or free_port()
    context = gguf_context(gguf)
    args = [
        str(binary("llama-server")),
        "-m",
        str(gguf),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--parallel",
        str(parallel),
        "-c",
        str(context * parallel if context else 0),
        *SERVER_FLAGS,
    ]
    if threads:
        args += ["-t", str(threads)]
    args += extra_args or []
    log_path = Path(log_path) if log_path else cache_dir() / "logs" / f"llama-server-{port}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = now()
    with open(log_path, "wb") as log:  # dying_with_parent: no orphaned server if this process is killed
        process = subprocess.Popen(
            dying_with_parent(args), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
        )
    server = LlamaServer(
        url=f"http://127.0.0.1:{port}", process=process, gguf=gguf, parallel=parallel, log_path=log_path
    )
    return server.ready(started, _wait_healthy)


def _wait_healthy(server: LlamaServer, timeout: float = HEALTH_TIMEOUT_S) -> None:
    wait_healthy(server, "llama-server", timeout, poll_s=0.05)
