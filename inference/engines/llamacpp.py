"""llama.cpp's `llama-server`: build it, convert a model to GGUF, serve it on loopback (docs/ENGINES.md). The sources
are the llama.cpp vendored in a pinned `llama-cpp-python` sdist: the only download is from the package index."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from transformers import PretrainedConfig

from inference.core import real_model
from inference.core.app_process import free_port
from inference.core.loader import check_folder, classify_source
from inference.core.measuring import ms_since, now
from inference.core.model_config import context_length
from inference.core.paths import BUNDLED_MODEL_DIR, BUNDLED_MODEL_NAME
from inference.engines.lifetime import ServerProcess, dying_with_parent

SDIST_PACKAGE, SDIST_VERSION = "llama-cpp-python", "0.3.36"
LLAMA_CPP_COMMIT = "0c1e570"  # the sdist has no .git for cmake to read it from: the one its CHANGELOG names
CACHE_ENV = "INFERENCE_LAB_LLAMACPP_DIR"
DEFAULT_CACHE = Path.home() / ".cache" / "inference-lab" / "llama.cpp"
# Portable (GGML_NATIVE off: still AVX2/FMA, but not tied to the build machine); no tests, examples or web UI (it
# would be downloaded from Hugging Face); no OpenSSL (only for downloading models: we serve local files).
CMAKE_FLAGS = ["-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DGGML_NATIVE=OFF"]
CMAKE_FLAGS += ["-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_UI=OFF"]
CMAKE_FLAGS += ["-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_OPENSSL=OFF", f"-DLLAMA_BUILD_COMMIT={LLAMA_CPP_COMMIT}"]
BUILD_TARGETS = ("llama-server", "llama-quantize")
GGUF_TYPES = ("f32", "f16", "q8_0", "q4_K_M")
CONVERTER = Path(__file__).with_name("convert_custom_bpe.py")
# f32 KV cache and flash attention off: 2e-5 from transformers' probabilities instead of 3e-4 (and faster here); a
# unified KV cache (-kvu), without which parallel slots do not batch; /metrics for the serving pages.
SERVER_FLAGS = ["-ctk", "f32", "-ctv", "f32", "-fa", "off", "-kvu", "--metrics"]
HEALTH_TIMEOUT_S = 60.0


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


@contextmanager
def _file_lock(path: Path):
    """One process at a time past this point: a second `build` waits for the first, then finds its result."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _log(f"another process holds {path.name}; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def fetch_sources() -> Path:
    """The sdist's `vendor/llama.cpp`, downloaded with pip and unpacked into the cache once."""
    target = source_dir()
    if (target / "CMakeLists.txt").is_file() and (target / "convert_hf_to_gguf.py").is_file():
        return target
    cache_dir().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir(), prefix="download-") as tmp:
        _log(f"pip download {SDIST_PACKAGE}=={SDIST_VERSION} (sdist)")
        pip = [sys.executable, "-m", "pip", "download", f"{SDIST_PACKAGE}=={SDIST_VERSION}", "--no-deps", "-q"]
        subprocess.run([*pip, "--no-binary", SDIST_PACKAGE, "-d", tmp], check=True)
        [archive] = Path(tmp).glob("*.tar.gz")
        prefix = f"{archive.name.removesuffix('.tar.gz')}/vendor/llama.cpp/"
        unpacked = Path(tmp) / "llama.cpp"
        with tarfile.open(archive) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(prefix) and m.name != prefix.rstrip("/")]
            for member in members:
                member.name = member.name[len(prefix) :]
            tar.extractall(unpacked, members=members, filter="data")
        # The vendored .git is a file pointing at a submodule folder that is not in the sdist: git would fail on it.
        (unpacked / ".git").unlink(missing_ok=True)
        shutil.rmtree(target, ignore_errors=True)
        unpacked.rename(target)
    return target


def build(jobs: int | None = None) -> Path:
    """Build `llama-server` and `llama-quantize` into the cache (reused when there); the folder of the binaries."""
    with _file_lock(cache_dir() / ".build.lock"):
        if is_built():
            _log(f"reusing the build in {binary('llama-server').parent}")
            return binary("llama-server").parent
        for tool in ("cmake", "ninja"):
            if shutil.which(tool) is None:
                raise RuntimeError(f"{tool} is missing: install it (Debian: apt-get install cmake ninja-build g++)")
        started, src = now(), fetch_sources()
        _log(f"configuring {src}")
        subprocess.run(["cmake", "-S", str(src), "-B", str(src / "build"), *CMAKE_FLAGS], check=True)
        jobs = jobs or os.cpu_count() or 2
        _log(f"building {', '.join(BUILD_TARGETS)} with {jobs} jobs (about 5 minutes on 2 cores)")
        subprocess.run(
            ["cmake", "--build", str(src / "build"), "--target", *BUILD_TARGETS, "-j", str(jobs)], check=True
        )
        if not is_built():
            raise RuntimeError(f"the build finished but {binary('llama-server')} is missing")
        _log(f"built in {ms_since(started) / 1000:.0f} s: {binary('llama-server').parent}")
        return binary("llama-server").parent


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


