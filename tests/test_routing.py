"""Routing records of a Mixture-of-Experts model against the router recomputed from each layer's input."""

import copy
import json
import math

import pytest
import torch
from transformers import MixtralConfig

from inference.core import routing
from inference.core.loader import encode_prompt
from inference.lessons.moe import experts as expert_work
from inference.lessons.moe import scale as moe
from inference.training import moe_stats
from inference.training.evaluate import score_stream
from inference.training.moe_stats import route
from tests.conftest import transformers_greedy

pytestmark = pytest.mark.unit

STORIES = [
    "Once upon a time, there was a little girl named Lily. She loved to play in the park with her red ball.",
    "Tom had a big dog. The dog liked to run and jump. One day, the dog found a stick and gave it to Tom.",
    "The sun was hot. Mia went to the beach with her mom. They built a sand castle and ate ice cream.",
]


@pytest.fixture(scope="session")
def tiny_moe(bundled):
    """A seeded random Mixtral (2 layers, 4 experts, 2 per token) with the bundled tokenizer.
    Router weights are drawn 10x larger than the rest, so its choices are not near-ties."""
    tokenizer = bundled.tokenizer
    config = MixtralConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        num_local_experts=4,
        num_experts_per_tok=2,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        sliding_window=None,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )
    model = moe.random_model(config, seed=7)
    gen = torch.Generator().manual_seed(8)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.mlp.gate.weight.normal_(0.0, 0.2, generator=gen)
    model.eval().requires_grad_(False)
    model.generation_config.eos_token_id = 0
    model.generation_config.pad_token_id = 0
    return model, tokenizer


def stream(tokenizer) -> list[int]:
    ids = [0]
    for story in STORIES:
        ids += tokenizer(story, add_special_tokens=False)["input_ids"] + [0]
    return ids


def test_load_counts_sum_to_tokens_times_k(tiny_moe):
    """Each token makes k picks in every layer: every layer's counts add up to tokens x k."""
    model, tokenizer = tiny_moe
    ids = stream(tokenizer)
    stats = routing.load_stats(route(model, ids, window=32))
    assert stats["tokens"] == len(ids)
    assert [sum(row) for row in stats["counts"]] == [len(ids) * 2] * 2
    assert [sum(row) for row in stats["first_choice_counts"]] == [len(ids)] * 2
    assert all(math.isclose(sum(row), 1.0) for row in stats["fractions"])


def test_top_tokens_count_exactly_what_the_router_sent(tiny_moe):
    """An expert's token counts = occurrences of that token among the tokens routed to it."""
    model, tokenizer = tiny_moe
    ids = stream(tokenizer)
    recorded = route(model, ids)
    table = routing.expert_top_tokens(recorded, tokenizer, top=5)
    experts = recorded.chosen()[0]
    for layer in range(2):
        for expert in range(4):
            for row in table[layer][expert]:
                positions = [i for i, t in enumerate(ids) if t == row["token_id"]]
                assert row["count"] == sum(int(expert in experts[layer, i].tolist()) for i in positions)
                assert row["occurrences"] == len(positions) >= row["count"]


def test_mixture_is_what_the_sparse_block_outputs(tiny_moe):
    """Weighted sum of the chosen experts' outputs = the sparse block's own output for that token."""
    model, tokenizer = tiny_moe
    ids = stream(tokenizer)[:20]
    inputs = expert_work.mlp_inputs(model, ids)
    for layer in range(2):
        block_out = model.model.layers[layer].mlp(inputs[layer].unsqueeze(0))[0]
        for t in (0, 7, 19):
            mix = expert_work.mixture(model, inputs[layer, t], layer)
            assert math.isclose(sum(mix.weights), 1.0, rel_tol=1e-6)
            torch.testing.assert_close(mix.mixture, block_out[t], atol=1e-5, rtol=1e-4)


def test_top1_variant_routes_one_expert_and_its_bits_per_byte_are_measured(tiny_moe):
    """The top-1 experiment: one expert per token, the shared model untouched, bits/byte scored."""
    model, tokenizer = tiny_moe
    before = {k: v.clone() for k, v in model.state_dict().items()}
    ids = stream(tokenizer)
    n_bytes = sum(len(s.encode()) for s in STORIES)
    top1 = routing.variant(model, k=1)
    recorded = route(top1, ids)
    assert recorded.k == 1 and [sum(r) for r in routing.load_stats(recorded)["counts"]] == [len(ids)] * 2
    # In the first layer (same input) top-1 keeps each token's first choice of the full model;
    # later layers see what the one expert wrote, so their choices may differ.
    assert torch.equal(recorded.chosen()[0][0, :, 0], route(model, ids).chosen()[0][0, :, 0])
    base = score_stream(model, ids, n_bytes).bits_per_byte
    one = score_stream(top1, ids, n_bytes).bits_per_byte
    assert one > 0 and one != base
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert model.model.layers[0].mlp.gate.top_k == 2 and model.config.num_experts_per_tok == 2


