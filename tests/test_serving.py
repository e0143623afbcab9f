"""Serving: the seeded trace, the replay and what it measured, the sweep's knee, the roofline, capacity in a closed
loop, the models served, and the page's figures and sentences filled from the same numbers."""

import json
import threading

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from inference.core import real_model
from inference.core.paths import BUNDLED_MODEL_DIR, PUBLIC_MODELS_FILE
from inference.engines.client import LLAMACPP
from inference.lessons.serving import capacity, models, request_trace, text
from inference.lessons.serving.figures import gantt_figure, sweep_figure, traffic_figure
from inference.lessons.serving.replay import (
    SLO,
    EngineTarget,
    ReplayResult,
    RequestRecord,
    percentile,
    replay,
    request_table,
    solo_run,
    summarize,
)
from inference.lessons.serving.request_trace import SHAPES, poisson_trace
from inference.lessons.serving.roofline import Roof, ServedModel, decode_pass, prefill_pass
from tests.fake_engine import StreamingStandIn

pytestmark = pytest.mark.unit

TOY = ServedModel(matmul_parameters=1000, other_parameters=10, layers=2, query_width=8, kv_width=4)


def greedy_equals_solo(result: ReplayResult) -> list[int]:
    """Requests whose tokens differ from the same request run alone on the same engine (must be none: greedy)."""
    records = {r.index: r.token_ids for r in result.records}
    return [q.index for q in result.trace.requests if records.get(q.index) != solo_run(result.target, q).token_ids]


# -- the trace -----------------------------------------------------------------------------------------------


def test_trace_is_reproducible_from_its_seed_and_the_rate_only_rescales_its_clock():
    a = poisson_trace("long document", 1.0, 12, seed=3, vocab_size=4096)
    assert a == poisson_trace("long document", 1.0, 12, seed=3, vocab_size=4096)
    assert a.requests != poisson_trace("long document", 1.0, 12, seed=4, vocab_size=4096).requests
    fast = poisson_trace("long document", 4.0, 12, seed=3, vocab_size=4096)
    assert [(r.prompt_ids, r.reply_tokens) for r in a.requests] == [
        (r.prompt_ids, r.reply_tokens) for r in fast.requests
    ]
    assert [r.arrival_s / 4 for r in a.requests] == pytest.approx([r.arrival_s for r in fast.requests])


def test_trace_arrivals_are_poisson_at_the_asked_rate_and_lengths_in_the_shapes_range():
    trace = poisson_trace("short chat", 5.0, 20_000, seed=1, vocab_size=300)
    gaps = np.diff([r.arrival_s for r in trace.requests])
    assert trace.requests[0].arrival_s == 0.0
    assert gaps.mean() == pytest.approx(1 / 5.0, rel=0.03) and gaps.std() / gaps.mean() == pytest.approx(1, rel=0.03)
    shape = SHAPES["short chat"]
    replies = [r.reply_tokens for r in trace.requests]
    assert shape.prompt.low <= min(r.prompt_tokens for r in trace.requests) <= shape.prompt.high
    assert shape.reply.low <= min(replies) and max(replies) <= shape.reply.high
    assert np.median(replies) == pytest.approx(shape.reply.median, abs=1)
    assert all(r.prompt_ids[0] == 0 and all(0 < t < 300 for t in r.prompt_ids[1:]) for r in trace.requests[:50])


def test_trace_rejects_bad_settings():
    for args, match in (((0, 5), "rate"), ((1, 0), "at least 1")):
        with pytest.raises(ValueError, match=match):
            poisson_trace("short chat", *args, seed=0, vocab_size=10)
    with pytest.raises(ValueError, match="short chat"):
        poisson_trace("poetry", 1, 5, seed=0, vocab_size=10)


