"""Engine servers for the tests: when a missing engine skips (outside CI) or fails (CI=true), and one vLLM
server shared by every test of a pytest run (it takes a minute or more to start and ~2 GB of RAM)."""

from __future__ import annotations

import atexit
import os

import pytest

from inference.engines import vllm
from tests.test_engines import IN_CI, require_llama_server

__all__ = ["require_llama_server", "require_vllm", "vllm_url"]
VLLM_URL_ENV = "INFERENCE_LAB_TEST_VLLM_URL"  # a vLLM server serving the bundled model, started elsewhere
_started: dict[str, vllm.VllmServer] = {}


def require_vllm() -> None:
    """Skip (saying how to install it) when the vLLM virtualenv is missing, only outside CI; in CI it fails."""
    if not vllm.is_installed():
        reason = (
            "vLLM is not installed here: run `python -m inference.engines vllm install` "
            f"(several minutes, ~3.5 GB in {vllm.venv_dir()})"
        )
        if IN_CI:
            pytest.fail("CI must install vLLM before the tests: " + reason)
        pytest.skip(reason)


def vllm_url() -> str:
    """The URL of a vLLM server for the bundled model: INFERENCE_LAB_TEST_VLLM_URL, else one started here on the
    first call (`vllm serve`, float32, --max-logprobs 4096, --max-num-seqs 8) and stopped when pytest exits."""
    if os.environ.get(VLLM_URL_ENV, "").strip():
        return os.environ[VLLM_URL_ENV].strip()
    if "bundled" not in _started:
        require_vllm()
        server = vllm.serve(None, max_num_seqs=8)
        atexit.register(server.stop)
        _started["bundled"] = server
        print(f"\n[vllm] started {server.url} in {server.started_s:.0f} s (log {server.log_path})")
    return _started["bundled"].url