def test_switched_off_expert_never_gets_a_token(tiny_moe):
    model, tokenizer = tiny_moe
    ids = stream(tokenizer)
    off = routing.variant(model, off=(1,))
    counts = route(off, ids).counts()
    assert counts[:, 1].tolist() == [0, 0] and counts.sum(dim=1).tolist() == [len(ids) * 2] * 2
    with pytest.raises(ValueError, match="switch off"):
        routing.variant(model, off=(9,))
    with pytest.raises(ValueError, match="`k`"):
        routing.variant(model, k=4, off=(0,))


def test_variant_with_the_same_routing_equals_the_model(tiny_moe):
    """A variant with k=2 and nothing off computes the same logits: it shares the weights."""
    model, tokenizer = tiny_moe
    ids = torch.tensor([stream(tokenizer)[:40]])
    twin = routing.variant(model)
    with torch.inference_mode():
        torch.testing.assert_close(twin(ids).logits, model(ids).logits, atol=1e-5, rtol=1e-5)
    assert twin.model.embed_tokens.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()


def test_budget_counts_active_parameters_and_bytes_read(tiny_moe, bundled):
    """Active = total - (E - k) experts per layer; bytes read per token = held - unused experts
    (tied embeddings: the output layer reads the whole table anyway). A dense model reads all."""
    model, _ = tiny_moe
    b = routing.budget(model)
    one_expert = 2 * 48 * 64 + 64 * 48
    assert b.expert_parameters == 2 * 4 * one_expert
    assert b.active_parameters == b.total_parameters - 2 * 2 * one_expert
    assert (
        b.total_parameters == moe.parameter_counts(model)[0] and b.active_parameters == moe.parameter_counts(model)[1]
    )
    assert b.tied_embeddings and b.bytes_read_per_token == b.bytes_held - 2 * 2 * one_expert * 4
    dense = routing.budget(bundled.model)
    assert dense.active_parameters == dense.total_parameters == bundled.info.parameters
    assert dense.bytes_read_per_token == dense.bytes_held


def test_token_expert_information_is_bounded_by_the_expert_entropy(tiny_moe):
    model, tokenizer = tiny_moe
    info = routing.token_expert_information(route(model, stream(tokenizer)))
    for row in info:
        assert 0 <= row["mutual_information_bits"] <= row["expert_entropy_bits"] + 1e-9 <= 2 + 1e-9


@pytest.fixture(scope="session")
def tiny_moe_folder(tiny_moe, tmp_path_factory):
    """The tiny MoE saved as a model folder (bfloat16, like the bundled one) with a training
    meta, and a corpus folder whose validation split the stats read."""
    model, tokenizer = tiny_moe
    root = tmp_path_factory.mktemp("moe")
    folder, corpus = root / "tiny-moe", root / "corpus"
    copy.deepcopy(model).to(torch.bfloat16).save_pretrained(folder)  # the fixture keeps its float32 model
    tokenizer.save_pretrained(folder)
    settings = {"validation_fraction": 0.5, "seed": 1234}
    (folder / "training_meta.json").write_text(json.dumps({"settings": settings}))
    corpus.mkdir()
    (corpus / "stories.txt").write_text("".join(s + "\n<|endoftext|>\n" for s in STORIES * 2))
    return folder, corpus


@pytest.fixture(scope="module")
def stats(tiny_moe_folder, bundled):
    folder, corpus = tiny_moe_folder
    return moe_stats.compute(folder, corpus, switch_off=[1], log=lambda *_: None, timing_repeats=1, timing_steps=4)


