"""Loading a model: one loader for the bundled model, local folders and hub ids (every refusal explained), the
server's limits and public mode, the bundled list, the default model and each page's opening prompt."""

import json
import shutil

import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

from app_pages.shared import models
from inference.core import real_model
from inference.core.bundled import bundled_models
from inference.core.limits import Limits
from inference.core.loader import ModelLoadError, encode_prompt, load_model
from inference.core.paths import BUNDLED_MODEL_DIR, BUNDLED_MODEL_NAME
from inference.core.prompting import GENERAL, OPENING_PROMPTS, STORY, model_kind, opening_prompt
from inference.lessons.constrained.formats import GENERAL_PROMPTS, PRESETS, preset_prompt

pytestmark = pytest.mark.unit

SMOL = real_model.REAL_MODEL_NAME


def test_bundled_model_loads_with_its_description(bundled):
    info = bundled.info
    assert (info.layers, info.heads, info.kv_heads, info.head_dim, info.context) == (6, 8, 4, 32, 512)
    assert info.weight_bytes == info.parameters * 4 and info.source == "bundled"
    assert not bundled.model.training


def test_bfloat16_halves_the_weight_bytes(bundled):
    half = load_model(dtype="bfloat16")
    assert half.info.weight_bytes * 2 == bundled.info.weight_bytes
    assert next(half.model.parameters()).dtype == torch.bfloat16


def test_local_folders_load_and_a_public_server_takes_them_only_from_its_models_folder(tmp_path, gpt2):
    model, tokenizer = gpt2
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded = load_model(str(tmp_path))
    assert loaded.info.source == "folder" and loaded.info.architecture == "GPT2LMHeadModel"
    assert (loaded.info.layers, loaded.info.heads, loaded.info.kv_heads) == (2, 4, 4)
    with pytest.raises(ModelLoadError, match="limited on this server"):
        load_model(str(tmp_path), server_is_public=True)
    assert load_model(str(BUNDLED_MODEL_DIR), server_is_public=True).info.layers == 6


def bad_folder(folder, kind):
    """A model folder broken in one way."""
    if kind == "empty":
        return
    config = json.loads((BUNDLED_MODEL_DIR / "config.json").read_text())
    if kind == "custom_code":
        config["auto_map"] = {"AutoModelForCausalLM": "modeling_evil.Evil"}
        (folder / "modeling_evil.py").write_text("raise SystemExit('never run')\n")
    (folder / "config.json").write_text(json.dumps(config))
    if kind == "pickle":
        torch.save({"w": torch.zeros(1)}, folder / "pytorch_model.bin")
    elif kind == "custom_code":
        shutil.copy(BUNDLED_MODEL_DIR / "model.safetensors", folder)
    elif kind == "encoder":
        BertForMaskedLM(
            BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
        ).save_pretrained(folder)


@pytest.mark.parametrize("kind,raised", [("empty", "no config.json"), ("no_weights", "no model weights"),
    ("pickle", "only pickle weights"), ("custom_code", "never runs code"), ("encoder", "not a causal")])  # fmt: skip
def test_bad_folders_are_refused(tmp_path, kind, raised):
    bad_folder(tmp_path, kind)
    with pytest.raises(ModelLoadError, match=raised):
        load_model(str(tmp_path))


@pytest.mark.parametrize("source,limits,raised", [
    ("/no/such/folder", Limits(), "Folder not found"), (str(BUNDLED_MODEL_DIR), Limits(max_model_bytes=1000), "GB per"),
    ("inference-lab-tests/certainly-not-cached", Limits(), "Cannot reach the Hugging Face hub"),
    ("not a model id!!", Limits(), "not a hub id"), ("gpt2", Limits(allow_hub=False), "does not allow hub models")])  # fmt: skip
def test_sources_the_server_cannot_load_are_refused(source, limits, raised):
    with pytest.raises(ModelLoadError, match=raised):
        load_model(source, limits=limits)


def test_unknown_hub_id_is_explained(monkeypatch):
    import httpx2
    from huggingface_hub import HfApi
    from huggingface_hub.errors import RepositoryNotFoundError

    def not_found(self, repo_id, **kwargs):
        response = httpx2.Response(404, request=httpx2.Request("GET", f"https://hub.invalid/{repo_id}"))
        raise RepositoryNotFoundError(f"404: {repo_id}", response=response)

    monkeypatch.setattr(HfApi, "model_info", not_found)
    with pytest.raises(ModelLoadError, match="No model 'someone/nothing-here'"):
        load_model("someone/nothing-here")


def test_chat_template_wraps_the_prompt(bundled):
    tokenizer = AutoTokenizer.from_pretrained(BUNDLED_MODEL_DIR)
    tokenizer.chat_template = "{% for m in messages %}<|endoftext|>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"
    assert tokenizer.decode(encode_prompt(tokenizer, "hi", chat=True)) == "<|endoftext|>user: hi\nassistant:"
    with pytest.raises(ModelLoadError, match="no chat template"):
        encode_prompt(bundled.tokenizer, "hi", chat=True)