def test_asked_rate_is_the_reply_tokens_before_the_last_arrival_over_the_arrival_span():
    trace = poisson_trace("short chat", 2.0, 16, 0, 4096)
    by_hand = sum(r.reply_tokens for r in trace.requests[:15]) / trace.requests[15].arrival_s
    assert trace.asked_tokens_per_s() == pytest.approx(by_hand)
    assert np.isnan(poisson_trace("short chat", 2.0, 1, 0, 4096).asked_tokens_per_s())
    title = traffic_figure(trace).layout.title.text  # the chart quotes the same definition
    assert f"asking for {by_hand:.0f} reply tokens/s" in title


def test_real_prompts_are_the_questions_on_the_same_clock(smollm2):
    tokenizer = smollm2.tokenizer
    plain = poisson_trace("short chat", 4.0, 5, 3, 4096)
    real = request_trace.with_real_prompts(plain, tokenizer)
    assert [(r.arrival_s, r.reply_tokens) for r in real.requests] == [
        (r.arrival_s, r.reply_tokens) for r in plain.requests
    ]
    assert real.key != plain.key
    assert [request_trace.question_of(tokenizer, r) for r in real.requests] == list(request_trace.QUESTIONS[:5])
    text_ = tokenizer.decode(real.requests[0].prompt_ids)
    assert "<|im_start|>user" in text_ and text_.rstrip().endswith("<|im_start|>assistant")
    short, long = (request_trace.prompt_ids(tokenizer, 0, n, "long document") for n in (80, 300))
    assert len(long) - len(short) == 220


def test_real_text_ids_have_the_exact_length_read_as_english_and_differ_by_seed(smollm2):
    ids = request_trace.text_ids
    assert [len(ids(n, 3)) for n in (1, 64, 2000)] == [1, 64, 2000]  # longer than the text: it wraps round
    assert ids(64, 1) != ids(64, 2)
    words = request_trace.real_tokenizer().decode(ids(64, 1)).split()
    assert sum(w.strip(".,;:?!").isalpha() for w in words) >= 0.8 * len(words)


# -- what a replay measured ----------------------------------------------------------------------------------


def _record(index, sent, times, asked=None, **more):
    asked = len(times) if asked is None else asked
    return RequestRecord(index=index, sent_s=sent, token_times_s=tuple(times), asked_tokens=asked, **more)


def test_percentiles_throughput_and_goodput_match_a_hand_computed_example():
    """TTFTs 0.1, 0.2, 0.3, 0.4, 1.0 s: p95 = 0.4 + 0.8 x 0.6; 12 tokens over 4 s; 3 requests within 0.35 s."""
    records = [
        _record(0, 0.0, [0.1, 0.2, 0.3]),
        _record(1, 1.0, [1.2, 1.25]),
        _record(2, 2.0, [2.3, 2.5, 2.7, 2.9]),
        _record(3, 2.5, [2.9, 3.0]),
        _record(4, 3.0, [4.0]),
    ]
    s = summarize(records, SLO(ttft_s=0.35))
    assert (s.ttft_s[50], s.ttft_s[95]) == pytest.approx((0.3, 0.88))
    assert (s.tpot_s[50], s.tpot_s[95]) == pytest.approx((0.1, 0.185))
    assert (s.e2e_s[50], s.e2e_s[95]) == pytest.approx((0.5, 0.98))
    assert s.reply_tokens == 12 and s.duration_s == pytest.approx(4.0) and s.throughput_tokens_per_s == 3.0
    assert s.good_requests == 3 and s.goodput_requests_per_s == pytest.approx(0.75)
    short, failed = _record(0, 0.0, [0.01, 0.02], asked=5), _record(1, 0.0, [0.01], error="refused")
    assert summarize([short, failed]).good_requests == 0  # incomplete or failed is never good
    assert np.isnan(percentile([None, None], 95))


