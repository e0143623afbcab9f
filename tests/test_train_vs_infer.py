"""Training vs inference, the lesson and its command: inference leaves every tensor bit for bit equal, training on a
copy changes the copy's tensors and lowers the loss (never the loaded model's), Reset restores the copy, the FLOP
counts equal the formula for the bundled model's shapes, the memory parts are the tensors' bytes."""

import csv
import json

import pytest
import torch

from inference import train_vs_infer
from inference.core.flops import FlopCount
from inference.core.loader import encode_prompt
from inference.core.paths import BUNDLED_MODEL_DIR
from inference.lessons.training_vs_inference import cost as costs
from inference.lessons.training_vs_inference import text
from inference.lessons.training_vs_inference import weights as w

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def ids(bundled):
    return encode_prompt(bundled.tokenizer, text.DEFAULT_SENTENCE)


def copies(model) -> dict[str, torch.Tensor]:
    return {name: t.detach().clone() for name, t in w.named_tensors(model)}


def bits_differ(a: dict[str, torch.Tensor], model) -> list[str]:
    """Names of the tensors whose bits differ from `a` (bytes compared, so -0.0 vs 0.0 or a NaN would count)."""
    now = dict(w.named_tensors(model))
    return [n for n, t in a.items() if t.view(torch.uint8).ne(now[n].detach().contiguous().view(torch.uint8)).any()]


def test_inference_leaves_every_tensor_bit_for_bit_equal_and_the_fingerprint_sees_one_bit(bundled, ids):
    before = copies(bundled.model)
    check = w.run_inference_many(bundled.model, bundled.tokenizer, ids, passes=3)
    assert bits_differ(before, bundled.model) == []
    assert not check.changed and check.fingerprint_before == w.fingerprint(bundled.model)
    assert check.tensors == len(before)
    twin, _ = w.trainable_copy(bundled.model)
    with torch.no_grad():
        twin.model.layers[3].mlp.down_proj.weight.view(torch.int32)[0, 0] ^= 1  # the lowest bit of one float
    assert w.fingerprint(twin) != check.fingerprint_after


def test_training_moves_the_copy_only_and_reset_restores_it(bundled, ids):
    shared_before = copies(bundled.model)
    before = w.next_token_distribution(bundled.model, bundled.tokenizer, ids)
    copy_ = w.TrainingCopy.of(bundled.model)
    result = w.train_and_compare(copy_, bundled.tokenizer, ids, 2)
    assert len(result.losses) == 3 and result.losses[-1] < result.losses[0]
    assert result.after.target_probability > before.target_probability
    assert bits_differ(shared_before, copy_.model) and bits_differ(shared_before, bundled.model) == []
    assert not any(p.requires_grad for p in bundled.model.parameters())
    assert 0 < result.bytes_changed <= result.bytes_total
    rows = w.chart_rows(bundled.tokenizer, before, result.after)
    assert rows[0][2] == max(r[2] for r in rows)  # most likely after training first
    copy_.reset()
    assert w.fingerprint(copy_.model) == w.fingerprint(bundled.model) and copy_.steps == 0
    with pytest.raises(ValueError, match="at least two tokens"):
        w.next_token_distribution(bundled.model, bundled.tokenizer, [0])


def test_the_flop_counts_equal_the_formula_for_the_bundled_models_shapes(bundled):
    config = json.loads((BUNDLED_MODEL_DIR / "config.json").read_text())
    h, inter, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    heads, kv, hd, vocab = config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"], 4096
    per_layer = h * heads * hd * 2 + h * kv * hd * 2 + 3 * h * inter  # q, o; k, v; gate, up, down
    tokens = 8
    attention = sum(layers * 2 * 2 * heads * hd * (position + 1) for position in range(tokens))
    expected_forward = 2 * (layers * per_layer + vocab * h) * tokens + attention
    assert costs.forward_flops(FlopCount.of(bundled.model), tokens) == expected_forward
    n = sum(p.numel() for p in bundled.model.parameters())  # tied: the output layer is the embedding
    assert expected_forward / tokens == pytest.approx(2 * n, rel=0.05)  # "about 2N per token"


def test_a_step_cost_times_both_counts_the_memory_and_drops_its_copy(bundled, ids):
    shared_before = copies(bundled.model)
    cost = costs.measure_step_cost(bundled.model, bundled.tokenizer, ids, repeats=2)
    assert cost.forward.repeats == cost.train_step.repeats == 2 and cost.flops_train == 3 * cost.flops_forward
    assert cost.tokens == len(ids) - 1 and bits_differ(shared_before, bundled.model) == []
    mem, n = cost.memory, sum(p.numel() for p in bundled.model.parameters())
    assert mem.weights == mem.gradients == 4 * n and mem.optimizer_moments == 2 * 4 * n  # float32, tied once
    config = json.loads((BUNDLED_MODEL_DIR / "config.json").read_text())
    assert (
        mem.kv_cache
        == 2 * config["num_hidden_layers"] * config["num_key_value_heads"] * config["head_dim"] * len(ids) * 4
    )
    assert 0 < mem.activations < mem.weights and mem.training > 4 * mem.inference


def test_once_vs_every_request_reads_the_bundled_models_own_training_record():
    bill = costs.bundled_training_bill()
    with open(BUNDLED_MODEL_DIR / "training_log.csv") as f:
        last = list(csv.DictReader(f))[-1]
    assert bill.tokens == int(last["tokens_seen"]) and bill.steps == int(last["step"])
    assert bill.seconds == pytest.approx(float(last["elapsed_s"]))
    assert costs.requests_to_match_by_time(bill, 500.0, 1) == pytest.approx(bill.seconds * 2 / 0.5)
    assert costs.requests_to_match_by_flops(bill.tokens, 200) == 3 * bill.tokens / 200


def test_the_command_prints_every_key_in_json(capsys):
    assert train_vs_infer.main(["--json", "--steps", "1", "--repeats", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("forward_ms", "train_step_ms", "flops_forward_per_token", "inference_memory_bytes"):
        assert out[key] > 0, key
    assert out["weights_changed_by_inference"] is False and out["weights_changed_by_training"] is True
    assert out["fingerprint_before"] == out["fingerprint_of_the_loaded_model_at_the_end"]
    assert out["loss_after"] < out["loss_before"] and len(out["top5_after"]) == 5
    assert out["once_vs_every_request"]["requests_to_match_training_time"] > 0
    assert train_vs_infer.main(["--text", "", "--steps", "1"]) == 2
    assert "at least two tokens" in capsys.readouterr().err
