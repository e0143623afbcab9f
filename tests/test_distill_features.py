"""Training the feature draft end to end on a few of SmolLM2's own replies: the folder it writes loads as a drafter
whose greedy output is plain decoding's, a features cache gives a second training the same start, and the
second-step loss trains the draft on reading its own prediction."""

import json

import pytest
import torch
from transformers import LlamaConfig, LlamaModel

from inference.core.loader import encode_prompt
from inference.core.run import GREEDY
from inference.lessons.speculative import feature_draft
from inference.lessons.speculative import run as spec
from inference.lessons.speculative.comparison import plain_decode
from inference.training import distill_features, feature_model, teacher_text

pytestmark = pytest.mark.unit

REQUESTS = ("Tell me about owls.", "Write a short poem about bread.", "Why is sleep important?", "Describe bees.")


@pytest.fixture(scope="module")
def replies(smollm2, tmp_path_factory):
    prompts = [encode_prompt(smollm2.tokenizer, r, chat=True) for r in REQUESTS]
    answers = teacher_text.batched_greedy_replies(smollm2.model, smollm2.tokenizer, prompts, max_tokens=24)
    path = tmp_path_factory.mktemp("teacher") / "replies.jsonl"
    rows = [
        {"request": r, "prompt_ids": p, "reply_ids": ids, "stopped": stopped}
        for r, p, (ids, stopped) in zip(REQUESTS, prompts, answers, strict=True)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _settings(**changes):
    base = dict(steps=3, batch_size=2, window=16, warmup_steps=1, shortlist=512, heldout_every=1000)
    return distill_features.FeatureSettings(**(base | changes))


def test_the_trained_folder_loads_and_speculates_exactly_and_a_features_cache_repeats_it(smollm2, replies, tmp_path):
    cache, settings = tmp_path / "features.pt", _settings(second_step_weight=0.5)
    meta = distill_features.train(settings, replies, tmp_path / "draft", cache)
    assert cache.is_file() and meta["teacher_text"]["replies_trained"] == len(REQUESTS)
    draft = feature_model.load(tmp_path / "draft")
    assert draft.rows.numel() <= 512
    drafter = feature_draft.FeatureDrafter(draft, smollm2.model, smollm2.tokenizer)
    ids = encode_prompt(smollm2.tokenizer, "Why is honey sweet?", chat=True)
    run = spec.new_run(smollm2.model, smollm2.tokenizer, drafter, ids, 10, gamma=2, stop_at_eos=False)
    list(run.run(GREEDY))
    assert run.generated_ids == plain_decode(smollm2.model, ids, 10, GREEDY)
    stamp = cache.stat().st_mtime_ns
    again = distill_features.train(settings, replies, tmp_path / "again", cache)
    assert cache.stat().st_mtime_ns == stamp  # read, not written again
    losses = [[row["loss_smoothed"] for row in m["log"]] for m in (meta, again)]
    assert losses[0] == losses[1]  # same features, same seed: the same training


def test_the_second_step_loss_reads_the_drafts_own_prediction():
    torch.manual_seed(0)
    width, rows = 8, 5
    config = LlamaConfig(
        hidden_size=width,
        intermediate_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        vocab_size=1,
    )
    body = LlamaModel(config)
    fc = torch.nn.Linear(2 * width, width, bias=False)
    embedding = torch.nn.Embedding(rows, width)
    head = torch.randn(rows, width)
    tokens = torch.randint(rows, (2, 6))
    labels = torch.randint(rows, (2, 6))
    first = torch.randn(2, 6, width, requires_grad=True)
    loss = distill_features.second_step_loss(body, fc, embedding, head, tokens, first, labels)
    loss.backward()
    assert loss.item() > 0
    assert first.grad[:, :-1].abs().sum() > 0  # positions 0..W-2 feed the second step
    assert first.grad[:, -1].abs().sum() == 0  # the last one has no next label in the window