def test_stats_file_has_load_top_tokens_and_measured_experiments(tiny_moe_folder, stats):
    """moe_stats over the trainer's validation split: counts sum to tokens x k, top-1 and an
    expert switched off are scored in bits/byte next to the dense model, decode times measured."""
    from inference.training import corpus as corpus_io

    folder, corpus = tiny_moe_folder
    _, validation = corpus_io.split_train_validation(corpus_io.read_stories(corpus), 0.5, 1234)
    assert stats["source"]["stories"] == len(validation) and stats["source"]["bytes"] == corpus_io.utf8_bytes(
        validation
    )
    tokens = stats["source"]["tokens"]
    assert [sum(row) for row in stats["load"]["counts"]] == [tokens * 2] * 2
    names = [e["name"] for e in stats["experiments"]]
    assert names == ["top-2 (as trained)", "top-1", "expert 1 off"]
    bits = {e["name"]: e["val_bits_per_byte"] for e in stats["experiments"]}
    assert all(v > 0 for v in bits.values()) and bits["top-1"] != bits["top-2 (as trained)"]
    assert stats["dense"]["val_bits_per_byte"] > 0
    assert set(stats["decode_ms_per_token"]) == {"dense", "top-2 (as trained)", "top-1", "expert 1 off"}
    assert all(ms > 0 for ms in stats["decode_ms_per_token"].values())
    path = moe_stats.write(folder, stats)
    assert routing.read_stats(folder) == json.loads(path.read_text())


def test_engine_on_the_moe_greedy_equals_model_generate(tiny_moe):
    """The step engine runs an MoE model through transformers' forward, and greedy decoding gives
    model.generate's tokens."""
    from inference.core.run import new_trace
    from inference.sampling.pipeline import SamplingSettings

    model, tokenizer = tiny_moe
    ids = encode_prompt(tokenizer, "Once upon a time, there was")
    trace = new_trace(model, tokenizer, ids, 30, stop_at_eos=False)
    ours = [r.token_id for r in trace.run(SamplingSettings(temperature=0))]
    assert ours == transformers_greedy(model, ids, 30)


def test_routing_recorded_during_generation_equals_the_router_recomputed_from_layer_inputs(tiny_moe):
    """Prefill and every decode step record each layer's routing of the tokens they fed; those
    experts = the top-k of the router applied to each layer's MLP input, recomputed independently."""
    from inference.core.run import new_trace
    from inference.sampling.pipeline import SamplingSettings

    model, tokenizer = tiny_moe
    trace = new_trace(
        model, tokenizer, encode_prompt(tokenizer, "Tom had a big dog. The dog"), 25, seed=3, stop_at_eos=False
    )
    list(trace.run(SamplingSettings(temperature=0.9)))
    recorded = routing.trace_routing(trace)
    fed = trace.all_ids[:-1]  # the last chosen token is fed at the next step
    assert recorded.token_ids == fed and recorded.probabilities.shape == (2, len(fed), 4)
    inputs = expert_work.mlp_inputs(model, fed)
    for layer in range(2):
        experts, weights = routing.top_k(expert_work.router_from_input(model, layer, inputs[layer]), 2)
        assert torch.equal(recorded.chosen()[0][layer], experts)
        torch.testing.assert_close(recorded.chosen()[1][layer], weights, atol=1e-5, rtol=1e-5)
    assert recorded.counts().sum(dim=1).tolist() == [len(fed) * 2] * 2


def test_rewound_trace_keeps_the_routing_of_the_steps_it_keeps(tiny_moe):
    """Back and fork keep each kept step's routing; a fresh step records the new token's."""
    from inference.core.run import new_trace
    from inference.sampling.pipeline import SamplingSettings

    model, tokenizer = tiny_moe
    warm = SamplingSettings(temperature=1.0)
    trace = new_trace(model, tokenizer, encode_prompt(tokenizer, "Mia went to"), 12, seed=1, stop_at_eos=False)
    list(trace.run(warm, max_steps=8))
    trace.rewind(4)
    list(trace.run(SamplingSettings(temperature=0), max_steps=4))
    recorded = routing.trace_routing(trace)
    assert torch.allclose(recorded.probabilities, route(model, recorded.token_ids).probabilities, atol=1e-5)
    assert routing.trace_routing(new_trace(model, tokenizer, [0, 1, 2], 2)) is None  # nothing fed yet


def test_quantized_copy_of_an_moe_lists_its_experts_as_left_in_bf16_and_still_runs(tiny_moe):
    """torchao converts nn.Linear only: the experts' 3-D weights are named as skipped, with why."""
    from inference.core.quantize import quantized_copy

    model, _ = tiny_moe
    copy8 = quantized_copy(model, "int8")
    experts = [s for s in copy8.skipped_layers if s.name.endswith("mlp.experts")]
    assert [s.name for s in experts] == ["model.layers.0.mlp.experts", "model.layers.1.mlp.experts"]
    assert "3-D weight" in experts[0].reason and copy8.quantized_linear_layers == 2 * 4  # q, k, v, o per layer
    with torch.inference_mode():
        assert torch.isfinite(copy8.model(torch.tensor([[0, 5, 9]])).logits).all()