def test_gantt_bars_add_up_to_each_requests_ttft_and_end_to_end_and_carry_the_reply():
    records = [
        _record(0, 0.0, (0.5, 0.6, 0.9), server_prompt_ms=200, text="Rayleigh <scattering> & light"),
        _record(1, 0.2, (0.4, 0.5), server_prompt_ms=150),
    ]
    assert records[0].waiting_s == pytest.approx(0.3)
    fig = gantt_figure(request_table(records), "test")
    waiting, prefill, decode = (np.asarray(trace.x, dtype=float) for trace in fig.data[:3])
    assert waiting + prefill == pytest.approx([500, 200]) and waiting + prefill + decode == pytest.approx([900, 300])
    assert np.asarray(fig.data[0].base, dtype=float) == pytest.approx([0, 200])
    hovers = [row[3] for row in json.loads(fig.to_json())["data"][2]["customdata"]]
    assert hovers == ["“Rayleigh &lt;scattering&gt; &amp; light”", ""]


@pytest.fixture(scope="module")
def standin(bundled):
    server = StreamingStandIn(bundled)
    yield server
    server.stop()


def test_overlapping_streams_are_recorded_whole_and_equal_their_solo_runs(standin, bundled):
    target = EngineTarget(standin.url, LLAMACPP, "stand-in", None)
    trace = poisson_trace("short chat", rate_per_s=500.0, requests=6, seed=4, vocab_size=4096)
    result = replay(trace, target, poll_interval_s=0.02)
    assert len(result.records) == 6 and not result.cancelled
    for record, request in zip(result.records, trace.requests):
        assert record.complete and len(record.token_ids) == request.reply_tokens
        assert record.sent_s >= request.arrival_s and record.token_times_s[0] > record.sent_s
        assert list(record.token_times_s) == sorted(record.token_times_s)
        assert record.text == bundled.tokenizer.decode(list(record.token_ids))
        assert record.waiting_s is not None
    assert greedy_equals_solo(result) == []
    assert result.engine_states["running"].max() >= 2  # several streams open at once


def test_cancelling_closes_streams_in_flight_and_keeps_none_half_recorded(bundled):
    hold = threading.Event()
    server = StreamingStandIn(bundled, hold=hold)  # holds each reply after its first token
    target = EngineTarget(server.url, LLAMACPP, "stand-in", None)
    try:
        trace = poisson_trace("long document", rate_per_s=1000.0, requests=3, seed=0, vocab_size=4096)
        result = replay(trace, target, should_stop=lambda: len(server.active) == 3)
        assert result.cancelled and len(result.records) == 3
        assert all(r.error == "cancelled" and not r.complete for r in result.records)
        hold.set()
        assert replay(poisson_trace("short chat", 1.0, 1, seed=0, vocab_size=4096), target).records[0].complete
    finally:
        hold.set()
        server.stop()


def test_closed_loop_counts_the_tokens_of_the_window(standin):
    target = EngineTarget(standin.url, LLAMACPP, "stand-in", 3)
    result = capacity.closed_loop(target, clients=3, requests_per_client=3, prompt_tokens=6, reply_tokens=5)
    assert result.failures == 0 and (result.slots, result.clients) == (3, 3)
    assert 0 < result.tokens_in_window < 45 and result.window_s > 0  # fewer than all 3 x 3 x 5 arrived inside
    assert 6 <= result.mean_context <= 6 + 4  # prompt plus the reply tokens before each one


# -- the sweep and the roofline -----------------------------------------------------------------------------


def test_knee_is_the_first_rate_whose_p95_doubles_and_the_sweep_draws_asked_and_streamed():
    assert capacity.knee_index([1, 2, 4, 8], [0.5, 0.6, 1.1, 3.0]) == 2
    assert capacity.knee_index([4, 1, 2], [0.9, 0.5, 0.6]) is None
    table = pd.DataFrame(
        {
            "rate_per_s": [0.5, 2.0, 8.0],
            "asked_tokens_per_s": [25.0, 100.0, 400.0],
            "streamed_tokens_per_s": [25.0, 99.0, 210.0],
            "throughput_tokens_per_s": [24.0, 95.0, 205.0],
            "ttft_p95_ms": [20.0, 25.0, 900.0],
            "e2e_p95_ms": [80.0, 90.0, 2000.0],
        }
    )
    lines = {trace.name: list(trace.y) for trace in sweep_figure(table, 2).data}
    assert lines["asked during the arrivals"] == [25.0, 100.0, 400.0]
    assert lines["streamed in the same window"] == [25.0, 99.0, 210.0]


