"""Serving: the seeded trace, the replay and what it measured, the saturated window, the sweep's knee, the roofline,
the models served, and sentences filled from the same numbers as the charts."""

import json
import threading

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig

from inference.core import real_model
from inference.core.model_config import decoder_config_fields
from inference.core.paths import BUNDLED_MODEL_DIR, PUBLIC_MODELS_FILE
from inference.engines.client import LLAMACPP
from inference.lessons.serving import capacity, models, request_trace, text
from inference.lessons.serving.figures import gantt_figure, traffic_figure
from inference.lessons.serving.replay import SLO, EngineTarget, ReplayResult, RequestRecord, replay, summarize
from inference.lessons.serving.request_trace import SHAPES, poisson_trace
from inference.lessons.serving.roofline import Roof, ServedModel, decode_pass, prefill_pass
from tests.fake_engine import StreamingStandIn

pytestmark = pytest.mark.unit

TOY = ServedModel(matmul_parameters=1000, other_parameters=10, layers=2, query_width=8, kv_width=4)


def greedy_equals_solo(result: ReplayResult) -> list[int]:
    """Requests whose tokens differ from the same request sent alone to the same engine (must be none: greedy)."""
    records = {r.index: r.token_ids for r in result.records}
    with result.target.client() as client:
        alone = {
            q.index: tuple(client.complete(list(q.prompt_ids), q.reply_tokens).token_ids) for q in result.trace.requests
        }
    return [i for i, tokens in alone.items() if records.get(i) != tokens]


def test_trace_is_reproducible_from_its_seed_and_the_rate_only_rescales_its_clock():
    a = poisson_trace("long document", 1.0, 12, seed=3, vocab_size=4096)
    assert a == poisson_trace("long document", 1.0, 12, seed=3, vocab_size=4096)
    assert a.requests != poisson_trace("long document", 1.0, 12, seed=4, vocab_size=4096).requests
    fast = poisson_trace("long document", 4.0, 12, seed=3, vocab_size=4096)
    assert [(r.prompt_ids, r.reply_tokens) for r in a.requests] == [
        (r.prompt_ids, r.reply_tokens) for r in fast.requests
    ]
    assert [r.arrival_s / 4 for r in a.requests] == pytest.approx([r.arrival_s for r in fast.requests])
    for args, match in (((0, 5), "rate"), ((1, 0), "at least 1")):
        with pytest.raises(ValueError, match=match):
            poisson_trace("short chat", *args, seed=0, vocab_size=10)
    with pytest.raises(ValueError, match="short chat"):
        poisson_trace("poetry", 1, 5, seed=0, vocab_size=10)


def test_trace_arrivals_are_poisson_at_the_asked_rate_and_lengths_in_the_shapes_range():
    trace = poisson_trace("short chat", 5.0, 20_000, seed=1, vocab_size=300)
    gaps = np.diff([r.arrival_s for r in trace.requests])
    assert trace.requests[0].arrival_s == 0.0
    assert gaps.mean() == pytest.approx(1 / 5.0, rel=0.03) and gaps.std() / gaps.mean() == pytest.approx(1, rel=0.03)
    shape, replies = SHAPES["short chat"], [r.reply_tokens for r in trace.requests]
    assert shape.prompt.low <= min(r.prompt_tokens for r in trace.requests) <= shape.prompt.high
    assert shape.reply.low <= min(replies) and max(replies) <= shape.reply.high
    assert np.median(replies) == pytest.approx(shape.reply.median, abs=1)
    assert all(r.prompt_ids[0] == 0 and all(0 < t < 300 for t in r.prompt_ids[1:]) for r in trace.requests[:50])


def test_asked_rate_is_the_reply_tokens_before_the_last_arrival_over_the_arrival_span():
    trace = poisson_trace("short chat", 2.0, 16, 0, 4096)
    by_hand = sum(r.reply_tokens for r in trace.requests[:15]) / trace.requests[15].arrival_s
    assert trace.asked_tokens_per_s() == pytest.approx(by_hand)
    assert np.isnan(poisson_trace("short chat", 2.0, 1, 0, 4096).asked_tokens_per_s())
    assert f"asking for {by_hand:.0f} reply tokens/s" in traffic_figure(trace).layout.title.text  # the same definition


def test_real_prompts_are_the_questions_on_the_same_clock(smollm2):
    tokenizer = smollm2.tokenizer
    plain = poisson_trace("short chat", 4.0, 5, 3, 4096)
    real = request_trace.with_real_prompts(plain, tokenizer)
    assert [(r.arrival_s, r.reply_tokens) for r in real.requests] == [
        (r.arrival_s, r.reply_tokens) for r in plain.requests
    ]
    assert real.key != plain.key
    assert [request_trace.question_of(tokenizer, r) for r in real.requests] == list(request_trace.QUESTIONS[:5])
    said = tokenizer.decode(real.requests[0].prompt_ids)
    assert "<|im_start|>user" in said and said.rstrip().endswith("<|im_start|>assistant")
    short, long = (request_trace.prompt_ids(tokenizer, 0, n, "long document") for n in (80, 300))
    assert len(long) - len(short) == 220
    replies = [RequestRecord(0, 0.0, (1.0,), text="Paris.")]  # the page's table of what was asked and answered
    table = request_trace.texts_table(tokenizer, real, replies)
    assert (
        table[0] == {"request": 0, "asked": request_trace.QUESTIONS[0], "reply": "Paris."} and table[1]["reply"] == ""
    )
    ids = request_trace.text_ids  # the prefix-cache lesson's real English
    assert [len(ids(n, 3)) for n in (1, 64, 2000)] == [1, 64, 2000] and ids(64, 1) != ids(64, 2)
    words = tokenizer.decode(ids(64, 1)).split()
    assert sum(w.strip(".,;:?!").isalpha() for w in words) >= 0.8 * len(words)


