"""Serve many on SmolLM2 sends real requests (issue #45 item 4): questions in its chat template, tokenized by its
own tokenizer, on the seeded trace's arrivals and reply lengths; the table and the Gantt's hover read the replies."""

import json

import pandas as pd
import pytest

from inference.lessons.serving import real_text
from inference.lessons.serving.figures import gantt_figure
from inference.lessons.serving.request_trace import poisson_trace
from inference.lessons.serving.stats import RequestRecord, request_table

pytestmark = pytest.mark.unit


def test_real_prompts_are_the_questions_on_the_same_clock(smollm2):
    tokenizer = smollm2.tokenizer
    plain = poisson_trace("short chat", 4.0, 5, 3, 4096)
    real = real_text.with_real_prompts(plain, tokenizer)
    assert [r.arrival_s for r in real.requests] == [r.arrival_s for r in plain.requests]
    assert [r.reply_tokens for r in real.requests] == [r.reply_tokens for r in plain.requests]
    assert real.key != plain.key and real.key.endswith(real_text.SOURCE)
    asked = [real_text.question_of(tokenizer, r) for r in real.requests]
    assert asked == list(real_text.QUESTIONS[:5])
    text = tokenizer.decode(real.requests[0].prompt_ids)
    assert "<|im_start|>user" in text and text.rstrip().endswith("<|im_start|>assistant")


def test_a_long_document_prompt_grows_with_its_drawn_length(smollm2):
    tokenizer = smollm2.tokenizer
    short = real_text.prompt_ids(tokenizer, 0, 80, "long document")
    long = real_text.prompt_ids(tokenizer, 0, 300, "long document")
    assert len(long) - len(short) == 220
    assert real_text.SUMMARY_ASK in tokenizer.decode(long)


def test_the_gantt_hover_and_the_table_read_each_reply(smollm2):
    trace = real_text.with_real_prompts(poisson_trace("short chat", 4.0, 2, 0, 4096), smollm2.tokenizer)
    records = [
        RequestRecord(index=i, sent_s=0.1 * i, asked_tokens=3, token_times_s=(0.2 + i, 0.3 + i), text=reply)
        for i, reply in enumerate(["Paris is the capital.", "Rayleigh <scattering> & light"])
    ]
    rows = real_text.texts_table(smollm2.tokenizer, trace, records)
    assert [(r["asked"], r["reply"]) for r in rows] == [
        (real_text.QUESTIONS[0], "Paris is the capital."),
        (real_text.QUESTIONS[1], "Rayleigh <scattering> & light"),
    ]
    table = request_table(records)
    assert list(table["reply"]) == ["Paris is the capital.", "Rayleigh <scattering> & light"]
    figure = json.loads(gantt_figure(pd.DataFrame(table), "t").to_json())
    hovers = [row[3] for row in figure["data"][2]["customdata"]]
    assert hovers == ["“Paris is the capital.”", "“Rayleigh &lt;scattering&gt; &amp; light”"]
