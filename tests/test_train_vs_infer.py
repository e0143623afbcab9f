"""Training vs inference, the lesson and its command: inference leaves every tensor bit for bit equal, training on a
copy changes the copy's tensors and lowers the loss on the typed sentence (never the loaded model's), Reset restores
the copy, the FLOP counts equal the formula for the bundled model's shapes, the memory parts are the tensors' bytes."""

import csv
import json

import plotly.graph_objects as go
import pytest
import torch

from inference import train_vs_infer
from inference.core.flops import FlopCount
from inference.core.loader import encode_prompt
from inference.core.paths import BUNDLED_MODEL_DIR
from inference.lessons.training_vs_inference import figures, text
from inference.lessons.training_vs_inference.cost import (
    PUBLISHED,
    bundled_training_bill,
    forward_flops,
    measure_step_cost,
    memory,
    requests_to_match_by_flops,
    requests_to_match_by_time,
    train_flops,
)
from inference.lessons.training_vs_inference.weights import (
    TrainingCopy,
    chart_rows,
    fingerprint,
    named_tensors,
    next_token_distribution,
    run_inference_many,
    train_and_compare,
    trainable_copy,
)

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def sentence_ids(bundled):
    return encode_prompt(bundled.tokenizer, text.DEFAULT_SENTENCE)


def copies(model) -> dict[str, torch.Tensor]:
    return {name: t.detach().clone() for name, t in named_tensors(model)}


def bit_equal(a: dict[str, torch.Tensor], model) -> list[str]:
    """Names of the tensors whose bits differ from `a` (bytes compared, so -0.0 vs 0.0 or a NaN would count)."""
    now = dict(named_tensors(model))
    return [n for n, t in a.items() if t.view(torch.uint8).ne(now[n].detach().contiguous().view(torch.uint8)).any()]


def test_inference_leaves_every_tensor_bit_for_bit_equal(bundled, sentence_ids):
    before = copies(bundled.model)
    check = run_inference_many(bundled.model, sentence_ids, passes=5)
    assert bit_equal(before, bundled.model) == []
    assert not check.changed and check.fingerprint_before == check.fingerprint_after == fingerprint(bundled.model)
    assert check.tensors == check.tensors_bit_equal == len(before)


def test_the_fingerprint_sees_a_single_flipped_bit(bundled):
    twin = trainable_copy(bundled.model)
    before = fingerprint(twin)
    with torch.no_grad():
        weight = twin.model.layers[3].mlp.down_proj.weight
        weight.view(torch.int32)[0, 0] ^= 1  # the lowest bit of one float
    assert fingerprint(twin) != before


def test_training_changes_the_copy_lowers_the_loss_and_never_touches_the_loaded_model(bundled, sentence_ids):
    shared_before = copies(bundled.model)
    before = next_token_distribution(bundled.model, bundled.tokenizer, sentence_ids)
    copy_ = TrainingCopy.of(bundled.model)
    result = train_and_compare(copy_, bundled.tokenizer, sentence_ids, 3)
    assert len(result.losses) == 4 and result.losses[-1] < result.losses[0]
    assert result.after.target_probability > before.target_probability
    assert result.fingerprint_after != fingerprint(bundled.model)
    assert len(bit_equal(shared_before, copy_.model)) > 0  # the copy moved
    assert bit_equal(shared_before, bundled.model) == []  # the loaded model did not
    assert not any(p.requires_grad for p in bundled.model.parameters())
    moved = {c.name: c for c in result.changes}
    assert moved["model.layers.0.self_attn.q_proj.weight"].relative_change > 0
    assert 0 < sum(c.bytes_changed for c in result.changes) <= sum(c.bytes_total for c in result.changes)
    rows = chart_rows(bundled.tokenizer, before, result.after)
    assert rows[0][2] == max(r[2] for r in rows)  # most likely after training first


def test_reset_restores_the_copy_bit_for_bit(bundled, sentence_ids):
    copy_ = TrainingCopy.of(bundled.model)
    copy_.train(sentence_ids, 2)
    assert fingerprint(copy_.model) != fingerprint(bundled.model)
    copy_.reset()
    assert fingerprint(copy_.model) == fingerprint(bundled.model)
    assert copy_.steps == 0 and copy_.losses == []


def test_a_sentence_of_one_token_is_refused(bundled):
    with pytest.raises(ValueError, match="at least two tokens"):
        next_token_distribution(bundled.model, bundled.tokenizer, [0])


