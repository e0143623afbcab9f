"""The one training loop and its distillation (`inference/training/train.py --teacher`): the loss is the KL divergence
it says, the agreement figures are what they say, a short run on tiny models trains the student only, and a card's
tables of numbers are filled from the folder's files."""

import json

import pytest
import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

from inference.core.model_config import decoder_config_fields
from inference.core.paths import BUNDLED_MODEL_DIR, MODELS_DIR
from inference.training import evaluate, model_card, train

DRAFT_DIR = MODELS_DIR / train.PRESET_FOLDERS["draft"]

pytestmark = pytest.mark.unit


def tiny_llama(seed: int) -> LlamaForCausalLM:
    fields = decoder_config_fields(4096, 32, 1, 2, 1, 64)
    with torch.random.fork_rng():  # weight init draws from the global RNG: seeded here, restored after
        torch.manual_seed(seed)
        return LlamaForCausalLM(LlamaConfig(**fields, intermediate_size=64, bos_token_id=0, eos_token_id=0)).eval()


def test_the_loss_is_kl_from_the_teachers_distribution_to_the_students():
    generator = torch.Generator().manual_seed(0)
    student, teacher = torch.randn(2, 3, 50, generator=generator), torch.randn(2, 3, 50, generator=generator)
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
    # windows of 16 without overlap: positions 16 and 32 start over
    chunks = [torch.tensor([ids[i : i + 16]]) for i in range(0, 40, 16)]
    with torch.inference_mode():
        p = torch.cat([a(c).logits[0] for c in chunks]).double()
        q = torch.cat([b(c).logits[0] for c in chunks]).double()
    expected = torch.minimum((p / 0.8).softmax(-1), (q / 0.8).softmax(-1)).sum(-1).mean()
    assert other["acceptance_t0.8"] == pytest.approx(float(expected), abs=1e-4)
    assert other["positions"] == 40 and 0 < other["acceptance_t0.8"] < 1


def test_a_short_run_trains_the_student_and_never_the_teacher(tmp_path):
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
    student_before = [p.clone() for p in LlamaForCausalLM.from_pretrained(out).parameters()]
    teacher_before = [p.clone() for p in LlamaForCausalLM.from_pretrained(teacher_dir).parameters()]
    settings = train.TrainSettings(steps=3, batch_size=2, context=16, eval_every=2, warmup_steps=1, peak_lr=1e-2)
    meta = train.train(settings, corpus, out, None, teacher_dir=teacher_dir)

    d = meta["distillation"]
    assert [d["before"]["step"], d["after"]["step"]] == [0, 3] and d["tokens_seen"] == 3 * 2 * 16
    assert d["after"]["acceptance_t1"] != d["before"]["acceptance_t1"]
    assert json.loads((out / "training_meta.json").read_text())["distillation"]["after"] == d["after"]
    log = (out / "distillation_log.csv").read_text().splitlines()
    assert log[0].startswith("step,") and [row.split(",")[0] for row in log[1:]] == ["0", "2", "3"]
    trained = LlamaForCausalLM.from_pretrained(out)
    assert any(not torch.equal(a, b) for a, b in zip(trained.parameters(), student_before))
    assert all(
        torch.equal(a, b) for a, b in zip(teacher_before, LlamaForCausalLM.from_pretrained(teacher_dir).parameters())
    )


def test_the_schedule_warms_up_then_decays_to_a_tenth():
    lr = [train.learning_rate(step, 100, 1.0, 10) for step in range(100)]
    assert lr[0] == pytest.approx(0.1) and lr[9] == pytest.approx(1.0) and lr[10] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(lr[10:], lr[11:])) and lr[-1] == pytest.approx(0.1, abs=1e-3)


def copy_card(folder, to):
    for name in ("MODEL_CARD.md", "training_meta.json", "speculation.json"):
        if (folder / name).is_file():
            (to / name).write_text((folder / name).read_text())


def test_filling_a_card_rewrites_only_its_tables_of_numbers(tmp_path):
    """The bundled cards' tables are what their files say (filling changes nothing), and a table is refilled from
    changed numbers while the prose around it stays."""
    for folder in (DRAFT_DIR, DRAFT_DIR.parent / "smollm2-draft-14m"):
        copy_card(folder, tmp_path)
        assert model_card.fill(tmp_path).read_text() == (folder / "MODEL_CARD.md").read_text()
    copy_card(DRAFT_DIR, tmp_path)
    meta = json.loads((tmp_path / "training_meta.json").read_text())
    meta["distillation"]["after"]["greedy_agreement"] = 0.999
    (tmp_path / "training_meta.json").write_text(json.dumps(meta))
    before, after = (DRAFT_DIR / "MODEL_CARD.md").read_text(), model_card.fill(tmp_path).read_text()
    assert "| same top token as the target (greedy acceptance) | 63.9% | **99.9%** |" in after
    changed = [a for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b]
    assert len(changed) == 1
