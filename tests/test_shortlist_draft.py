"""A draft that scores only its most frequent tokens (FR-Spec): the same logits where it scores, nothing proposed
outside, and speculation's text still exactly the target's.

Oracles: the draft's full pass (its logits of the shortlisted ids, bit for bit), plain greedy decoding, the counts'
own sums. The sampled text's law is checked in tests/test_speculative.py (the "draft shortlist 256" case)."""

import json

import numpy as np
import pytest
import torch

from inference.core.forward import ShortlistForward, TransformersForward
from inference.core.loader import encode_prompt, load_model
from inference.core.run import GREEDY, new_trace
from inference.lessons.speculative import drafting, shortlist, summary
from inference.lessons.speculative import run as spec
from inference.lessons.speculative.drafters import ModelDrafter
from inference.sampling.pipeline import SamplingSettings
from inference.training.token_frequency import FILE_NAME

pytestmark = pytest.mark.unit

PROMPT = "Once upon a time, there was a little girl named Lily. She loved to play outside"


@pytest.fixture(scope="module")
def draft():
    return load_model(str(spec.BUNDLED_DRAFT_DIR))


@pytest.fixture(scope="module")
def counts():
    return shortlist.token_counts(spec.BUNDLED_DRAFT_DIR)


def test_the_bundled_drafts_counts_are_its_training_split_and_rank_the_shortlist(counts):
    saved = json.loads((spec.BUNDLED_DRAFT_DIR / FILE_NAME).read_text())
    meta = json.loads((spec.BUNDLED_DRAFT_DIR / "training_meta.json").read_text())
    assert len(counts) == meta["settings"]["vocab_size"]
    assert int(counts.sum()) == saved["train_tokens"] == meta["stats"]["train_tokens_in_corpus"]
    rows = shortlist.most_frequent(counts, 512)
    assert rows == sorted(rows) and len(set(rows)) == 512
    assert counts[rows].min() >= np.delete(counts, rows).max()  # no token left out is more frequent than one kept
    assert shortlist.coverage(counts, 512) == pytest.approx(counts[rows].sum() / counts.sum(), abs=1e-12)
    assert shortlist.coverage(counts, len(counts)) == pytest.approx(1.0)


@pytest.mark.parametrize("size", [256, 1024])
def test_a_shortlist_pass_gives_the_full_passs_logits_of_its_tokens_and_minus_infinity_elsewhere(draft, counts, size):
    """The output layer multiplies only the shortlisted rows: a prompt, one-token and 5-token passes give the full
    pass's logits of those ids (to float rounding: another matrix shape may sum in another order), -inf elsewhere,
    and the same cache."""
    rows = shortlist.most_frequent(counts, size)
    ids = encode_prompt(draft.tokenizer, PROMPT)
    full, short = TransformersForward(draft.model, None), ShortlistForward(draft.model, None, rows)
    outside = torch.ones(full.vocab_size, dtype=torch.bool)
    outside[rows] = False
    for feed, keep in ((ids[:6], 6), (ids[6:7], 1), (ids[7:12], 5), (ids[12:13], 1)):
        a, b = full.logits(feed, keep), short.logits(feed, keep)
        torch.testing.assert_close(a[:, rows], b[:, rows], rtol=1e-5, atol=1e-5)
        assert torch.isneginf(b[:, outside]).all()
    assert torch.equal(full.cache.layers[0].keys, short.cache.layers[0].keys)


def test_a_shortlist_draft_proposes_only_shortlisted_tokens_and_its_q_is_zero_elsewhere(draft, counts, bundled):
    rows = shortlist.most_frequent(counts, 256)
    allowed = set(rows)
    ids = encode_prompt(bundled.tokenizer, PROMPT)
    run = spec.new_run(
        bundled.model, bundled.tokenizer, ModelDrafter(draft.model, draft.tokenizer, rows), ids, 80, gamma=4
    )
    proposals = []
    original = run.drafter.propose

    def spy(request):
        proposal = original(request)
        proposals.append(proposal)
        return proposal

    run.drafter.propose = spy
    list(run.run(SamplingSettings(temperature=1.3)))
    assert proposals and all(set(p.tokens) <= allowed for p in proposals)
    outside = torch.ones(spec.vocabulary_rows(draft.model), dtype=torch.bool)
    outside[rows] = False
    assert all(float(p.q_rows[:, outside].sum()) == 0.0 for p in proposals if p.q_rows is not None)
    # the target still writes tokens the draft cannot propose (from its residual or bonus draws)
    assert any(token not in allowed for token in run.generated_ids)


@pytest.mark.parametrize("size", [256, 1024])
def test_greedy_speculation_with_a_shortlist_draft_equals_plain_greedy(draft, counts, bundled, size):
    rows = shortlist.most_frequent(counts, size)
    for prompt in (PROMPT, "Tom and his dog went to the park. The dog saw a ball and"):
        ids = encode_prompt(bundled.tokenizer, prompt)
        trace = new_trace(bundled.model, bundled.tokenizer, ids, 120, stop_at_eos=False)
        list(trace.run(GREEDY))
        drafter = ModelDrafter(draft.model, draft.tokenizer, rows)
        run = spec.new_run(bundled.model, bundled.tokenizer, drafter, ids, 120, gamma=4, stop_at_eos=False)
        list(run.run(GREEDY))
        assert run.generated_ids == trace.generated_ids
        assert summary.summarise(run.rounds).accepted > 0


def test_only_the_bundled_draft_offers_a_shortlist(draft, bundled, counts):
    assert drafting.shortlist_sizes(draft) == list(shortlist.SIZES)
    assert drafting.shortlist_ids(draft, 512) == shortlist.most_frequent(counts, 512)
    assert drafting.shortlist_ids(draft, drafting.SHORTLIST_ALL) is None
    assert drafting.shortlist_ids(draft, 300) is None  # not a size the page offers
    assert drafting.shortlist_sizes(bundled) == []  # another model: no counts read
    assert drafting.new_drafter(bundled.model, draft, 512).shortlist == shortlist.most_frequent(counts, 512)
    assert drafting.new_drafter(bundled.model, draft).shortlist is None


def test_counts_that_cannot_be_read_give_no_shortlist(tmp_path):
    assert shortlist.token_counts(tmp_path) is None
    (tmp_path / FILE_NAME).write_text("{not json")
    assert shortlist.token_counts(tmp_path) is None
    (tmp_path / FILE_NAME).write_text(json.dumps({"counts": [3, -1, 2]}))
    assert shortlist.token_counts(tmp_path) is None
    assert shortlist.usable_sizes(None, 4096) == []
    assert shortlist.usable_sizes(np.ones(100, dtype=np.int64), 4096) == []  # counts of another vocabulary


def test_a_shortlist_outside_the_vocabulary_is_refused(draft):
    with pytest.raises(ValueError, match="token ids from 0 to 4095"):
        ShortlistForward(draft.model, None, [1, 4096])
    with pytest.raises(ValueError):
        ShortlistForward(draft.model, None, [])
