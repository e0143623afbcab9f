"""SmolLM2's feature draft (one layer reading the target's last hidden state): greedy output is plain decoding's token
for token; the features it reads are the target's own, position for position; its cache keeps only positions fed with
real features; the shared target is never changed; a folder without a draft is refused with a sentence."""

import pytest
import torch

from inference.core.bundled import bundled_models
from inference.core.loader import encode_prompt
from inference.core.run import GREEDY
from inference.lessons.speculative import bundled_drafts, drafting, feature_draft
from inference.lessons.speculative import run as spec
from inference.lessons.speculative.comparison import plain_decode
from inference.sampling.pipeline import SamplingSettings

pytestmark = pytest.mark.unit

NEW = 12


@pytest.fixture(scope="module")
def draft():
    return feature_draft.load()


@pytest.fixture(scope="module")
def question_ids(smollm2):
    return encode_prompt(smollm2.tokenizer, bundled_drafts.QUESTION, chat=True)


def _run(smollm2, draft, ids, gamma, settings=GREEDY, seed=0):
    drafter = feature_draft.FeatureDrafter(draft, smollm2.model, smollm2.tokenizer)
    run = spec.new_run(smollm2.model, smollm2.tokenizer, drafter, ids, NEW, gamma=gamma, seed=seed, stop_at_eos=False)
    list(run.run(settings))
    return run


@pytest.mark.parametrize("gamma", [2, 4])
def test_greedy_equals_plain_decoding(smollm2, draft, question_ids, gamma):
    run = _run(smollm2, draft, question_ids, gamma)
    assert run.generated_ids == plain_decode(smollm2.model, question_ids, NEW, GREEDY)
    first, later = run.rounds[0], run.rounds[1:]
    assert first.drafted == 0 and first.note == feature_draft.NOTHING_TO_READ  # nothing to read before the prefill
    assert sum(r.drafted for r in later) > 0
    assert sum(r.accepted for r in later) > 0  # it guesses some of SmolLM2's answer (a test that can fail)
    # the greedy chart's q at T=1 is the draft's own probability of its token, not a lookup's point mass
    assert all(0 < c.q_raw < 1 for r in later for c in r.checks)


def test_features_are_the_targets_own(smollm2, draft, question_ids):
    """After every round the drafter holds, for each position of the text but the last, the target's final-normed
    hidden state, as one plain pass over the whole text computes it."""
    drafter = feature_draft.FeatureDrafter(draft, smollm2.model, smollm2.tokenizer)
    run = spec.new_run(smollm2.model, smollm2.tokenizer, drafter, question_ids, NEW, gamma=3, stop_at_eos=False)
    for _ in range(4):
        run.step(GREEDY)
        text = run.all_ids
        with torch.inference_mode():
            hidden = smollm2.model(input_ids=torch.tensor([text]), output_hidden_states=True).hidden_states[-1][0]
            expected = smollm2.model.model.norm(hidden)[: len(text) - 1]
        assert drafter._features.shape == expected.shape
        torch.testing.assert_close(drafter._features, expected, atol=2e-3, rtol=1e-3)
        assert drafter.cache_tokens <= len(text) - 1
        assert drafter.cache_tokens == drafter._real_positions  # no position fed with its own guesses is kept


def test_sampled_run_is_reproducible_and_drafts_only_shortlisted_tokens(smollm2, draft, question_ids):
    settings = SamplingSettings(temperature=0.8)
    a, b = (_run(smollm2, draft, question_ids, 3, settings, seed=5) for _ in range(2))
    assert a.generated_ids == b.generated_ids
    shortlisted = set(draft.rows.tolist())
    drafted = [c.token_id for r in a.rounds for c in r.checks]
    assert drafted and set(drafted) <= shortlisted


def test_target_is_never_changed(smollm2, draft, question_ids):
    snapshot = {name: (p.data_ptr(), p.detach().clone()) for name, p in smollm2.model.named_parameters()}
    _run(smollm2, draft, question_ids, 2)
    for name, p in smollm2.model.named_parameters():
        assert p.data_ptr() == snapshot[name][0] and torch.equal(p, snapshot[name][1])


def test_offered_for_smollm2_only(smollm2, bundled):
    assert "feature" in drafting.drafter_choices(smollm2.model)
    assert "feature" not in drafting.drafter_choices(bundled.model)  # the storyteller


def test_missing_folder_is_refused_with_a_sentence(tmp_path):
    with pytest.raises(feature_draft.FeatureDraftError, match="No feature draft in"):
        feature_draft.load(tmp_path)


def test_not_offered_as_a_model_of_its_own():
    """The model picker lists folders that run alone; the feature draft only runs beside SmolLM2."""
    names = [m.name for m in bundled_models()]
    assert feature_draft.FEATURE_DRAFT_NAME not in names and "smollm2-draft-14m" in names
