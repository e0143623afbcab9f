"""The training package: the one loop's schedule and losses, its distillation run (the student trains, the teacher
never), bits per byte, a draft's agreement, the cards' tables, the teacher text (batched greedy replies are each
prompt's own greedy text) and the feature draft trained end to end."""

import json
import math
import re

import pytest
import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM, LlamaModel

from inference.bench.engine import REAL_PROMPT
from inference.bench.pages import PLAY_PROMPT
from inference.core.loader import encode_prompt
from inference.core.model_config import decoder_config_fields
from inference.core.paths import BUNDLED_MODEL_DIR, MODELS_DIR
from inference.core.run import GREEDY
from inference.lessons.speculative import drafting, feature_draft
from inference.lessons.speculative import run as spec
from inference.lessons.speculative.comparison import plain_decode
from inference.training import distill_features, evaluate, feature_model, model_card, teacher_text, train

pytestmark = pytest.mark.unit

DRAFT_DIR = MODELS_DIR / train.PRESET_FOLDERS["draft"]
# the last one ends at reply token 6: a reply cut at its end token, the others left-padded beside it
REQUESTS = ("Tell me about owls.", "Write a short poem about bread.", "Why is sleep important?", "Describe bees.",
            "Answer with one word: what colour is grass?")  # fmt: skip


def tiny_llama(seed: int, **fields) -> LlamaForCausalLM:
    config = LlamaConfig(**decoder_config_fields(4096, 32, 1, 2, 1, 64, **fields), intermediate_size=64, eos_token_id=0)
    with torch.random.fork_rng():  # weight init draws from the global RNG: seeded here, restored after
        torch.manual_seed(seed)
        return LlamaForCausalLM(config).eval()


def test_the_schedule_warms_up_then_decays_to_a_tenth():
    lr = [train.learning_rate(step, 100, 1.0, 10) for step in range(100)]
    assert lr[0] == pytest.approx(0.1) and lr[9] == pytest.approx(1.0) and lr[10] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(lr[10:], lr[11:])) and lr[-1] == pytest.approx(0.1, abs=1e-3)


def test_the_distillation_loss_is_kl_from_the_teachers_distribution_to_the_students():
    student, teacher = torch.randn(2, 2, 3, 50, generator=torch.Generator().manual_seed(0))
    p, q = teacher.softmax(-1).double(), student.softmax(-1).double()
    expected = (p * (p.log() - q.log())).sum(-1).mean()
    assert float(train.distillation_loss(student, teacher)) == pytest.approx(float(expected), rel=1e-5)
    assert float(train.distillation_loss(teacher, teacher)) == pytest.approx(0.0, abs=1e-6)


def test_agreement_is_one_for_a_model_against_itself_and_sum_min_otherwise():
    a, b = tiny_llama(1), tiny_llama(2)
    ids = torch.randint(1, 4096, (40,), generator=torch.Generator().manual_seed(3)).tolist()
    same = evaluate.agreement(a, a, ids, window=16)
    assert same["greedy_agreement"] == 1.0 and same["acceptance_t1"] == pytest.approx(1.0, abs=1e-4)
    other = evaluate.agreement(a, b, ids, window=16)
    chunks = [torch.tensor([ids[i : i + 16]]) for i in range(0, 40, 16)]  # windows without overlap start over
    with torch.inference_mode():
        p, q = (torch.cat([m(c).logits[0] for c in chunks]).double() for m in (a, b))
    expected = torch.minimum((p / 0.8).softmax(-1), (q / 0.8).softmax(-1)).sum(-1).mean()
    assert other["acceptance_t0.8"] == pytest.approx(float(expected), abs=1e-4)
    assert other["positions"] == 40 and 0 < other["acceptance_t0.8"] < 1


@pytest.mark.parametrize("window,stride", [(64, 32), (8, 3), (8, 8), (8, 1)])
def test_bits_per_byte_scores_every_token_after_the_first_once(window, stride):
    uniform = tiny_llama(0, tied_embeddings=False)
    with torch.no_grad():
        uniform.lm_head.weight.zero_()  # every next token costs exactly ln(4096) nats
    report = evaluate.score_stream(uniform, list(range(10)) * 20, n_bytes=400, window=window, stride=stride)
    assert report.tokens_scored == 199 and report.nats_per_token == pytest.approx(math.log(4096))
    assert report.bits_per_byte == pytest.approx(199 * math.log(4096) / math.log(2) / 400)


