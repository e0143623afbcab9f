"""Inside one forward pass: the logit lens, the attention weights and the parts' arithmetic against transformers."""

import copy

import pytest
import torch
import transformers as tf

from inference.core.flops import FlopCount
from inference.core.forward import TransformersForward
from inference.core.kv_cache import KVShape
from inference.core.loader import encode_prompt, load_model
from inference.core.measuring import compare
from inference.core.paths import MODELS_DIR
from inference.lessons.inside import text
from inference.lessons.inside.adapters import Adapter, UnsupportedModel
from inference.lessons.inside.forward_pass import RANK_POSITIONS, look_inside

pytestmark = pytest.mark.unit

PROMPT = "Once upon a time, there was a little girl named Lily. She loved to play in the park with her"
SHAPE = dict(vocab_size=96, hidden_size=64, num_hidden_layers=3, num_attention_heads=4, max_position_embeddings=64)


def seeded(model, seed: int = 0):
    """Random weights from a private generator (never the global RNG), 0.2 wide so the layers differ."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.2 + (1.0 if p.ndim == 1 else 0.0))
    return model.eval().requires_grad_(False)


TINY = {
    "llama": lambda: tf.LlamaForCausalLM(tf.LlamaConfig(**SHAPE, num_key_value_heads=2)),
    "mistral (sliding window 8)": lambda: tf.MistralForCausalLM(
        tf.MistralConfig(**SHAPE, num_key_value_heads=2, sliding_window=8)
    ),
    "qwen2": lambda: tf.Qwen2ForCausalLM(tf.Qwen2Config(**SHAPE, num_key_value_heads=1)),
    "mixtral": lambda: tf.MixtralForCausalLM(
        tf.MixtralConfig(
            **SHAPE, num_key_value_heads=2, intermediate_size=48, num_local_experts=4, num_experts_per_tok=2
        )
    ),
    "gpt2": lambda: tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=96, n_embd=64, n_layer=3, n_head=4, n_positions=64)),
}
IDS = [(7 * i + 3) % 96 for i in range(21)]


@pytest.fixture(scope="module", params=list(TINY))
def tiny(request):
    return seeded(TINY[request.param]())


@pytest.fixture(scope="module")
def moe():
    return load_model(str(MODELS_DIR / "storyteller-moe-16m"))


def eager_twin(model):
    """A private copy that computes attention eagerly and can return its weights (the shared model is never switched)."""
    twin = copy.deepcopy(model)
    twin.set_attn_implementation("eager")
    return twin


def lens_from_hidden_states(model, ids) -> torch.Tensor:
    """[layers + 1, vocab]: transformers' hidden states of the last position through the final norm and output
    layer; its last hidden state is already normed (tie_last_hidden_states)."""
    out = model(input_ids=torch.tensor([ids]), output_hidden_states=True)
    adapter = Adapter(model)
    rows = [adapter.final_norm(h[0, -1]) for h in out.hidden_states[:-1]] + [out.hidden_states[-1][0, -1]]
    return torch.softmax(adapter.output_layer(torch.stack(rows)).float(), dim=-1), out.logits[0, -1]


@torch.inference_mode()
def check_oracles(model, ids, weight_bytes=None):
    inside = look_inside(model, ids, decode_repeats=2)
    recomputed, logits = lens_from_hidden_states(model, ids)
    assert (inside.lens_probs[-1] - torch.softmax(logits.float(), -1)).abs().max() <= 1e-5
    assert (inside.lens_probs - recomputed).abs().max() <= 1e-5
    assert inside.attention.shape == (model.config.num_hidden_layers, model.config.num_attention_heads, len(ids))
    assert (inside.attention.sum(-1) - 1).abs().max() <= 1e-5
    eager = eager_twin(model)(input_ids=torch.tensor([ids]), output_attentions=True)
    expected = torch.stack([a[0, :, -1] for a in eager.attentions]).float()
    assert (inside.attention - expected).abs().max() <= 1e-5
    count = FlopCount.of(model)
    assert inside.parts.flops.sum() == count.decode(len(ids) - 1)
    assert inside.parts.prefill_flops.sum() == count.prefill(len(ids))
    held = {p.data_ptr(): p.numel() * p.element_size() for p in model.parameters()}
    assert inside.parts.bytes.sum() == (weight_bytes or sum(held.values()))
    return inside


def test_every_architecture_agrees_with_transformers(tiny):
    """Lens = hidden states read out; last row = the model's softmax; attention = eager attention (so 0 outside a
    sliding window); totals = flops.py."""
    inside = check_oracles(tiny, IDS)
    assert inside.ranks.shape == (tiny.config.num_hidden_layers + 1, min(RANK_POSITIONS, len(IDS)))


def test_bundled_model_agrees_with_transformers_and_the_cache_bytes_with_the_formula(bundled):
    """The bundled Llama on a real prompt: every oracle; bytes = the loader's weight bytes; the cache the
    attention read weighs what the KV formula says."""
    ids = encode_prompt(bundled.tokenizer, PROMPT)
    inside = check_oracles(bundled.model, ids, bundled.info.weight_bytes)
    assert inside.followed_id == int(inside.logits.argmax())
    shape = KVShape.from_config(bundled.model.config, torch.float32)
    assert sum(inside.cache_bytes_per_layer) == shape.formula_bytes(len(ids))
    assert inside.plain_decode.what == f"one decode step at {len(ids) - 1} tokens of context"
    said = text.sentences(inside, str, "model's top token", True, "this CPU", 49152)
    words = compare(list(inside.decode_pass_ms), inside.plain_decode).words(more="more time", less="less time")
    assert words in said["timed_vs_plain"]  # the comparison word comes from the two measurements


def test_mixture_of_experts_parts_name_router_and_experts(moe):
    """The bundled Mixtral: router and experts are parts; the experts a decode reads are the k it chose."""
    ids = encode_prompt(moe.tokenizer, PROMPT)
    inside = check_oracles(moe.model, ids, moe.info.weight_bytes)
    kinds = set(inside.parts.kind)
    assert {"router", "experts"} <= kinds and "MLP" not in kinds
    experts = inside.parts[inside.parts.kind == "experts"]
    k, count = moe.model.config.num_experts_per_tok, moe.model.config.num_local_experts
    assert all(len(set(chosen)) == k for chosen in inside.experts)
    assert (experts.read_bytes * count == experts.bytes * k).all()


def test_one_token_context_is_a_pass_over_an_empty_cache(bundled):
    """A context of one token: the decode pass reads an empty cache, attention is all on itself."""
    inside = look_inside(bundled.model, [0], decode_repeats=1)
    assert torch.allclose(inside.attention, torch.ones_like(inside.attention))
    assert inside.parts.flops.sum() == FlopCount.of(bundled.model).decode(0)


def test_unknown_architecture_and_remote_model_say_why_in_one_sentence():
    """A T5 (not a decoder this page knows) and a serving engine each get one sentence naming the reason."""
    with torch.device("meta"):
        t5 = tf.T5ForConditionalGeneration(
            tf.T5Config(d_model=8, num_layers=1, num_heads=1, d_kv=8, d_ff=8, vocab_size=8)
        )
    with pytest.raises(UnsupportedModel, match="not T5ForConditionalGeneration"):
        Adapter(t5)

    class Remote:
        is_remote = True

    with pytest.raises(UnsupportedModel, match="hidden states"):
        Adapter(Remote())
    with pytest.raises(ValueError, match="no tokens"):
        look_inside(seeded(TINY["llama"]()), [])


def test_shared_model_is_not_changed(bundled, monkeypatch):
    """The parts are timed on a twin that shares the model's weights: no hook, attribute or attention
    implementation of the shared model changes, even during the pass."""
    model, looked = bundled.model, []
    original = TransformersForward.look
    monkeypatch.setattr(TransformersForward, "look", lambda self, *a: looked.append(self.model) or original(self, *a))
    before = (model.config._attn_implementation, sorted(vars(model)))
    hooks = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())
    look_inside(model, encode_prompt(bundled.tokenizer, PROMPT), decode_repeats=1)
    assert looked and all(twin is not model and twin.lm_head.weight is model.lm_head.weight for twin in looked)
    assert (model.config._attn_implementation, sorted(vars(model))) == before
    assert sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules()) == hooks