def _record(index, sent, times, asked=None, **more):
    asked = len(times) if asked is None else asked
    return RequestRecord(index=index, sent_s=sent, token_times_s=tuple(times), asked_tokens=asked, **more)


def _result(records, trace=None, slots=None) -> ReplayResult:
    trace = trace or poisson_trace("short chat", 1.0, len(records), 0, 4096)
    return ReplayResult(trace, EngineTarget("http://x", LLAMACPP, "m", slots), records, pd.DataFrame())


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
    assert (s.ttft_ms[50], s.ttft_ms[95]) == pytest.approx((300, 880))
    assert (s.tpot_ms[50], s.tpot_ms[95]) == pytest.approx((100, 185))
    assert (s.e2e_ms[50], s.e2e_ms[95]) == pytest.approx((500, 980))
    assert s.duration_s == pytest.approx(4.0) and s.throughput_tokens_per_s == 3.0
    assert s.good_requests == 3 and s.goodput_requests_per_s == pytest.approx(0.75)
    short, failed = _record(0, 0.0, [0.01, 0.02], asked=5), _record(1, 0.0, [0.01], error="refused")
    assert summarize([short, failed]).good_requests == 0  # incomplete or failed is never good


def test_gantt_bars_add_up_to_each_requests_ttft_and_end_to_end_and_carry_the_reply():
    records = [
        _record(0, 0.0, (0.5, 0.6, 0.9), server_prompt_ms=200, text="Rayleigh <scattering> & light"),
        _record(1, 0.2, (0.4, 0.5), server_prompt_ms=150),
    ]
    assert records[0].waiting_s == pytest.approx(0.3)
    fig = gantt_figure(_result(records).table(), "test")
    waiting, prefill, decode = (np.asarray(trace.x, dtype=float) for trace in fig.data[:3])
    assert waiting + prefill == pytest.approx([500, 200]) and waiting + prefill + decode == pytest.approx([900, 300])
    assert np.asarray(fig.data[0].base, dtype=float) == pytest.approx([0, 200])
    hovers = [row[3] for row in json.loads(fig.to_json())["data"][2]["customdata"]]
    assert hovers == ["“Rayleigh &lt;scattering&gt; &amp; light”", ""]


def test_the_saturated_window_runs_from_the_slots_last_first_token_to_their_first_last_token():
    """Two slots, three requests: every slot busy from 0.2 s (the second first token) to 0.6 s (the second-latest
    last token); the tokens inside, each at its prompt plus the reply tokens before it."""
    trace = request_trace.burst_trace(3, prompt_tokens=4, reply_tokens=3)
    records = [_record(0, 0, (0.1, 0.3, 0.5)), _record(1, 0, (0.2, 0.4, 0.6)), _record(2, 0, (0.55, 0.7, 0.8))]
    run = capacity.saturated(_result(records, trace, slots=2))
    assert (run.batch, run.requests, run.failures) == (2, 3, 0)
    assert run.window_s == pytest.approx(0.4) and run.tokens_in_window == 5  # 0.3, 0.5, 0.4, 0.6, 0.55
    assert run.mean_context == pytest.approx((5 + 6 + 5 + 6 + 4) / 5)
    with pytest.raises(RuntimeError, match="never all decoding"):
        capacity.saturated(_result(records[:1] + [_record(1, 0, (0.6, 0.7))], trace, slots=2))


@pytest.fixture(scope="module")
def standin(bundled):
    server = StreamingStandIn(bundled)
    yield server
    server.stop()


def test_overlapping_streams_are_recorded_whole_and_equal_their_solo_runs(standin, bundled):
    trace = poisson_trace("short chat", rate_per_s=500.0, requests=6, seed=4, vocab_size=4096)
    result = replay(trace, EngineTarget(standin.url, LLAMACPP, "stand-in"), poll_interval_s=0.02)
    assert len(result.records) == 6 and not result.cancelled
    for record, request in zip(result.records, trace.requests):
        assert record.complete and len(record.token_ids) == request.reply_tokens
        assert record.sent_s >= request.arrival_s and record.token_times_s[0] > record.sent_s
        assert list(record.token_times_s) == sorted(record.token_times_s) and record.waiting_s is not None
        assert record.text == bundled.tokenizer.decode(list(record.token_ids))
    assert greedy_equals_solo(result) == []
    assert result.engine_states["running"].max() >= 2  # several streams open at once


