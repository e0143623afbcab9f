"""The shared measuring helpers: fixed filler prompts, timed passes that compute what the model
computes, and a greedy run that equals `model.generate`."""

import pytest
import torch
from transformers import DynamicCache

from inference.core.measuring import filler_batch, filler_prompt, timed_decode, timed_pass
from inference.core.run import GREEDY, run_greedy
from tests.conftest import transformers_greedy

pytestmark = pytest.mark.unit

torch.set_num_threads(1)  # other jobs may share the machine


def test_filler_prompts_are_fixed_in_range_and_leave_the_global_rng_alone():
    torch.manual_seed(123)
    before = torch.get_rng_state()
    assert filler_prompt(4096, 32) == filler_prompt(4096, 32)
    assert filler_prompt(4096, 32) != filler_prompt(4096, 32, seed=7)
    assert filler_prompt(4096, 32) == filler_batch(4096, 3, 32)[0].tolist()  # one maker: a prompt is row 0
    batch = filler_batch(50, 4, 16, seed=1)
    assert batch.shape == (4, 16) and int(batch.min()) >= 0 and int(batch.max()) < 50
    assert torch.equal(torch.get_rng_state(), before)


def test_timed_passes_compute_the_models_own_logits(bundled):
    """A timed prefill plus timed decode steps ends on the logits of one untimed pass over the whole sequence."""
    model = bundled.model
    prompt = torch.tensor([filler_prompt(model.config.vocab_size, 12)])
    cache = DynamicCache(config=model.config)
    logits, prefill_ms = timed_pass(model, prompt, cache)
    step_cache = DynamicCache(config=model.config)
    start, _ = timed_pass(model, prompt, step_cache)
    last, times = timed_decode(model, start, step_cache, 3)
    assert len(times) == 3 and all(ms > 0 for ms in times) and prefill_ms > 0
    assert step_cache.get_seq_length() == 12 + 3
    tokens = prompt[0].tolist()
    current = logits
    for _ in range(3):  # the same greedy tokens, recomputed without a cache
        tokens.append(int(current.argmax()))
        current, _ = timed_pass(model, torch.tensor([tokens]))
    assert int(last.argmax()) == int(current.argmax()) and torch.allclose(last, current, atol=1e-3)


def test_run_greedy_equals_model_generate(bundled):
    model, tokenizer = bundled.model, bundled.tokenizer
    ids = tokenizer("Once upon a time")["input_ids"]
    trace = run_greedy(model, tokenizer, ids, 12, stop_at_eos=False)
    assert trace.generated_ids == transformers_greedy(model, ids, 12)
    assert GREEDY.greedy and len(trace.records) == 12
