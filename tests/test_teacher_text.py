"""The teacher text the drafts learn from: transformers' batched greedy replies (left-padded) are each prompt's own
greedy text, cut after the end token; the general requests are distinct and leave out the measured requests' topics."""

import re

import pytest

from inference.bench.engine import REAL_PROMPT
from inference.bench.pages import PLAY_PROMPT
from inference.core.loader import encode_prompt
from inference.lessons.speculative import drafting as bundled_drafts
from inference.lessons.speculative.drafting import CHAT_PROMPT
from inference.training import teacher_text
from tests.conftest import transformers_greedy

pytestmark = pytest.mark.unit


def test_batched_replies_equal_each_prompts_own_greedy_text(smollm2):
    requests = ["Tell me about owls.", "Write a short poem about bread, please, in four lines."]
    prompts = [encode_prompt(smollm2.tokenizer, r, chat=True) for r in requests]
    assert len(prompts[0]) != len(prompts[1])  # the shorter one is left-padded
    replies = teacher_text.batched_greedy_replies(smollm2.model, smollm2.tokenizer, prompts, max_tokens=12)
    for prompt, (reply, stopped) in zip(prompts, replies, strict=True):
        own = transformers_greedy(smollm2.model, prompt, 12)
        stop = smollm2.tokenizer.eos_token_id
        assert reply == (own[: own.index(stop) + 1] if stop in own else own)
        assert stopped == (stop in own)


def test_a_reply_that_ends_is_cut_after_its_end_token(smollm2):
    prompts = [encode_prompt(smollm2.tokenizer, "Answer with one word: what colour is grass?", chat=True)]
    [(reply, stopped)] = teacher_text.batched_greedy_replies(smollm2.model, smollm2.tokenizer, prompts, 40)
    assert stopped and reply[-1] == smollm2.tokenizer.eos_token_id and reply.count(reply[-1]) == 1


def test_general_requests_are_distinct_and_leave_out_the_measured_topics():
    requests = teacher_text.general_requests()
    assert len(requests) == len(set(requests)) == len(teacher_text.GENERAL_TOPICS) * len(teacher_text.GENERAL_TEMPLATES)
    measured = re.compile(r"\b(sky|sea|france|paris|capital|kitten|cook\w*|pancakes?)\b", re.I)
    others = bundled_drafts.OTHER_REQUESTS
    for text in (bundled_drafts.QUESTION, bundled_drafts.STORY_REQUEST, CHAT_PROMPT, REAL_PROMPT, PLAY_PROMPT, *others):
        assert measured.search(text)  # the pattern does name each measured request
    assert not [topic for topic in teacher_text.GENERAL_TOPICS if measured.search(topic)]
