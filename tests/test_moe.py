"""The Mixture-of-Experts lesson and its core: routing recorded by the engine equals the router recomputed from each
layer's input, variants share the weights, the budget and the stored statistics count exactly, and the page's
sentences take their comparison words from `measuring.compare`."""

import copy
import json
import math

import pandas as pd
import pytest
import torch

from inference.core import routing
from inference.core.loader import encode_prompt
from inference.core.paths import BUNDLED_MODEL_DIR
from inference.core.run import new_trace
from inference.lessons.moe import experts as expert_work
from inference.lessons.moe import scale as moe
from inference.lessons.moe import stored
from inference.lessons.moe import text as moe_text
from inference.sampling.pipeline import SamplingSettings
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
    """A seeded random Mixtral (2 layers, 4 experts, 2 per token) with the bundled tokenizer; router weights drawn
    10x larger than the rest, so its choices are not near-ties."""
    tokenizer = bundled.tokenizer
    shape = dict(hidden=64, layers=2, heads=4, kv_heads=2, expert_width=48, experts=4, experts_per_token=2)
    config = moe.MoEDesign(**shape, vocab=len(tokenizer), context=256).configs()[moe.MOE]
    config.bos_token_id = config.eos_token_id = config.pad_token_id = 0
    model = moe.random_model(config, seed=7)
    gen = torch.Generator().manual_seed(8)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.mlp.gate.weight.normal_(0.0, 0.2, generator=gen)
    model.eval().requires_grad_(False)
    model.generation_config.eos_token_id = model.generation_config.pad_token_id = 0
    return model, tokenizer


@pytest.fixture(scope="session")
def tiny_moe_folder(tiny_moe, tmp_path_factory):
    """The tiny MoE saved as a model folder (bfloat16, like the bundled one) and a corpus whose validation split the
    stats read."""
    model, tokenizer = tiny_moe
    root = tmp_path_factory.mktemp("moe")
    folder, corpus = root / "tiny-moe", root / "corpus"
    copy.deepcopy(model).to(torch.bfloat16).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "training_meta.json").write_text(json.dumps({"settings": {"validation_fraction": 0.5, "seed": 1234}}))
    corpus.mkdir()
    (corpus / "stories.txt").write_text("".join(s + "\n<|endoftext|>\n" for s in STORIES * 2))
    return folder, corpus


def stream(tokenizer) -> list[int]:
    return [0] + [t for story in STORIES for t in tokenizer(story, add_special_tokens=False)["input_ids"] + [0]]


def test_engine_on_the_moe_greedy_equals_model_generate(tiny_moe):
    model, tokenizer = tiny_moe
    ids = encode_prompt(tokenizer, "Once upon a time, there was")
    trace = new_trace(model, tokenizer, ids, 30, stop_at_eos=False)
    assert [r.token_id for r in trace.run(SamplingSettings(temperature=0))] == transformers_greedy(model, ids, 30)


def test_routing_recorded_during_generation_equals_the_router_recomputed_from_layer_inputs(tiny_moe):
    """Prefill and every decode step record each layer's routing of the tokens they fed: the top-k of the router
    applied to each layer's MLP input, recomputed independently; a rewound trace keeps the steps it keeps."""
    model, tokenizer = tiny_moe
    trace = new_trace(
        model, tokenizer, encode_prompt(tokenizer, "Tom had a big dog. The dog"), 25, seed=3, stop_at_eos=False
    )
    assert routing.trace_routing(trace) is None  # nothing fed yet
    list(trace.run(SamplingSettings(temperature=0.9), max_steps=20))
    trace.rewind(12)
    list(trace.run(SamplingSettings(temperature=0), max_steps=4))
    recorded = routing.trace_routing(trace)
    fed = trace.all_ids[:-1]  # the last chosen token is fed at the next step
    assert recorded.token_ids == fed and recorded.probabilities.shape == (2, len(fed), 4)
    inputs = expert_work.mlp_inputs(model, fed)
    for layer in range(2):
        experts, weights = routing.top_k(expert_work.router_from_input(model, layer, inputs[layer]), 2)
        assert torch.equal(recorded.chosen()[0][layer], experts)
        torch.testing.assert_close(recorded.chosen()[1][layer], weights, atol=1e-5, rtol=1e-5)
        block_out = model.model.layers[layer].mlp(inputs[layer].unsqueeze(0))[0]
        for t in (0, 7, len(fed) - 1):  # the weighted experts' outputs = the sparse block's own output
            mix = expert_work.mixture(model, inputs[layer, t], layer)
            assert math.isclose(sum(mix.weights), 1.0, rel_tol=1e-6)
            torch.testing.assert_close(mix.mixture, block_out[t], atol=1e-5, rtol=1e-4)
    assert recorded.counts().sum(dim=1).tolist() == [len(fed) * 2] * 2


