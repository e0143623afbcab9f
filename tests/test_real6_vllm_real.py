"""vLLM serves the same real model as llama-server on Serve many (issue #45 item 4): its float32 folder, converted
from the wheel's GGUF, started by the project's own code, answers the trace's real questions; the first, "What is
the capital of France?", greedy, names Paris on both engines."""

import pytest

from inference.core import real_model
from inference.engines import llamacpp, vllm
from inference.engines.client import LLAMACPP, VLLM
from inference.lessons.serving import experiments, real_text, two_engines
from inference.lessons.serving.request_trace import poisson_trace

pytestmark = pytest.mark.engine


@pytest.mark.skipif(not real_model.is_available(), reason="SmolLM2-135M-Instruct's wheel is not installed")
@pytest.mark.skipif(
    not llamacpp.is_built(), reason="llama-server is not built: python -m inference.engines llamacpp build"
)
@pytest.mark.skipif(not vllm.is_installed(), reason="vLLM is not installed: python -m inference.engines vllm install")
def test_both_engines_answer_the_real_questions_on_smollm2():
    trace = real_text.with_real_prompts(poisson_trace("short chat", 8.0, 4, 0, 4096), real_text.real_tokenizer())
    model = experiments.model_on_engine(experiments.REAL)
    runs = two_engines.replay_on_engines(model, trace, 2)
    for engine in (LLAMACPP, VLLM):
        records = runs[engine].result.records
        assert len(records) == 4 and all(r.complete for r in records), [r.error for r in records if r.error]
        assert "Paris" in records[0].text, (engine, records[0].text)
