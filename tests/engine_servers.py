"""Engine servers for the tests: when a missing engine skips (outside CI) or fails (CI=true), and one vLLM server
shared by every test of a pytest run (it takes a minute or more to start and ~2 GB of RAM)."""

from __future__ import annotations

import atexit
import os

import pytest

from inference.engines import llamacpp, vllm

IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
VLLM_URL_ENV = "INFERENCE_LAB_TEST_VLLM_URL"  # a vLLM server serving the bundled model, started elsewhere
_started: dict[str, vllm.VllmServer] = {}


def _missing(reason: str) -> None:
    if IN_CI:
        pytest.fail("CI must build or install the engines before the tests: " + reason)
    pytest.skip(reason)


def require_llama_server() -> None:
    if not llamacpp.is_built():
        _missing(
            f"llama-server is not built: run `python -m inference.engines llamacpp build` ({llamacpp.cache_dir()})"
        )


def require_vllm() -> None:
    if not vllm.is_installed():
        _missing(f"vLLM is not installed: run `python -m inference.engines vllm install` ({vllm.venv_dir()})")


def vllm_url() -> str:
    """A vLLM server for the bundled model: INFERENCE_LAB_TEST_VLLM_URL, else one started here on the first call
    (`vllm serve`, float32, --max-logprobs 4096, --max-num-seqs 8) and stopped when pytest exits."""
    if os.environ.get(VLLM_URL_ENV, "").strip():
        return os.environ[VLLM_URL_ENV].strip()
    if "bundled" not in _started:
        require_vllm()
        server = vllm.serve(None, max_num_seqs=8)
        atexit.register(server.stop)
        _started["bundled"] = server
    return _started["bundled"].url