def test_cancelling_closes_streams_in_flight_and_keeps_none_half_recorded(bundled):
    hold = threading.Event()
    server = StreamingStandIn(bundled, hold=hold)  # holds each reply after its first token
    target = EngineTarget(server.url, LLAMACPP, "stand-in")
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


def test_knee_is_the_first_rate_whose_p95_doubles():
    assert capacity.knee_index([1, 2, 4, 8], [0.5, 0.6, 1.1, 3.0]) == 2
    assert capacity.knee_index([4, 1, 2], [0.9, 0.5, 0.6]) is None


def test_counts_from_the_weight_file_match_the_loaded_model(bundled):
    served = ServedModel.from_safetensors(BUNDLED_MODEL_DIR / "model.safetensors")
    params, config = list(bundled.model.parameters()), bundled.model.config
    assert served.matmul_parameters + served.other_parameters == sum(p.numel() for p in params)
    assert served.matmul_parameters == sum(p.numel() for p in params if p.ndim == 2)
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
    fast = Roof(bandwidth_bytes_per_s=1e9, peak_flops=1e11)  # predicted decode grows with B until compute binds
    one, two, late, later = (fast.tokens_per_s(decode_pass(TOY, b, 1)) for b in (1, 2, 4096, 8192))
    assert 1.9 < two / one <= 2.0 and later / late == pytest.approx(1.0, rel=0.01)


def test_the_prediction_is_the_roofline_of_one_decode_pass_at_each_runs_context():
    served = ServedModel.from_safetensors(BUNDLED_MODEL_DIR / "model.safetensors")
    roof = Roof(bandwidth_bytes_per_s=10e9, peak_flops=100e9)
    runs = [capacity.Capacity(1, 24, 100, 2.0, 30.4, 0), capacity.Capacity(8, 24, 400, 2.0, 30.6, 0)]
    table = capacity.predicted_vs_measured(served, roof, runs)
    predicted = [roof.tokens_per_s(decode_pass(served, 1, 30)), roof.tokens_per_s(decode_pass(served, 8, 31))]
    assert list(table["predicted_tokens_per_s"]) == predicted and list(table["measured_tokens_per_s"]) == [50.0, 200.0]
    assert 1 < predicted[1] / predicted[0] <= 8


def test_the_random_model_has_smollm2_135ms_published_parameter_count_and_is_seeded(tmp_path):
    published = {e["name"]: e for e in json.loads(PUBLIC_MODELS_FILE.read_text())}[models.RANDOM]["parameters"]
    full = models.skeleton(models.random_config(vocab_size=49152))
    assert sum(p.numel() for p in full.parameters()) == published == 134_515_008
    tiny = LlamaConfig(**decoder_config_fields(4096, 64, 2, 4, 2, 128), head_dim=16, intermediate_size=128)
    a, b, c = (models.build_random_folder(seed, tmp_path / name, tiny) for seed, name in ((5, "a"), (5, "b"), (6, "c")))
    wa, wb, wc = (AutoModelForCausalLM.from_pretrained(f).state_dict() for f in (a, b, c))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert not torch.equal(wa["model.layers.0.mlp.up_proj.weight"], wc["model.layers.0.mlp.up_proj.weight"])
    assert torch.equal(wa["lm_head.weight"], wa["model.embed_tokens.weight"])  # tied


def test_the_real_model_comes_first_only_when_installed_and_the_apps_default(monkeypatch):
    monkeypatch.setattr(real_model, "is_available", lambda: True)
    monkeypatch.setenv("INFERENCE_LAB_DEFAULT_MODEL", "smollm2-135m-instruct")  # a name in any case
    assert models.model_options() == [models.REAL, models.BUNDLED]
    monkeypatch.setenv("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")
    assert models.model_options() == [models.BUNDLED, models.REAL]
    monkeypatch.setattr(real_model, "is_available", lambda: False)
    assert models.model_options() == [models.BUNDLED, models.RANDOM]


def test_the_verdict_takes_its_comparison_words_from_the_measurements():
    """Batched against alone says "about the same" when the per-request spreads overlap; the asked rate is the
    traffic chart's."""
    trace = poisson_trace("short chat", 64.0, 4, 0, 4096)

    def run(tpots_s, slots):
        records = [_record(i, 0.1 * i, [0.5 + 0.1 * i + k * t for k in range(5)]) for i, t in enumerate(tpots_s)]
        return _result(records, trace, slots)

    alone = run([0.010, 0.011, 0.012, 0.013], 1)
    apart = text.one_vs_many_verdict({1: alone, 8: run([0.030, 0.031, 0.032, 0.033], 8)}, SLO(), 434e6, None)
    close = text.one_vs_many_verdict({1: alone, 8: run([0.011, 0.012, 0.010, 0.013], 8)}, SLO(), 434e6, None)
    assert "2.7x longer" in apart and "within this machine's noise" in close
    assert f"asks for {trace.asked_tokens_per_s():,.0f} tokens/s" in apart
