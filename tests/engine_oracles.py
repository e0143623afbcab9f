"""What the engine tests check on any serving engine (llama-server, vLLM) against our engine on the bundled model:
the whole next-token distribution, and greedy tokens written by the server's own sampler."""

import torch

from inference.core.loader import encode_prompt
from inference.core.run import new_trace
from inference.sampling.pipeline import SamplingSettings


def assert_whole_distribution_equals_our_softmax(bundled, remote, prompts: list[str]) -> None:
    """Every token's probability from the server within 1e-4 of our engine's softmax, each prompt; the server's
    answer covers every token once and sums to 1."""
    client, vocab = remote.model.client, remote.model.vocab_size
    assert vocab == bundled.info.vocab_size and remote.model.exact
    for prompt in prompts:
        ids = encode_prompt(bundled.tokenizer, prompt)
        ours = new_trace(bundled.model, bundled.tokenizer, ids, 1).peek().double().softmax(-1)
        dist = client.next_token(ids, n_probs=vocab, vocab_size=vocab)
        assert dist.complete and len(set(dist.token_ids.tolist())) == vocab
        theirs = torch.zeros(vocab, dtype=torch.float64).index_put_((dist.token_ids,), dist.logprobs.exp())
        assert abs(theirs.sum().item() - 1) < 1e-4
        assert (theirs - ours).abs().max().item() < 1e-4, prompt


def assert_server_greedy_equals_the_engine(bundled, remote, prompts: list[str], new_tokens: int = 100) -> None:
    """The server's own greedy completion of each prompt is our engine's greedy tokens, all `new_tokens`."""
    for prompt in prompts:
        ids = encode_prompt(bundled.tokenizer, prompt)
        trace = new_trace(bundled.model, bundled.tokenizer, ids, new_tokens, stop_at_eos=False)
        ours = [r.token_id for r in trace.run(SamplingSettings(temperature=0))]
        assert remote.model.client.complete(ids, new_tokens).token_ids == ours, prompt
