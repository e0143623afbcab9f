"""Speculation on SmolLM2-135M-Instruct: its bundled draft, its feature draft, its self-draft and prompt lookup write
SmolLM2's own greedy tokens; the drafts' files and what the page says of them (the bench's figures:
tests/test_bench.py)."""

import json

import pytest
import torch

from inference.core.bundled import bundled_models
from inference.core.loader import encode_prompt, load_model
from inference.core.run import GREEDY
from inference.lessons.speculative import drafters, drafting, feature_draft, text
from inference.lessons.speculative import run as spec
from inference.lessons.speculative.comparison import plain_decode, summarise
from inference.sampling.pipeline import SamplingSettings

pytestmark = pytest.mark.unit

FOLDER = drafting.REAL_DRAFT_DIR
NEW = 12
# Greedy α (accepted / checked) of the story run, 40 tokens at γ 4: 0.378 (0.375 over 64 tokens at γ 2 in its
# speculation.json). Greedy runs are deterministic; the floor leaves room for float rounding on another CPU.
ACCEPTANCE_FLOOR = 0.30


@pytest.fixture(scope="module")
def draft():
    return load_model(str(FOLDER))


@pytest.fixture(scope="module")
def feature():
    return feature_draft.load()


@pytest.fixture(scope="module")
def question_ids(smollm2):
    return encode_prompt(smollm2.tokenizer, drafting.QUESTION, chat=True)


def speculate(smollm2, drafter, ids, new_tokens=NEW, gamma=4, settings=GREEDY, seed=0):
    run = spec.new_run(smollm2.model, smollm2.tokenizer, drafter, ids, new_tokens, gamma, seed, stop_at_eos=False)
    list(run.run(settings))
    return run


def test_every_drafter_writes_smollm2s_greedy_tokens_and_leaves_it_unchanged(smollm2, draft, feature, question_ids):
    snapshot = {name: p.detach().clone() for name, p in smollm2.model.named_parameters()}
    plain = plain_decode(smollm2.model, question_ids, NEW, GREEDY)
    lookup = lambda: drafters.PromptLookupDrafter(spec.vocabulary_rows(smollm2.model))  # noqa: E731
    made = {
        "draft": drafters.ModelDrafter(draft.model, draft.tokenizer),
        "feature": feature_draft.FeatureDrafter(feature, smollm2.model, smollm2.tokenizer),
        "self": drafters.self_drafter(smollm2.model, smollm2.tokenizer, 4, shortlisted=True),
        "self, every token": drafters.self_drafter(smollm2.model, smollm2.tokenizer, 4, shortlisted=False),
        "lookup": lookup(),
    }
    for name, drafter in made.items():
        assert speculate(smollm2, drafter, question_ids, gamma=2).generated_ids == plain, name
    assert all(torch.equal(p, snapshot[name]) for name, p in smollm2.model.named_parameters())
    assert len(made["self"].forward.cache.layers) == 4  # the self-draft's own cache, of its k layers
    copy_ids = encode_prompt(smollm2.tokenizer, drafting.COPY_PROMPT, chat=True)
    copied = speculate(smollm2, lookup(), copy_ids)
    assert copied.generated_ids == plain_decode(smollm2.model, copy_ids, NEW, GREEDY)
    assert sum(r.accepted for r in copied.rounds) > 0  # the answer copies the prompt: lookup drafts and is kept