def gguf_path(source: str | None, gguf_type: str) -> Path:
    """Where the GGUF of a model goes, named by a hash of its files so a retrained model gets a new one."""
    folder, name = model_folder(source)
    digest = hashlib.sha256()
    for path in sorted(folder.glob("*.safetensors")) + [folder / "config.json", folder / "tokenizer.json"]:
        if path.is_file():
            digest.update(path.name.encode())
            with path.open("rb") as f:
                for block in iter(lambda: f.read(2**20), b""):
                    digest.update(block)
    return cache_dir() / "gguf" / f"{name}-{digest.hexdigest()[:12]}" / f"model-{gguf_type}.gguf"


def convert(source: str | None = None, gguf_type: str = "f32") -> Path:
    """A GGUF of a model in the cache, made once: f32/f16 by the vendored converter, q8_0/q4_K_M by `llama-quantize`
    from the f32 file. A `.json` beside it keeps the model's context and name."""
    if gguf_type not in GGUF_TYPES:
        raise ValueError(f"`gguf_type` has to be one of {', '.join(GGUF_TYPES)}, but is {gguf_type!r}")
    target = gguf_path(source, gguf_type)
    if target.is_file():
        return target
    with _file_lock(target.with_suffix(".lock")):  # two pages or tests asking at once convert once
        if target.is_file():
            return target
        folder, name = model_folder(source)
        partial, started = target.with_suffix(".partial"), now()
        if gguf_type in ("f32", "f16"):
            what, env = "convert_hf_to_gguf.py", {**os.environ, "LLAMA_CPP": str(fetch_sources())}
            command = [sys.executable, str(CONVERTER), str(folder), "--model-name", name, "--outtype", gguf_type]
            command += ["--outfile", str(partial)]
        elif is_built():
            what, env = "llama-quantize", None
            command = [str(binary(what)), str(convert(source, "f32")), str(partial), gguf_type.upper()]
        else:
            raise RuntimeError("llama-quantize is not built: run python -m inference.engines llamacpp build")
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            tail = " / ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
            raise RuntimeError(f"{what} failed for {folder}: {tail}")
        partial.rename(target)
        config = PretrainedConfig(**json.loads((folder / "config.json").read_text()))
        sidecar = {"name": name, "source": str(folder), "type": gguf_type, "bytes": target.stat().st_size}
        sidecar |= {"context": context_length(config), "seconds": round(ms_since(started) / 1000, 1)}
        target.with_suffix(".json").write_text(json.dumps(sidecar, indent=1))
        _log(f"{target} ({target.stat().st_size / 1e6:.1f} MB) in {sidecar['seconds']} s")
        return target


@dataclass
class LlamaServer(ServerProcess):
    """A running `llama-server`; `stop()` ends it (also as a context manager)."""

    url: str
    process: subprocess.Popen
    gguf: Path
    parallel: int
    log_path: Path
    started_s: float = 0.0  # seconds from start to the first healthy answer


def serve(
    model: str | Path | None = None,
    parallel: int = 1,
    port: int | None = None,
    threads: int | None = None,
    log_path: Path | None = None,
    extra_args: list[str] | None = None,
) -> LlamaServer:
    """`llama-server` on 127.0.0.1 for a GGUF file (or the f32 GGUF of a model, converted once), answering `/health`;
    each of `parallel` slots holds the model's whole context. The caller stops it (`stop()` or `with`)."""
    if not is_built():
        raise RuntimeError("llama-server is not built: run python -m inference.engines llamacpp build")
    gguf = Path(model) if str(model).endswith(".gguf") else convert(None if model is None else str(model), "f32")
    port = port or free_port()
    sidecar = gguf.with_suffix(".json")
    context = json.loads(sidecar.read_text())["context"] * parallel if sidecar.is_file() else 0  # 0: the model's own
    args = [str(binary("llama-server")), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port)]
    args += ["--parallel", str(parallel), "-c", str(context), *SERVER_FLAGS, *(["-t", str(threads)] if threads else [])]
    log_path = Path(log_path) if log_path else cache_dir() / "logs" / f"llama-server-{port}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = now()
    with open(log_path, "wb") as log:  # dying_with_parent: no orphaned server if this process is killed
        command = dying_with_parent(args + (extra_args or []))
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    server = LlamaServer(f"http://127.0.0.1:{port}", process, gguf, parallel, log_path)
    return server.ready(started, "llama-server", HEALTH_TIMEOUT_S, poll_s=0.05)