def test_counts_from_the_weight_file_match_the_loaded_model(bundled):
    served = ServedModel.from_safetensors(BUNDLED_MODEL_DIR / "model.safetensors")
    params = list(bundled.model.parameters())
    assert served.matmul_parameters + served.other_parameters == sum(p.numel() for p in params)
    assert served.matmul_parameters == sum(p.numel() for p in params if p.ndim == 2)
    config = bundled.model.config
    assert served.layers == config.num_hidden_layers
    assert served.query_width == config.num_attention_heads * config.head_dim
    assert served.kv_width == config.num_key_value_heads * config.head_dim


def test_decode_and_prefill_costs_by_hand_and_the_bound_switches_at_the_ridge():
    cost = decode_pass(TOY, batch=3, context=5)
    assert (cost.flops, cost.bytes) == (3 * (2000 + 4 * 2 * 8 * 5), 4000 + 3 * 5 * 64)
    prefill = prefill_pass(TOY, 4)
    assert (prefill.flops, prefill.bytes) == (2000 * 4 + 4 * 2 * 8 * 10, 4000 + 4 * 64)  # attention over 1..4
    roof = Roof(bandwidth_bytes_per_s=1000.0, peak_flops=4000.0)
    assert roof.ridge_intensity == 4.0
    small, big = decode_pass(TOY, 1, 1), prefill_pass(TOY, 64)
    assert roof.bound(small) == "memory" and roof.pass_seconds(small) == pytest.approx(small.bytes / 1000)
    assert roof.bound(big) == "compute" and roof.pass_seconds(big) == pytest.approx(big.flops / 4000)


def test_predicted_decode_grows_with_batch_until_compute_binds():
    roof = Roof(bandwidth_bytes_per_s=1e9, peak_flops=1e11)
    one, two, late, later = (capacity.predicted(TOY, roof, b, 1) for b in (1, 2, 4096, 8192))
    assert 1.9 < two / one <= 2.0 and later / late == pytest.approx(1.0, rel=0.01)


def test_capacity_prediction_is_the_roofline_of_one_decode_pass_at_each_runs_context():
    served = ServedModel.from_safetensors(BUNDLED_MODEL_DIR / "model.safetensors")
    roof = Roof(bandwidth_bytes_per_s=10e9, peak_flops=100e9)
    one, many = capacity.Capacity(1, 8, 100, 2.0, 30.4, 0), capacity.Capacity(8, 8, 400, 2.0, 30.6, 0)
    result = capacity.compare({1: one, 8: many}, served, roof)
    assert result.predicted_one == roof.tokens_per_s(decode_pass(served, 1, 30))
    assert result.predicted_many == roof.tokens_per_s(decode_pass(served, 8, 31))
    assert result.measured_ratio == 4.0 and 1 < result.predicted_ratio <= 8
    table = capacity.predicted_vs_measured(served, roof, [one, many])
    assert list(table["batch"]) == [8, 8] and list(table["measured_tokens_per_s"]) == [50.0, 200.0]


# -- the models served -----------------------------------------------------------------------------------


def test_smollm2_135m_shape_is_solved_from_its_published_parameter_count_as_transformers_counts():
    shape = models.public_shape("SmolLM2-135M", vocab_size=49152)
    assert (shape.layers, shape.hidden, shape.heads, shape.kv_heads, shape.mlp_width) == (30, 576, 9, 3, 1536)
    assert shape.tied_embeddings and shape.parameters() == 134_515_008
    small = models.public_shape("SmolLM2-135M", vocab_size=4096)
    with torch.device("meta"):
        model = LlamaForCausalLM(LlamaConfig(**small.hf_config(0, 0)))
    assert sum(p.numel() for p in model.parameters()) == small.parameters()


