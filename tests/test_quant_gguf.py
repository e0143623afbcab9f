"""GGUF types on llama-server, the page's one GGUF path (issue #45): the coarse KL, the table and its sentences
(unit), and real measurements on small sizes (engine tier: needs llama-server; SmolLM2's needs its wheel too)."""

import math

import pytest

from inference.bench import real_gguf as bench_real_gguf
from inference.lessons.quantization import gguf as rg
from inference.lessons.quantization import text as say


def _result(rates: dict, tops: dict, answers: dict) -> rg.GGUFResult:
    sizes = {"f32": 538_000_000, "q8_0": 145_000_000, "q4_K_M": 105_000_000, "Q4_1": 98_000_000}
    results = {t: rg.TypeResult(t, sizes[t], rates[t], tops[t], answers[t], "The sky is blue.") for t in rates}
    return rg.GGUFResult("Why?", 30, answers["f32"], "The sky is blue.", results, len(tops["f32"]), 64, 2)


@pytest.mark.unit
def test_coarse_kl_is_zero_for_equal_lists_and_a_lower_bound_of_the_full_kl():
    p = {1: 0.7, 2: 0.2, 3: 0.1}
    assert rg.coarse_kl(p, dict(p)) == pytest.approx(0.0, abs=1e-12)
    q = {1: 0.5, 2: 0.3, 3: 0.2}
    full = sum(p[t] * math.log(p[t] / q[t]) for t in p)
    assert rg.coarse_kl(p, q) == pytest.approx(full)
    # token 3 missing from q's top list: merged into "other" on both sides, which can only lower the KL
    coarse = rg.coarse_kl(p, {1: 0.5, 2: 0.3})
    assert 0 <= coarse <= full + 1e-12


@pytest.mark.unit
def test_table_and_sentences_come_from_the_measurement():
    same = [{5: 0.9, 6: 0.1}] * 4
    other = [{5: 0.8, 6: 0.2}] * 3 + [{6: 0.6, 5: 0.4}]
    result = _result(
        {"f32": [50.0, 52.0], "q8_0": [96.0, 98.0], "q4_K_M": [90.0, 94.0], "Q4_1": [95.0, 95.0]},
        {"f32": same, "q8_0": other, "q4_K_M": other, "Q4_1": same},
        {"f32": [1, 2, 3], "q8_0": [1, 2, 4], "q4_K_M": [1, 2, 4], "Q4_1": [1, 2, 3]},
    )
    frame = rg.table(result)
    assert list(frame["GGUF type"].str.split(" ").str[0]) == ["f32", "q8_0", "q4_K_M", "Q4_1"]
    assert frame.loc[0, "speed vs f32"] == pytest.approx(1.0)
    assert frame.loc[1, "speed vs f32"] == pytest.approx(97 / 51)
    assert frame.loc[1, "same top-1 as f32"] == pytest.approx(0.75)
    assert frame.loc[3, "mean KL from f32 (nats)"] == pytest.approx(0.0, abs=1e-12)
    said = say.gguf_sentences(result, frame)
    assert "51 tokens/s" in said["speed"] and "q8_0 97 tokens/s (1.9x faster than f32)" in said["speed"]
    assert "75%" in said["quality"] and "Q4_1 holds exactly the weights" in said["quality"]
    assert "Q4_1 gave the same tokens" in said["answer"] and "q8_0, q4_K_M departed" in said["answer"]
    assert "median of 2 rounds of 64" in said["caption"]


@pytest.mark.unit
def test_a_busy_machine_is_named_and_one_token_per_second_is_singular():
    """#46: rates taken under heavy load (f32 at 1 token/s, a 35× speed-up from 5.5× fewer bytes, rounds far apart)
    give a sentence that says the machine was busy and shows medians, never "1 tokens/s" as the model's speed."""
    tops = {t: [{5: 0.9, 6: 0.1}] * 2 for t in ("f32", "q8_0", "q4_K_M", "Q4_1")}
    answers = {t: [1, 2] for t in tops}
    busy = _result(
        {"f32": [0.6, 1.4], "q8_0": [30.0, 34.0], "q4_K_M": [31.0, 33.0], "Q4_1": [34.0, 36.0]}, tops, answers
    )
    frame = rg.table(busy)
    assert frame.loc[0, "spread over rounds"] == pytest.approx(1.4 / 0.6 - 1)
    speed = say.gguf_sentences(busy, frame)["speed"]
    assert "machine was busy" in speed and "1 token/s" in speed and "1 tokens/s" not in speed
    assert "f32 differed by 133%" in speed and "more than its 5.5× fewer bytes can explain" in speed
    idle = _result(
        {"f32": [50.0, 52.0], "q8_0": [96.0, 98.0], "q4_K_M": [90.0, 94.0], "Q4_1": [95.0, 95.0]}, tops, answers
    )
    assert "busy" not in say.gguf_sentences(idle, rg.table(idle))["speed"]


@pytest.mark.unit
def test_bench_returns_nothing_with_a_reason_without_llama_server(monkeypatch, capsys):
    monkeypatch.setattr(rg.llamacpp, "is_built", lambda: False)
    assert bench_real_gguf.real_gguf_figures() == {}
    assert "llama-server is not built" in capsys.readouterr().out


@pytest.mark.engine
def test_real_ggufs_measured_on_llama_server(smollm2):
    from tests.engine_servers import require_llama_server

    require_llama_server()
    result = rg.measure(types=("f32", "Q4_1"), positions=4, decode_tokens=8, rounds=1)
    frame = rg.table(result)
    assert list(frame["GGUF type"].str.split(" ").str[0]) == ["f32", "Q4_1"]
    assert frame.loc[1, "file bytes"] == rg.real_model.GGUF_BYTES
    assert frame.loc[0, "file bytes"] > 5 * frame.loc[1, "file bytes"]
    assert (frame["decode tokens/s"] > 0).all()
    # Q4_1 holds the very weights f32 was written from: the same top token at every position, a tiny KL
    assert frame.loc[1, "same top-1 as f32"] == 1.0
    assert frame.loc[1, "mean KL from f32 (nats)"] < 1e-2
    assert result.reference_text.strip()


@pytest.mark.engine
def test_the_loaded_models_ggufs_are_measured_the_same_way(bundled):
    """The bundled model's f32 GGUF gives torch float32's top token at every position (the conversion keeps the
    weights); q4_K_M is a smaller file that drifts more."""
    import torch

    from inference.core.quantize import teacher_forced_logits
    from tests.engine_servers import require_llama_server

    require_llama_server()
    ids = bundled.tokenizer("Once upon a time", add_special_tokens=False)["input_ids"]
    vocab = bundled.model.config.vocab_size
    result = rg.measure(ids, ("f32", "q4_K_M"), None, "Once upon a time", 6, 8, 1, vocab=vocab)
    frame = rg.table(result)
    assert frame.loc[1, "size vs f32"] < 0.3 and frame.loc[1, "mean KL from f32 (nats)"] > 0
    logits = teacher_forced_logits(bundled.model, ids + result.reference_ids)[len(ids) - 1 : -1]
    f32_top = [max(p, key=p.get) for p in result.results["f32"].top]
    assert f32_top == torch.argmax(logits, dim=-1).tolist()[: len(f32_top)]