def test_the_flop_counts_equal_the_formula_for_the_bundled_models_shapes(bundled):
    config = json.loads((BUNDLED_MODEL_DIR / "config.json").read_text())
    h, inter, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    heads, kv, hd, vocab = config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"], 4096
    per_layer = h * heads * hd * 2 + h * kv * hd * 2 + 3 * h * inter  # q, o; k, v; gate, up, down
    tokens = 8
    attention = sum(layers * 2 * 2 * heads * hd * (position + 1) for position in range(tokens))
    expected_forward = 2 * (layers * per_layer + vocab * h) * tokens + attention
    count = FlopCount.of(bundled.model)
    assert forward_flops(count, tokens) == expected_forward
    assert train_flops(count, tokens) == 3 * expected_forward
    n = sum(p.numel() for p in bundled.model.parameters())  # tied: the output layer is the embedding
    assert forward_flops(count, tokens) / tokens == pytest.approx(2 * n, rel=0.05)  # "about 2N per token"


def test_the_memory_parts_are_the_tensors_bytes(bundled, sentence_ids):
    twin = trainable_copy(bundled.model)
    mem = memory(bundled.model, twin, sentence_ids)
    n = sum(p.numel() for p in bundled.model.parameters())
    assert mem.weights == mem.gradients == 4 * n  # float32, every weight trainable, the tied one once
    assert mem.optimizer_moments == 2 * 4 * n
    config = json.loads((BUNDLED_MODEL_DIR / "config.json").read_text())
    layers, kv, hd = config["num_hidden_layers"], config["num_key_value_heads"], config["head_dim"]
    assert mem.kv_cache == 2 * layers * kv * hd * len(sentence_ids) * 4
    assert 0 < mem.activations < mem.weights
    assert mem.training == mem.weights + mem.gradients + mem.optimizer_moments + mem.activations > 4 * mem.inference


def test_the_step_cost_times_both_and_drops_its_copy(bundled, sentence_ids):
    shared_before = copies(bundled.model)
    cost = measure_step_cost(bundled.model, sentence_ids, repeats=2)
    assert (
        cost.forward.repeats == cost.train_step.repeats == 2
        and min(cost.forward.times_ms + cost.train_step.times_ms) > 0
    )
    assert cost.tokens == len(sentence_ids) - 1 and cost.flops_train == 3 * cost.flops_forward
    assert bit_equal(shared_before, bundled.model) == []
    for fig in (figures.step_time_figure(cost), figures.memory_figure(cost.memory, presenter=True)):
        go.Figure(fig.to_dict())


def test_once_vs_every_request_reads_the_bundled_models_own_training_record():
    bill = bundled_training_bill()
    with open(BUNDLED_MODEL_DIR / "training_log.csv") as f:
        last = list(csv.DictReader(f))[-1]
    assert bill.tokens == int(last["tokens_seen"]) and bill.steps == int(last["step"])
    assert bill.seconds == pytest.approx(float(last["elapsed_s"]))
    assert requests_to_match_by_time(bill, 500.0, 1) == pytest.approx(bill.seconds * 2 / 0.5)
    assert requests_to_match_by_flops(bill.tokens, 200) == 3 * bill.tokens / 200
    assert all(b.source for b in PUBLISHED) and {b.tokens for b in PUBLISHED} == {2 * 10**12}
    fig = figures.break_even_figure(bill.seconds * 2 / 3600, 0.5, requests_to_match_by_time(bill, 500.0, 1))
    go.Figure(fig.to_dict())


def test_the_command_prints_every_key_in_json(capsys):
    assert train_vs_infer.main(["--json", "--steps", "2", "--repeats", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in (
        "forward_ms",
        "train_step_ms",
        "flops_forward_per_token",
        "flops_train_per_token",
        "inference_memory_bytes",
        "training_memory_bytes",
    ):
        assert out[key] > 0, key
    assert out["weights_changed_by_inference"] is False and out["weights_changed_by_training"] is True
    assert out["fingerprint_before"] == out["fingerprint_of_the_loaded_model_at_the_end"]
    assert out["loss_after"] < out["loss_before"]
    assert len(out["top5_before"]) == len(out["top5_after"]) == 5
    assert out["top5_after"][0]["token"] == "␣moon"  # the sentence's last token, learned
    assert out["flops_train_per_token"] == 3 * out["flops_forward_per_token"]
    assert out["once_vs_every_request"]["requests_to_match_training_time"] > 0


def test_the_command_refuses_a_sentence_of_one_token(capsys):
    assert train_vs_infer.main(["--text", "", "--steps", "1"]) == 2
    assert "at least two tokens" in capsys.readouterr().err
