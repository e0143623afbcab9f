"""Speculation on SmolLM2-135M-Instruct (issue #45, item 6): each drafter's greedy output is plain decoding's, token
for token; the self-draft shares the target's weights and leaves it unchanged; the verify-cost sentence and the
bench's figures."""

import pytest
import torch

from inference.bench import real_spec
from inference.core.loader import encode_prompt
from inference.core.run import GREEDY
from inference.lessons.speculative import drafting, self_draft
from inference.lessons.speculative import run as spec
from inference.lessons.speculative.comparison import plain_decode
from inference.lessons.speculative.drafters import ModelDrafter, PromptLookupDrafter
from inference.lessons.speculative.verify_cost import VerifyCost, measure_verify_cost, why_they_differ

pytestmark = pytest.mark.unit

NEW = 10  # few tokens: a SmolLM2 pass is ~0.1 s here


@pytest.fixture(scope="module")
def chat_ids(smollm2):
    return encode_prompt(smollm2.tokenizer, drafting.COPY_PROMPT, chat=True)


@pytest.fixture(scope="module")
def plain(smollm2, chat_ids):
    return plain_decode(smollm2.model, chat_ids, NEW, GREEDY)


def _speculate(smollm2, drafter, prompt_ids, gamma=4):
    run = spec.new_run(smollm2.model, smollm2.tokenizer, drafter, prompt_ids, NEW, gamma=gamma, stop_at_eos=False)
    list(run.run(GREEDY))
    return run


@pytest.mark.parametrize("rows", [None, self_draft.SHORTLIST_ROWS], ids=["full-head", "shortlist"])
def test_self_draft_greedy_equals_plain(smollm2, chat_ids, plain, rows):
    draft = self_draft.layer_draft(smollm2.model, 4)
    shortlist = None if rows is None else self_draft.tokenizer_shortlist(smollm2.model, rows)
    run = _speculate(smollm2, ModelDrafter(draft, smollm2.tokenizer, shortlist), chat_ids)
    assert run.generated_ids == plain
    assert run.drafter.cache_tokens > 0 and len(run.drafter.cache.layers) == 4  # its own cache, k layers


def test_prompt_lookup_greedy_equals_plain(smollm2, chat_ids, plain):
    run = _speculate(smollm2, PromptLookupDrafter(spec.vocabulary_rows(smollm2.model)), chat_ids)
    assert run.generated_ids == plain
    assert sum(r.accepted for r in run.rounds) > 0  # the answer copies the prompt: lookup drafts and is kept


def test_self_draft_shares_weights_and_leaves_target_unchanged(smollm2):
    target = smollm2.model
    ids = torch.tensor([encode_prompt(smollm2.tokenizer, drafting.CHAT_PROMPT, chat=True)])
    with torch.inference_mode():
        before = target(input_ids=ids).logits.clone()
    snapshot = {name: (p.data_ptr(), p.detach().clone()) for name, p in target.named_parameters()}
    layers_before = list(target.model.layers)
    draft = self_draft.layer_draft(target, 8)
    assert self_draft.shares_weights(draft, target)
    target_params = dict(target.named_parameters())
    for name, p in draft.named_parameters():
        assert p.data_ptr() == target_params[name].data_ptr()  # the same tensor under the same name: no copy
        assert torch.equal(p, target_params[name])
    assert draft.config.num_hidden_layers == 8 and target.config.num_hidden_layers == 30
    drafter = ModelDrafter(draft, smollm2.tokenizer, self_draft.tokenizer_shortlist(target))
    with torch.inference_mode():
        drafter.forward.logits(ids[0].tolist())
        draft_logits = draft(input_ids=ids).logits
    assert draft_logits.shape == before.shape and not torch.equal(draft_logits, before)
    with torch.inference_mode():
        after = target(input_ids=ids).logits
    assert torch.equal(after, before)
    assert list(target.model.layers) == layers_before and len(target.model.layers) == 30
    for name, p in target.named_parameters():
        assert p.data_ptr() == snapshot[name][0] and torch.equal(p, snapshot[name][1])


def test_layer_draft_refuses_bad_k(smollm2):
    for k in (0, 30, 31, True, 2.0):
        with pytest.raises(self_draft.SelfDraftError):
            self_draft.layer_draft(smollm2.model, k)


def test_verify_cost_is_measured(bundled):
    cost = measure_verify_cost(bundled.model, "storyteller", positions=3, repeats=2)
    assert cost.positions == 3 and cost.one_token_ms > 0 and cost.verify_ms > 0 and cost.cost > 0
    assert cost.weight_bytes == sum(
        p.numel() * 4 for p in {p.data_ptr(): p for p in bundled.model.parameters()}.values()
    )


def test_why_they_differ_follows_the_measurements():
    small = VerifyCost("small", 23_000_000, 5, 2.0, 4.0)  # 2.00 passes
    big = VerifyCost("big", 538_000_000, 5, 80.0, 112.0)  # 1.40 passes
    cache = 32 * 2**20
    text = why_they_differ(small, big, cache)
    assert "2.00" in text and "1.40" in text and "32 MiB" in text
    assert "small's 23.0 MB of weights fit in it" in text and "big's 538.0 MB of weights do not fit in it" in text
    assert "streams its weights from memory" in text
    assert "same side" in why_they_differ(small, big, 2**40)
    backwards = why_they_differ(VerifyCost("small", 23_000_000, 5, 2.0, 2.2), big, cache)
    assert "opposite" in backwards and "2.0 ms against 80.0 ms" in backwards


def test_real_spec_without_the_wheel(monkeypatch, capsys):
    monkeypatch.setattr(real_spec.real_model, "is_available", lambda: False)
    assert real_spec.real_spec_figures() == {}
    assert "not installed" in capsys.readouterr().out


def test_real_spec_pair_figures(smollm2, chat_ids):
    vocab = spec.vocabulary_rows(smollm2.model)
    figures = real_spec.pair_figures(
        smollm2.model, smollm2.tokenizer, lambda: PromptLookupDrafter(vocab), chat_ids, 8, 1
    )
    assert figures["identical"] and figures["tokens"] == 8 and figures["draft_cost_ratio"] is None
    assert figures["speedup_vs_plain"] > 0 and 0 < figures["acceptance_rate"] <= 1


def test_self_draft_on_the_storyteller_and_layer_choices(bundled):
    assert self_draft.layer_choices(6) == [1, 2, 3, 4, 5] and self_draft.layer_choices(1) == []
    assert self_draft.layer_choices(30) == [4, 6, 8, 12, 15, 16, 20, 24, 28]
    ids = bundled.tokenizer("Once upon a time")["input_ids"]
    run = spec.new_run(
        bundled.model, bundled.tokenizer, drafting.self_drafter(bundled.model, bundled.tokenizer, 2, False), ids, 12
    )
    list(run.run(GREEDY))
    assert run.generated_ids == plain_decode(bundled.model, ids, len(run.generated_ids), GREEDY)