def test_models_that_are_not_plain_llama_are_refused():
    entries = {e["name"]: e for e in json.loads(PUBLIC_MODELS_FILE.read_text())}
    with pytest.raises(ValueError, match="Mixtral"):
        models.shape_from_public_entry(entries["Mixtral-8x7B"], 4096)
    odd = dict(entries["SmolLM2-135M"], parameters=entries["SmolLM2-135M"]["parameters"] + 7)
    with pytest.raises(ValueError, match="fits no Llama layout"):
        models.shape_from_public_entry(odd, 4096)


def test_random_folder_is_seeded_loads_in_transformers_and_says_timing_only(tmp_path):
    tiny = models.LlamaShape("Tiny test", 2, 64, 4, 2, 16, 128, True, 4096)
    a, b, c = (models.build_hf_folder(tiny, seed, tmp_path / name) for seed, name in ((5, "a"), (5, "b"), (6, "c")))
    wa, wb, wc = (load_file(str(f / "model.safetensors")) for f in (a, b, c))
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert not torch.equal(wa["model.layers.0.mlp.up_proj.weight"], wc["model.layers.0.mlp.up_proj.weight"])
    model = AutoModelForCausalLM.from_pretrained(a)
    assert sum(p.numel() for p in model.parameters()) == tiny.parameters()
    assert torch.equal(model.lm_head.weight, wa["model.embed_tokens.weight"])  # tied
    assert models.LABEL in (a / "README.md").read_text()


def test_the_real_model_comes_first_only_when_installed_and_the_apps_default(monkeypatch):
    monkeypatch.setattr(real_model, "is_available", lambda: True)
    monkeypatch.setenv("INFERENCE_LAB_DEFAULT_MODEL", "smollm2-135m-instruct")  # a name in any case
    assert models.real_model_first() and models.model_options(4096)[0] == models.REAL
    monkeypatch.setenv("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")
    assert not models.real_model_first()
    monkeypatch.setattr(real_model, "is_available", lambda: False)
    monkeypatch.setenv("INFERENCE_LAB_DEFAULT_MODEL", models.REAL)
    assert not models.real_model_first() and models.REAL not in models.model_options(4096)


# -- sentences filled from the same numbers as the charts ---------------------------------------------------


def _result(tpots_s: list[float], slots: int, trace) -> ReplayResult:
    records = [_record(i, 0.1 * i, [0.5 + 0.1 * i + k * t for k in range(5)]) for i, t in enumerate(tpots_s)]
    return ReplayResult(trace, EngineTarget("http://x", LLAMACPP, "m", slots), records, pd.DataFrame())


def test_the_verdict_takes_its_comparison_words_from_the_measurements():
    """The batched-vs-alone words say "about the same" when the per-request spreads overlap; the asked rate is the
    traffic chart's."""
    trace = poisson_trace("short chat", 64.0, 4, 0, 4096)
    alone = _result([0.010, 0.011, 0.012, 0.013], 1, trace)
    apart = text.one_vs_many_verdict(
        {1: alone, 8: _result([0.030, 0.031, 0.032, 0.033], 8, trace)}, 8, SLO(), 434e6, None, 1.0
    )
    close = text.one_vs_many_verdict(
        {1: alone, 8: _result([0.011, 0.012, 0.010, 0.013], 8, trace)}, 8, SLO(), 434e6, None, 1.0
    )
    assert "2.7x longer" in apart and "within this machine's noise" in close
    asked = f"{trace.asked_tokens_per_s():,.0f} tokens/s"
    assert asked in apart and f"asking for {trace.asked_tokens_per_s():.0f}" in traffic_figure(trace).layout.title.text