def test_variants_share_the_weights_and_change_only_the_router(tiny_moe):
    model, tokenizer = tiny_moe
    before = {k: v.clone() for k, v in model.state_dict().items()}
    ids = stream(tokenizer)
    twin = routing.variant(model)  # the same routing: the same logits
    with torch.inference_mode():
        torch.testing.assert_close(twin(torch.tensor([ids[:40]])).logits, model(torch.tensor([ids[:40]])).logits)
    assert twin.model.embed_tokens.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    top1 = route(routing.variant(model, k=1), ids)
    # the first layer sees the same input, so top-1 keeps each token's first choice there
    assert top1.k == 1 and torch.equal(top1.chosen()[0][0, :, 0], route(model, ids).chosen()[0][0, :, 0])
    assert (
        score_stream(routing.variant(model, k=1), ids, 300).bits_per_byte != score_stream(model, ids, 300).bits_per_byte
    )
    counts = route(routing.variant(model, off=(1,)), ids).counts()
    assert counts[:, 1].tolist() == [0, 0] and counts.sum(dim=1).tolist() == [len(ids) * 2] * 2
    with pytest.raises(ValueError, match="switch off"):
        routing.variant(model, off=(9,))
    with pytest.raises(ValueError, match="`k`"):
        routing.variant(model, k=4, off=(0,))
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert model.model.layers[0].mlp.gate.top_k == 2 and model.config.num_experts_per_tok == 2


def test_budget_counts_active_parameters_and_bytes_read(tiny_moe, bundled):
    """Active = total - (E - k) experts a layer; read per token = held - unused experts (tied: the output layer
    reads the whole table anyway). A dense model reads all."""
    b, one_expert = routing.budget(tiny_moe[0]), 2 * 48 * 64 + 64 * 48
    assert b.expert_parameters == 2 * 4 * one_expert and b.active_parameters == b.total_parameters - 2 * 2 * one_expert
    assert b.tied_embeddings and b.bytes_read_per_token == b.bytes_held - 2 * 2 * one_expert * 4
    dense = routing.budget(bundled.model)
    assert dense.active_parameters == dense.total_parameters == bundled.info.parameters
    assert dense.bytes_read_per_token == dense.bytes_held


def test_a_quantized_copy_of_an_moe_lists_its_experts_as_left_in_bf16_and_still_runs(tiny_moe):
    """torchao converts nn.Linear only: the experts' 3-D weights are named as skipped, with why."""
    from inference.core.quantize import quantized_copy

    copy8 = quantized_copy(tiny_moe[0], "int8")
    experts = [s for s in copy8.skipped_layers if s.name.endswith("mlp.experts")]
    assert [s.name for s in experts] == ["model.layers.0.mlp.experts", "model.layers.1.mlp.experts"]
    assert "3-D weight" in experts[0].reason and copy8.quantized_linear_layers == 2 * 4  # q, k, v, o per layer
    with torch.inference_mode():
        assert torch.isfinite(copy8.model(torch.tensor([[0, 5, 9]])).logits).all()


@pytest.fixture(scope="session")
def stats(tiny_moe_folder, bundled):
    folder, corpus = tiny_moe_folder
    return moe_stats.compute(folder, corpus, switch_off=[1], log=lambda *_: None, timing_repeats=1, timing_steps=4)