def test_limits_read_ints_bools_and_paths_from_the_environment():
    env = {"INFERENCE_LAB_MAX_NEW_TOKENS": "400", "INFERENCE_LAB_ALLOW_HUB": "no", "OTHER_VARIABLE": "ignored",
           "INFERENCE_LAB_MODELS_FOLDER": "/srv/models", "INFERENCE_LAB_DEFAULT_MODEL": "gpt2"}  # fmt: skip
    limits = Limits.from_env(env)
    assert (limits.max_new_tokens, limits.allow_hub, limits.models_folder) == (400, False, "/srv/models")
    assert limits.default_model == "gpt2"
    assert Limits.from_env({}) == Limits() and Limits().default_model == SMOL and Limits().torch_threads == 1


@pytest.mark.parametrize(
    "address, public",
    [("127.0.0.1", False), ("::1", False), ("[::1]", False), ("localhost", False), ("", True), (None, True),
     ("0.0.0.0", True), ("10.0.0.5", True), ("my-host", True)],
)  # fmt: skip
def test_auto_public_mode_decides_by_the_bind_address(address, public):
    assert Limits().is_public(address) is public


def test_the_public_setting_overrides_the_bind_address():
    assert Limits.from_env({"INFERENCE_LAB_PUBLIC": "1"}).is_public("127.0.0.1") is True
    assert Limits.from_env({"INFERENCE_LAB_PUBLIC": "0"}).is_public("0.0.0.0") is False
    with pytest.raises(ValueError, match="INFERENCE_LAB_PUBLIC"):
        Limits(public="maybe").is_public("127.0.0.1")


def test_bundled_list_starts_with_the_default_model_and_reads_its_meta():
    first = bundled_models()[0]
    stats = json.loads((first.folder / "training_meta.json").read_text())["stats"]
    assert first.name == BUNDLED_MODEL_NAME and first.source == ""
    assert f"{stats['parameters'] / 1e6:.1f}M" in first.line


def test_a_moe_folder_is_listed_by_its_experts_and_incomplete_folders_are_left_out(tmp_path):
    moe, partial = tmp_path / "some-moe", tmp_path / "still-training"
    moe.mkdir(), partial.mkdir()
    (moe / "config.json").write_text(json.dumps({"num_local_experts": 8, "num_experts_per_tok": 2}))
    (moe / "model.safetensors").write_bytes(b"")
    (moe / "training_meta.json").write_text(json.dumps({"preset": "moe", "stats": {"parameters": 16_400_000}}))
    (partial / "training_log.csv").write_text("step\n")
    (listed,) = bundled_models(tmp_path)
    assert listed.name == "some-moe" and listed.source == str(moe) and "8" in listed.line and "2" in listed.line


@pytest.fixture
def default_for(monkeypatch):
    """default_source() with INFERENCE_LAB_DEFAULT_MODEL set, the wheel said installed or not."""

    def pick(wanted: str, installed: bool = True):
        monkeypatch.setenv("INFERENCE_LAB_DEFAULT_MODEL", wanted)
        monkeypatch.setattr(real_model, "is_available", lambda: installed)
        models._default_for.clear()
        return models.default_source()

    yield pick
    models._default_for.clear()


def test_the_default_model_follows_the_setting_and_the_wheel(default_for):
    assert default_for(SMOL) == default_for(SMOL.lower()) == (SMOL, "")
    source, note = default_for(SMOL, installed=False)
    assert source == "" and real_model.INSTALL_HINT in note
    assert default_for(BUNDLED_MODEL_NAME) == default_for("") == ("", "")
    assert default_for("gpt2") == ("gpt2", "")


def test_models_trained_here_get_story_prompts_and_others_general_ones():
    assert {model_kind(m.name) for m in bundled_models()} == {STORY}
    assert model_kind(SMOL) == model_kind("gpt2") == model_kind("HuggingFaceTB/SmolLM2-135M-Instruct") == GENERAL
    for page, prompts in OPENING_PROMPTS.items():
        assert set(prompts) == {STORY, GENERAL} and all(p.text.strip() for p in prompts.values()), page
        assert not prompts[STORY].chat, page  # the storyteller has no chat template
    assert opening_prompt("generate", SMOL).chat and opening_prompt("compare", SMOL).chat
    assert opening_prompt("generate", BUNDLED_MODEL_NAME) == OPENING_PROMPTS["generate"][STORY]
    assert set(GENERAL_PROMPTS) == set(PRESETS)
    for name in PRESETS:
        assert preset_prompt(name, STORY) == PRESETS[name][1] and preset_prompt(name, GENERAL) == GENERAL_PROMPTS[name]