def test_a_short_distillation_trains_the_student_and_never_the_teacher(tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(BUNDLED_MODEL_DIR)
    teacher_dir, out, corpus = (tmp_path / name for name in ("teacher", "out", "corpus"))
    corpus.mkdir()
    story = "Tom had a red ball. He threw it to his dog, and the dog ran after it in the sun."
    (corpus / "stories.txt").write_text("\n<|endoftext|>\n".join(f"{story} Day {i}." for i in range(40)))
    for folder, seed in ((teacher_dir, 4), (out, 5)):
        tiny_llama(seed).save_pretrained(folder, safe_serialization=True)
        tokenizer.save_pretrained(folder)
    split = {"validation_fraction": 0.1, "seed": 1, "vocab_size": 4096}
    (out / "training_meta.json").write_text(json.dumps({"settings": split, "stats": {"parameters": 1}}))
    student, teacher = (list(LlamaForCausalLM.from_pretrained(f).parameters()) for f in (out, teacher_dir))
    settings = train.TrainSettings(steps=3, batch_size=2, context=16, eval_every=2, warmup_steps=1, peak_lr=1e-2)
    d = train.train(settings, corpus, out, None, teacher_dir=teacher_dir)["distillation"]
    assert [d["before"]["step"], d["after"]["step"]] == [0, 3] and d["tokens_seen"] == 3 * 2 * 16
    assert d["after"]["acceptance_t1"] != d["before"]["acceptance_t1"]
    assert json.loads((out / "training_meta.json").read_text())["distillation"]["after"] == d["after"]
    log = (out / "distillation_log.csv").read_text().splitlines()
    assert log[0].startswith("step,") and [row.split(",")[0] for row in log[1:]] == ["0", "2", "3"]
    assert any(not torch.equal(a, b) for a, b in zip(LlamaForCausalLM.from_pretrained(out).parameters(), student))
    assert all(torch.equal(a, b) for a, b in zip(LlamaForCausalLM.from_pretrained(teacher_dir).parameters(), teacher))


def test_filling_a_card_rewrites_only_its_tables_of_numbers(tmp_path):
    """The bundled cards are what their files say (filling changes nothing); changed numbers refill one table row."""

    def copy_card(folder):
        for name in ("MODEL_CARD.md", "training_meta.json", "speculation.json"):
            if (folder / name).is_file():
                (tmp_path / name).write_text((folder / name).read_text())

    for folder in (MODELS_DIR / "smollm2-draft-14m", DRAFT_DIR):
        copy_card(folder)
        assert model_card.fill(tmp_path).read_text() == (folder / "MODEL_CARD.md").read_text()
    meta = json.loads((tmp_path / "training_meta.json").read_text())
    meta["distillation"]["after"]["greedy_agreement"] = 0.999
    (tmp_path / "training_meta.json").write_text(json.dumps(meta))
    before, after = (DRAFT_DIR / "MODEL_CARD.md").read_text(), model_card.fill(tmp_path).read_text()
    assert "| same top token as the target (greedy acceptance) | 63.9% | **99.9%** |" in after
    assert len([a for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b]) == 1


def test_general_requests_are_distinct_and_leave_out_the_measured_topics():
    requests = teacher_text.general_requests()
    assert len(requests) == len(set(requests)) == len(teacher_text.GENERAL_TOPICS) * len(teacher_text.GENERAL_TEMPLATES)
    measured = re.compile(r"\b(sky|sea|france|paris|capital|kitten|cook\w*|pancakes?)\b", re.I)
    asked = (drafting.QUESTION, drafting.STORY_REQUEST, drafting.CHAT_PROMPT, REAL_PROMPT, PLAY_PROMPT)
    assert all(measured.search(text) for text in (*asked, *drafting.OTHER_REQUESTS))  # the pattern names each one
    assert not [topic for topic in teacher_text.GENERAL_TOPICS if measured.search(topic)]


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


def test_batched_replies_are_each_prompts_own_greedy_text_cut_after_the_end_token(smollm2, replies):
    """Left padding changes only the matrix shapes, so float rounding could in principle flip a near tie; on these
    prompts the batched float32 replies equal one-at-a-time greedy (`generate` stopping at the end token) exactly."""
    rows, stop = teacher_text.read_replies(replies), smollm2.tokenizer.eos_token_id
    assert len({len(row["prompt_ids"]) for row in rows}) > 1  # the shorter prompts were left-padded
    for row in rows:
        with torch.inference_mode():
            own = smollm2.model.generate(
                torch.tensor([row["prompt_ids"]]), do_sample=False, max_new_tokens=24, eos_token_id=stop,
                pad_token_id=stop,
            )[0, len(row["prompt_ids"]) :].tolist()  # fmt: skip
        assert row["reply_ids"] == own and row["stopped"] == (own[-1] == stop)
    assert rows[-1]["stopped"] and len(rows[-1]["reply_ids"]) == 7  # it ends at its 7th token


def test_the_feature_draft_trains_loads_speculates_exactly_and_a_features_cache_repeats_it(smollm2, replies, tmp_path):
    base = dict(steps=3, batch_size=2, window=16, warmup_steps=1, shortlist=512, heldout_every=1000)
    cache, settings = tmp_path / "features.pt", distill_features.FeatureSettings(**base, second_step_weight=0.5)
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
    assert [r["loss_smoothed"] for r in meta["log"]] == [r["loss_smoothed"] for r in again["log"]]  # the same run


def test_the_second_step_loss_reads_the_drafts_own_prediction():
    torch.manual_seed(0)
    width, rows = 8, 5
    config = LlamaConfig(hidden_size=width, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2,
                         num_key_value_heads=1, vocab_size=1)  # fmt: skip
    body, fc = LlamaModel(config), torch.nn.Linear(2 * width, width, bias=False)
    tokens, labels = torch.randint(rows, (2, 2, 6))
    first = torch.randn(2, 6, width, requires_grad=True)
    loss = distill_features.second_step_loss(
        body, fc, torch.nn.Embedding(rows, width), torch.randn(rows, width), tokens, first, labels
    )
    loss.backward()
    assert loss.item() > 0
    assert first.grad[:, :-1].abs().sum() > 0  # positions 0..W-2 feed the second step
    assert first.grad[:, -1].abs().sum() == 0  # the last one has no next label in the window