def test_the_feature_draft_reads_the_targets_own_features_and_guesses_some_of_its_answer(
    smollm2, feature, question_ids
):
    """Its first round drafts nothing (no feature yet); after every round it holds the target's final-normed hidden
    state of each position but the last, as one pass over the whole text computes it; later rounds are accepted."""
    drafter = feature_draft.FeatureDrafter(feature, smollm2.model, smollm2.tokenizer)
    run = spec.new_run(smollm2.model, smollm2.tokenizer, drafter, question_ids, NEW, gamma=3, stop_at_eos=False)
    for _ in range(4):
        run.step(GREEDY)
        with torch.inference_mode():
            hidden = smollm2.model(input_ids=torch.tensor([run.all_ids]), output_hidden_states=True).hidden_states[-1]
            expected = smollm2.model.model.norm(hidden[0])[: len(run.all_ids) - 1]
        torch.testing.assert_close(drafter._features, expected, atol=2e-3, rtol=1e-3)
        assert drafter.cache_tokens == drafter._real_positions <= len(run.all_ids) - 1
    assert run.rounds[0].drafted == 0 and run.rounds[0].note == feature_draft.NOTHING_TO_READ
    assert sum(r.accepted for r in run.rounds[1:]) > 0  # a test that can fail: it guesses some of SmolLM2's answer
    assert all(0 < c.q_raw < 1 for r in run.rounds[1:] for c in r.checks)  # its own T=1 probability, not a point mass
    sampled = [speculate(smollm2, feature_draft.FeatureDrafter(feature, smollm2.model, smollm2.tokenizer), question_ids,
                         gamma=3, settings=SamplingSettings(temperature=0.8), seed=5) for _ in "ab"]  # fmt: skip
    drafted = [c.token_id for r in sampled[0].rounds for c in r.checks]
    assert (
        sampled[0].generated_ids == sampled[1].generated_ids and drafted and set(drafted) <= set(feature.rows.tolist())
    )


def test_each_draft_is_offered_where_it_serves_and_ships_its_files(smollm2, bundled, draft, tmp_path):
    assert "feature" in drafting.drafter_choices(smollm2.model) and "feature" not in drafting.drafter_choices(
        bundled.model
    )
    assert (
        drafting.draft_dir_for(smollm2.model) == FOLDER
        and drafting.draft_dir_for(bundled.model) == drafting.BUNDLED_DRAFT_DIR
    )
    with pytest.raises(spec.SpeculationError):  # the SmolLM2 draft cannot serve the storyteller
        spec.check_pair(bundled.model, bundled.tokenizer, draft.model, draft.tokenizer)
    spec.check_pair(smollm2.model, smollm2.tokenizer, draft.model, draft.tokenizer)
    with pytest.raises(feature_draft.FeatureDraftError, match="No feature draft in"):
        feature_draft.load(tmp_path)
    names = [m.name for m in bundled_models()]  # the picker lists only what runs alone
    assert feature_draft.FEATURE_DRAFT_NAME not in names and drafting.REAL_DRAFT_NAME in names
    sizes = {p.name: p.stat().st_size for p in FOLDER.iterdir()}
    assert {"model.safetensors", "config.json", "tokenizer.json", "token_frequency.json"} <= set(sizes)
    assert max(sizes.values()) < 40 * 2**20, sizes
    counts = drafters.token_counts(FOLDER)
    assert len(counts) == spec.vocabulary_rows(draft.model) == 49_152
    assert json.loads((FOLDER / "token_frequency.json").read_text())["train_tokens"] == counts.sum()
    assert {4096, 8192, drafting.default_shortlist(draft.info.name)} <= set(drafting.shortlist_sizes(draft))


def test_the_page_quotes_each_drafts_measured_figures_as_shipped(draft):
    measured = drafting.read_json(draft.info.name, drafting.MEASURED_FILE)
    assert f"{measured['story']['speedup_vs_plain']:.2f}×" in text.about_draft(draft.info.name)
    assert text.about_draft(feature_draft.FEATURE_DRAFT_NAME) and text.about_draft("storyteller-draft-1m") is None


def test_on_a_story_request_the_shortlisted_draft_writes_smollm2s_tokens_above_its_acceptance_floor(smollm2, draft):
    rows = drafters.most_frequent(drafters.token_counts(FOLDER), drafting.default_shortlist(draft.info.name))
    ids = encode_prompt(smollm2.tokenizer, drafting.STORY_REQUEST, chat=True)
    run = speculate(smollm2, drafters.ModelDrafter(draft.model, draft.tokenizer, rows), ids, 40)
    assert run.generated_ids == plain_decode(smollm2.model, ids, 40, GREEDY)
    assert summarise(run.rounds).acceptance_rate > ACCEPTANCE_FLOOR
