"""#46 item 14: γ changes keep the Speculative run; after Play the page opens the last round that drafted;
the sidebar names a loaded folder, never its filesystem path."""

import pytest
import torch

from app_pages.shared.sidebar import source_label
from inference.core.bundled import BundledModel
from inference.core.loader import encode_prompt
from inference.core.run import GREEDY
from inference.lessons.speculative import drafters, summary
from inference.lessons.speculative import run as spec

pytestmark = pytest.mark.unit

torch.set_num_threads(1)


def lookup_run(bundled, new_tokens: int, gamma: int = 3):
    ids = encode_prompt(bundled.tokenizer, "Once upon a time there was a cat. Once upon a time there was a")
    return spec.new_run(
        bundled.model,
        bundled.tokenizer,
        drafters.PromptLookupDrafter(bundled.model.config.vocab_size),
        ids,
        new_tokens,
        gamma=gamma,
    )


def test_a_new_gamma_keeps_the_run_and_drafts_with_it_from_the_next_round(bundled):
    run = lookup_run(bundled, 30, gamma=2)
    run.step(GREEDY)
    run.use_gamma(5)
    assert len(run.rounds) == 1 and run.rounds[0].gamma == 2  # the round made under γ=2 stays as it was
    run.step(GREEDY)
    assert run.rounds[1].gamma == 5
    with pytest.raises(ValueError, match="gamma"):
        run.use_gamma(0)


def test_the_round_shown_is_the_last_that_drafted_not_a_final_empty_one(bundled):
    run = lookup_run(bundled, 12, gamma=4)
    list(run.run(GREEDY))
    assert run.rounds[-1].drafted == 0  # the run's last token: one left, nothing to draft
    shown = summary.round_to_show(run.rounds)
    assert run.rounds[shown].drafted > 0
    assert all(r.drafted == 0 for r in run.rounds[shown + 1 :])
    assert summary.round_to_show([]) is None


def test_the_sidebar_names_a_loaded_folder_not_its_path(tmp_path):
    moe = tmp_path / "storyteller-moe-16m"
    shipped = [BundledModel("storyteller-moe-16m", moe, "Mixture of Experts")]
    assert source_label(str(moe), shipped) == "storyteller-moe-16m"
    assert source_label(str(tmp_path / "my-model"), []) == "my-model"  # a typed folder: its name
    assert source_label("HuggingFaceTB/SmolLM2-135M", []) == "HuggingFaceTB/SmolLM2-135M"  # a hub id as it is
