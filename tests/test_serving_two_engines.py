"""Serve many on two engines: one seeded trace replayed on llama-server (started here) and on vLLM (the shared test
server, tests/engine_servers.py), side by side. Both serve the bundled model exactly (float32, llama.cpp within
2e-5 of transformers and vLLM within 4e-6, measured), so every request's greedy reply must be the same token for
token on both engines, whatever each batched it with; each scheduler's own counters must account for exactly
the tokens the replay received."""

import pytest

from inference.engines.client import LLAMACPP, VLLM
from inference.lessons.serving import experiments, two_engines
from inference.lessons.serving.request_trace import poisson_trace
from tests.engine_servers import require_llama_server, vllm_url

pytestmark = pytest.mark.engine
SLOTS = 8  # the shared vLLM's --max-num-seqs


@pytest.fixture(scope="module")
def runs():
    require_llama_server()
    # 24 requests over ~1.2 s: the replay lasts long enough for the 0.1 s state poll to see the cache in use even
    # when a busy machine slows the engine's /metrics answers (CI once saw no sample of vLLM's cache with 12 at 40/s)
    trace = poisson_trace("short chat", rate_per_s=20.0, requests=24, seed=5, vocab_size=4096)
    model = experiments.model_on_engine(experiments.BUNDLED)
    return trace, two_engines.replay_on_engines(model, trace, SLOTS, running={VLLM: vllm_url()})


def test_both_engines_complete_every_request_with_the_same_greedy_tokens(runs):
    trace, both = runs
    assert set(both) == {LLAMACPP, VLLM}
    for run in both.values():
        assert not run.result.cancelled and len(run.result.records) == len(trace.requests)
        assert all(r.complete for r in run.result.records), [r.error for r in run.result.records if r.error]
    llama = {r.index: r.token_ids for r in both[LLAMACPP].result.records}
    other = {r.index: r.token_ids for r in both[VLLM].result.records}
    assert llama == other


def test_each_schedulers_counters_account_for_the_tokens_received_and_show_batching(runs):
    trace, both = runs
    for engine, run in both.items():
        facts = two_engines.scheduler_facts(run)
        received = sum(r.tokens for r in run.result.records)
        assert received == trace.reply_tokens
        passes = facts["forward_passes"]
        assert passes and facts["generated_per_pass"] == pytest.approx(received / passes), engine
        assert facts["generated_per_pass"] > 1, f"{engine}: 24 requests at 20/s never shared a pass"
        assert facts["peak_kv_tokens"] is not None and facts["peak_kv_tokens"] > 0, (engine, run.result.engine_states)
    llama, other = (two_engines.scheduler_facts(both[e]) for e in (LLAMACPP, VLLM))
    assert llama["peak_kv_tokens"] <= both[LLAMACPP].context * SLOTS  # within the cells reserved at start
    assert other["preemptions"] == 0  # 256 MiB of blocks hold far more than 8 short requests


def test_the_side_by_side_table_and_verdict_name_both_engines_numbers(runs):
    trace, both = runs
    table = two_engines.side_by_side(both)
    assert list(table["engine"]) == [LLAMACPP, VLLM] and (table["throughput_tokens_per_s"] > 0).all()
    assert (table["tpot_p95_ms"] >= table["tpot_p50_ms"]).all() and (table["ttft_p95_ms"] > 0).all()
    facts = two_engines.scheduler_table(both)
    assert list(facts.columns) == [LLAMACPP, VLLM] and len(facts) == len(two_engines.FACT_NAMES)
    weights = experiments.weight_file().stat().st_size
    text = two_engines.verdict(both, weights)
    a = both[LLAMACPP].result.summary().throughput_tokens_per_s
    assert f"{a:,.0f}" in text and f"{weights / 1e6:,.0f} MB" in text
