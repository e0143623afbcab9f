"""`python -m inference.bench` (inference/bench/cli.py) runs on the bundled model and writes the keys issue #3 names.
Its figures are reported, never asserted: only their presence and sense are checked."""

import json
import subprocess
import sys
from functools import partial

import pytest

from inference.bench import cli, engine
from inference.core import real_model
from inference.lessons.speculative import drafting

# engine: the bench starts llama-server when it is built
pytestmark = pytest.mark.engine

ISSUE_KEYS = {"engine_tokens_per_s", "generate_tokens_per_s", "engine_vs_generate", "ttft_ms", "decode_ms_per_token"}
ISSUE_KEYS |= {"view_ms_vocab_4k", "view_ms_vocab_50k", "trace_view_ms_200", "model", "torch_threads"}
ISSUE_KEYS |= {"transformers_version", "inside_ms_300", "inside_plain_prefill_ms_300"}
# issue #14, and issue #29's why: the verify pass's cost, the draft's, the MoE target's side, the shortlist's
SPECULATIVE_KEYS = {"spec_greedy_identical", "spec_acceptance_rate", "spec_tokens_per_target_pass"}
SPECULATIVE_KEYS |= {"spec_speedup_vs_plain", "hf_assisted_speedup_vs_plain", "spec_prompt_lookup_speedup_vs_plain"}
SPECULATIVE_KEYS |= {"spec_verify_cost", "spec_draft_cost_ratio", "spec_predicted_speedup", "spec_moe_speedup_vs_plain"}
SPECULATIVE_KEYS |= {"spec_moe_verify_cost", "spec_draft_shortlist", "spec_speedup_vs_plain_full_vocab"}
# every measurement runs, on fewer tokens and repeats than the real benchmark (seconds, not minutes)
FEWER = {
    engine: {
        "engine_vs_generate": dict(new_tokens=16, repeats=1),
        "prefill_and_decode": dict(decode_tokens=8, repeats=1),
        "view_ms": dict(repeats=3),
        "trace_view_ms": dict(steps=20, repeats=3),
        "inside_figures": dict(tokens=60, repeats=1),
        "real_figures": dict(decode_tokens=8, repeats=1),
    },
    cli.real_spec: {
        "bundled_benchmark": dict(new_tokens=24, repeats=1),
        "real_spec_figures": dict(new_tokens=12, repeats=1),
    },
    cli.classroom: {"class_figures": dict(publishes=3)},  # each publish waits 2 s for the followers to poll
}


def test_bench_writes_every_figure_to_json_and_prints_a_table(tmp_path, capsys, monkeypatch):
    for module, functions in FEWER.items():
        for name, fewer in functions.items():
            monkeypatch.setattr(module, name, partial(getattr(module, name), **fewer))
    # one of the drafts' three other requests (tests/test_speculative_smollm2.py checks the drafts) and a short self-draft
    monkeypatch.setattr(drafting, "OTHER_REQUESTS", drafting.OTHER_REQUESTS[:1])
    monkeypatch.setattr(cli.real_spec, "SELF_DRAFT_TOKENS", 8)
    path = tmp_path / "bench.json"
    cli.main(["--no-quantization", "--no-serving", "--json", str(path)])
    figures = json.loads(path.read_text())
    assert figures.keys() >= ISSUE_KEYS | SPECULATIVE_KEYS and figures["spec_greedy_identical"] is True
    # a cost ratio, timed: > 0 only (a run moves by a third; the bench reports it, a test does not time it)
    assert figures["spec_moe_identical"] is True and figures["spec_verify_cost"] > 0
    assert 0 <= figures["spec_acceptance_rate"] <= 1 and 1 <= figures["spec_tokens_per_target_pass"] <= 5
    assert figures["new_tokens"] == 16 and figures["model"] == "storyteller-llama-6m"
    assert all(figures[k] > 0 for k in ISSUE_KEYS - {"model", "transformers_version"})
    assert abs(figures["engine_vs_generate"] - figures["engine_tokens_per_s"] / figures["generate_tokens_per_s"]) < 0.01
    if real_model.is_available():  # SmolLM2's keys, from a short greedy run
        assert figures["real_model"] == real_model.REAL_MODEL_NAME and figures["real_decode_tokens_per_s"] > 0
    printed = capsys.readouterr().out
    assert "engine_vs_generate" in printed and "goal >= 1.5" in printed


def test_python_dash_m_inference_bench_is_the_cli():
    done = subprocess.run(
        [sys.executable, "-m", "inference.bench", "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "python -m inference.bench" in done.stdout and "--pages" in done.stdout, done.stderr