def test_the_stats_file_counts_exactly_what_the_router_sent(tiny_moe, tiny_moe_folder, stats):
    """Counts sum to tokens x k; an expert's top tokens are the occurrences routed to it; top-1 and an expert
    switched off are scored beside the dense model; the information never exceeds the expert entropy."""
    tokens = stats["source"]["tokens"]
    assert [sum(row) for row in stats["load"]["counts"]] == [tokens * 2] * 2
    assert [sum(row) for row in stats["load"]["first_choice_counts"]] == [tokens] * 2
    assert [e["name"] for e in stats["experiments"]] == ["top-2 (as trained)", "top-1", "expert 1 off"]
    assert all(e["val_bits_per_byte"] > 0 for e in stats["experiments"]) and stats["dense"]["val_bits_per_byte"] > 0
    for row in stats["information"]:
        assert 0 <= row["mutual_information_bits"] <= row["expert_entropy_bits"] + 1e-9 <= 2 + 1e-9
    model, tokenizer = tiny_moe
    ids = stream(tokenizer)
    recorded = route(model, ids)
    experts = recorded.chosen()[0]
    for layer, expert in ((0, 0), (1, 3)):
        for row in routing.expert_top_tokens(recorded, tokenizer, top=5)[layer][expert]:
            positions = [i for i, t in enumerate(ids) if t == row["token_id"]]
            assert row["count"] == sum(int(expert in experts[layer, i].tolist()) for i in positions)
            assert row["occurrences"] == len(positions) >= row["count"]
    folder, _ = tiny_moe_folder
    path = moe_stats.write(folder, stats)
    assert stored.read(folder, routing.STATS_FILE) == json.loads(path.read_text())
    table = stored.top_tokens_table(stats, 0, 0)
    assert (table["share sent here"] <= 1).all() and list(stored.experiments_table(stats)["k"]) == [2, 1, 2]


# -- what the page says ------------------------------------------------------------------------------------------


def pair(moe_heldout: float, dense_heldout: float) -> stored.TrainedPair:
    return stored.TrainedPair(moe_heldout, dense_heldout, 0.24, 0.21, 8_192_000, 16_399_616, 5.8e6)


def test_the_intro_says_what_the_bundled_moe_measured_and_why():
    """#46 item 4: never a promise the page's own measurement contradicts."""
    worse = moe_text.intro_verdict(pair(1.021, 1.013), "storyteller-moe-16m", "storyteller-llama-6m")
    assert "1.021" in worse and "more bits per byte (worse)" in worse and "16M parameters" in worse
    assert "too little" in worse and "5.8 MB" in worse
    better = moe_text.intro_verdict(pair(0.98, 1.013), "m", "d")
    assert "fewer bits per byte (better)" in better and "too little" not in better
    assert "Whether" in moe_text.intro_verdict(None, "m", "d")
    moe_meta, dense_meta = stored.training_stats(routing.BUNDLED_MOE_DIR), stored.training_stats(BUNDLED_MODEL_DIR)
    if moe_meta:  # the training text's size, read from the trainer's two scores of it
        per_token = moe_meta["train_nats_per_token"] / (math.log(2) * moe_meta["train_bits_per_byte"])
        got = stored.trained_pair(moe_meta, dense_meta)
        assert got.corpus_bytes == pytest.approx(moe_meta["train_tokens_in_corpus"] * per_token)


def test_timings_inside_the_runs_noise_get_no_comparison_word():
    timed = expert_work.DecodeTimes({"dense": [2.0, 2.6, 1.6], "moe": [2.1, 2.5, 1.7]}, "CPU", 1, 3, 8, 12)
    assert "about the same speed (within this machine's noise)" in moe_text.timed_finding(timed, "dense", "moe")
    slow = expert_work.DecodeTimes({"dense": [2.0, 2.1, 1.9], "moe": [4.0, 4.2, 3.8]}, "CPU", 1, 3, 8, 12)
    assert "2.0x slower than the dense model" in moe_text.timed_finding(slow, "dense", "moe")


def test_the_scale_findings_compare_the_models_measured_runs():
    runs = [[10.0, 10.2, 9.8], [13.0, 13.1, 12.9], [30.0]]
    scale = pd.DataFrame(
        {
            "model": [moe.DENSE_ACTIVE, moe.MOE, moe.DENSE_TOTAL],
            "total_parameters": [5e6, 20e6, 20e6],
            "active_parameters": 5e6,
            "weight_bytes": [20e6, 80e6, 80e6],
            "decode_ms_per_token": [r[0] for r in runs],
            "decode_ms_runs": runs,
            "batch": 16,
            "batch_ms_per_pass": 20.0,
            "experts_read_alone": 2.0,
            "experts_read_in_batch": 7.5,
            "decode_vs_dense_active": [1.0, 1.3, 3.0],
            "batch_vs_dense_active": 1.5,
        }
    )
    said = moe_text.scale_findings(scale, 8)
    assert "4.0x more" in said and "1.3x slower than the small model: the router" in said and "7.5 of 8" in said
