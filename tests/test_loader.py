"""One loader for the bundled model, local folders and hub ids; every refusal explained."""

import json
import shutil

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, BertConfig, BertForMaskedLM

from inference.core.limits import Limits
from inference.core.loader import ModelLoadError, classify_source, encode_prompt, load_model
from inference.core.paths import BUNDLED_MODEL_DIR

pytestmark = pytest.mark.unit


def test_bundled_model_loads_with_its_description(bundled):
    info = bundled.info
    assert (info.layers, info.heads, info.kv_heads, info.head_dim) == (6, 8, 4, 32)
    assert info.context == 512 and info.vocab_size == 4096 and info.kv_heads < info.heads
    assert 3e6 <= info.parameters <= 8e6
    assert info.weight_bytes == info.parameters * 4
    assert not bundled.model.training
    assert info.source == "bundled"


def test_bundled_folder_needs_no_project_code():
    """Plain transformers loads the shipped folder: config, safetensors, tokenizer."""
    model = AutoModelForCausalLM.from_pretrained(BUNDLED_MODEL_DIR, use_safetensors=True)
    tokenizer = AutoTokenizer.from_pretrained(BUNDLED_MODEL_DIR)
    ids = tokenizer("Once upon a time")["input_ids"]
    assert ids[0] == tokenizer.bos_token_id == tokenizer.eos_token_id
    assert model.config.model_type == "llama"
    assert (BUNDLED_MODEL_DIR / "model.safetensors").stat().st_size <= 30 * 2**20


def test_bfloat16_halves_the_weight_bytes(bundled):
    half = load_model(dtype="bfloat16")
    assert half.info.weight_bytes * 2 == bundled.info.weight_bytes
    assert next(half.model.parameters()).dtype == torch.bfloat16


def test_local_folder_copy_loads(tmp_path, bundled):
    bundled.model.save_pretrained(tmp_path)
    bundled.tokenizer.save_pretrained(tmp_path)
    copy = load_model(str(tmp_path))
    assert copy.info.source == "folder" and copy.info.parameters == bundled.info.parameters


def test_gpt2_folder_loads(tmp_path, gpt2):
    model, tokenizer = gpt2
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded = load_model(str(tmp_path))
    assert loaded.info.architecture == "GPT2LMHeadModel"
    assert (loaded.info.layers, loaded.info.heads, loaded.info.kv_heads) == (2, 4, 4)


def test_missing_folder_is_refused():
    with pytest.raises(ModelLoadError, match="Folder not found"):
        load_model("/no/such/folder")


def test_empty_folder_is_refused(tmp_path):
    with pytest.raises(ModelLoadError, match="no config.json"):
        load_model(str(tmp_path))


def test_folder_without_weights_is_refused(tmp_path):
    shutil.copy(BUNDLED_MODEL_DIR / "config.json", tmp_path)
    with pytest.raises(ModelLoadError, match="no model weights"):
        load_model(str(tmp_path))


def test_pickle_only_weights_are_refused(tmp_path, bundled):
    shutil.copy(BUNDLED_MODEL_DIR / "config.json", tmp_path)
    torch.save(bundled.model.state_dict(), tmp_path / "pytorch_model.bin")
    with pytest.raises(ModelLoadError, match="only pickle weights"):
        load_model(str(tmp_path))


def test_custom_code_is_refused(tmp_path):
    config = json.loads((BUNDLED_MODEL_DIR / "config.json").read_text())
    config["auto_map"] = {"AutoModelForCausalLM": "modeling_evil.EvilForCausalLM"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "modeling_evil.py").write_text("raise SystemExit('never run')\n")
    shutil.copy(BUNDLED_MODEL_DIR / "model.safetensors", tmp_path)
    with pytest.raises(ModelLoadError, match="never runs code"):
        load_model(str(tmp_path))


def test_non_causal_model_is_refused(tmp_path):
    config = BertConfig(
        vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64
    )
    BertForMaskedLM(config).save_pretrained(tmp_path)
    with pytest.raises(ModelLoadError, match="not a causal"):
        load_model(str(tmp_path))


def test_too_large_for_the_limit_is_refused_before_loading(tmp_path, bundled):
    with pytest.raises(ModelLoadError, match="allows 0.0 GB per model"):
        load_model(str(BUNDLED_MODEL_DIR), limits=Limits(max_model_bytes=1000))


def test_hub_unreachable_and_not_cached_is_explained():
    with pytest.raises(ModelLoadError, match="Cannot reach the Hugging Face hub"):
        load_model("inference-lab-tests/certainly-not-cached")


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


def test_malformed_hub_id_is_explained():
    with pytest.raises(ModelLoadError, match="not a hub id"):
        load_model("not a model id!!")


def test_hub_can_be_switched_off():
    with pytest.raises(ModelLoadError, match="does not allow hub models"):
        load_model("gpt2", limits=Limits(allow_hub=False))


def test_public_server_only_loads_folders_under_its_models_folder(tmp_path, bundled):
    bundled.model.save_pretrained(tmp_path)
    bundled.tokenizer.save_pretrained(tmp_path)
    with pytest.raises(ModelLoadError, match="limited on this server"):
        load_model(str(tmp_path), server_is_public=True)
    assert load_model(str(BUNDLED_MODEL_DIR), server_is_public=True).info.layers == 6


def test_sources_are_classified():
    assert classify_source("") == classify_source(None) == "bundled"
    assert classify_source("/tmp") == "folder"
    assert classify_source("HuggingFaceTB/SmolLM2-135M-Instruct") == "hub"


def test_chat_template_wraps_the_prompt(bundled, tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(BUNDLED_MODEL_DIR)
    tokenizer.chat_template = "{% for m in messages %}<|endoftext|>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"
    ids = encode_prompt(tokenizer, "hi", chat=True)
    assert tokenizer.decode(ids) == "<|endoftext|>user: hi\nassistant:"
    with pytest.raises(ModelLoadError, match="no chat template"):
        encode_prompt(bundled.tokenizer, "hi", chat=True)
