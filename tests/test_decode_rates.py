"""The decode rate three ways (issue #45): the bandwidth limit is the weights' bytes per token over the measured
bandwidth, each engine's share is its rate over that limit, and the sentences quote the numbers they are given,
saying why when a rate goes above its limit."""

import pytest
import torch
from torch import nn

from inference.core.measuring import Timing
from inference.lessons.quantization import figures, gguf, rates
from inference.lessons.quantization import text as say

pytestmark = pytest.mark.unit

MB = 1_000_000


def fake_rate(step_ms: float, bytes_per_token: int, bandwidth: float, cache: int | None, threads: int = 1):
    timing = Timing((step_ms * 0.9, step_ms, step_ms * 1.1), 3, "one decode step at 64 tokens of context")
    return rates.TransformersRate(
        "SmolLM2-135M-Instruct",
        "float32",
        bytes_per_token,
        timing,
        threads,
        rates.Bandwidth(bandwidth, 2, "fastest of 5 sums over a 960 MiB float32 tensor"),
        cache,
        "Test CPU 9000",
    )


def fake_gguf(rows: dict[str, tuple[int, list[float]]]) -> gguf.GGUFResult:
    results = {
        t: gguf.TypeResult(t, size + 1_800_000, rounds, [], read_bytes=size) for t, (size, rounds) in rows.items()
    }
    return gguf.GGUFResult("Why?", 40, [], "", results, 0, 64, 2)


def gap(frame, rate, servers=None) -> str:
    return say.rates_sentences(frame, rate, servers, False)["gap"]


def test_the_limit_is_bytes_over_bandwidth_and_the_share_is_rate_over_limit():
    rate = fake_rate(step_ms=40.0, bytes_per_token=538 * MB, bandwidth=29.4e9, cache=32 * 2**20)
    frame = rates.table(rate, fake_gguf({"f32": (538 * MB, [50.0, 52.0]), "q8_0": (143 * MB, [97.0, 95.0])}))
    assert frame["weights"].tolist() == ["float32", "f32", "q8_0"]  # most bytes first
    for _, row in frame.iterrows():
        assert row["bandwidth limit tokens/s"] == pytest.approx(29.4e9 / row["bytes per token"])
        assert row["share of the limit"] == pytest.approx(row["measured tokens/s"] / row["bandwidth limit tokens/s"])
    assert frame.loc[0, "measured tokens/s"] == pytest.approx(1000 / 40.0)  # 1 ÷ the median step
    assert frame.loc[1, "measured tokens/s"] == pytest.approx(51.0)  # the median of llama-server's rounds
    assert frame.loc[2, "bytes per token"] == 143 * MB  # the tensors' bytes, not the file's
    assert frame["fits in cache"].tolist() == ["no", "no", "no"]


def test_bytes_read_per_token_counts_a_tied_table_once_and_an_untied_one_not_at_all():
    class Tiny(nn.Module):
        def __init__(self, tied: bool):
            super().__init__()
            self.embed, self.inner = nn.Embedding(100, 8), nn.Linear(8, 8, bias=False)
            self.head = nn.Linear(8, 100, bias=False)
            if tied:
                self.head.weight = self.embed.weight

        def get_input_embeddings(self):
            return self.embed

        def get_output_embeddings(self):
            return self.head

    assert rates.bytes_read_per_token(Tiny(tied=True)) == (100 * 8 + 8 * 8) * 4
    assert rates.bytes_read_per_token(Tiny(tied=False)) == (8 * 8 + 100 * 8) * 4  # the head, not the lookup table
    assert rates.weights_name(Tiny(tied=True).to(torch.bfloat16)) == "bfloat16"


def test_the_gap_sentence_quotes_the_limit_and_both_engines_shares():
    rate = fake_rate(step_ms=50.0, bytes_per_token=500 * MB, bandwidth=25e9, cache=32 * 2**20)
    frame = rates.table(rate, fake_gguf({"f32": (500 * MB, [40.0]), "Q4_1": (100 * MB, [90.0])}))
    text = gap(frame, rate)
    assert "Test CPU 9000" in text and "25.0 GB/s" in text
    assert "at most 50 tokens/s" in text  # 25e9 / 500e6
    assert "llama-server reaches 80% of it at f32 (40 tokens/s), transformers 40% (20 tokens/s)" in text
    assert "the app's 1 thread" in text  # transformers on fewer threads than the bandwidth was measured on
    assert "Q4_1 reads 100 MB per token, so its limit is 250 tokens/s" in text and "(36%)" in text
    assert "above its limit" not in text and "fit in" not in text  # nothing fits the 32 MiB cache here


@pytest.mark.parametrize(
    "step_ms, weights, bandwidth, cache, said",
    [
        (2.0, 23 * MB, 6.5e9, 480 * 2**20, "23 MB fit in this machine's 480 MiB last-level cache"),  # 500 > 283/s
        (10.0, 538 * MB, 5e9, 32 * 2**20, "do not fit in the 32 MiB cache"),  # 100 > 9.3/s: bandwidth read low
        (10.0, 538 * MB, 5e9, None, "does not report its cache size"),
    ],
)
def test_a_rate_above_its_limit_is_explained_by_where_its_weights_fit(step_ms, weights, bandwidth, cache, said):
    rate = fake_rate(step_ms=step_ms, bytes_per_token=weights, bandwidth=bandwidth, cache=cache)
    frame = rates.table(rate)
    share = frame.loc[0, "share of the limit"]
    assert share == pytest.approx(1000 / step_ms / (bandwidth / weights)) and share > 1
    assert f"goes above its limit ({share:.0%}" in gap(frame, rate) and said in gap(frame, rate)


def test_the_chart_has_one_bar_and_one_limit_per_measured_row():
    rate = fake_rate(step_ms=50.0, bytes_per_token=500 * MB, bandwidth=25e9, cache=None)
    frame = rates.table(rate, fake_gguf({"f32": (500 * MB, [40.0]), "q8_0": (133 * MB, [80.0])}))
    fig = figures.rates_bars(frame)
    bars = [trace for trace in fig.data if trace.type == "bar"]
    limit = next(trace for trace in fig.data if trace.name == "bandwidth limit of its bytes")
    assert sorted(sum((list(b.x) for b in bars), [])) == sorted(frame["measured tokens/s"])
    assert sorted(limit.x) == pytest.approx(sorted(frame["bandwidth limit tokens/s"]))
    assert {b.marker.pattern.shape for b in bars} == {"/", ""}  # the engines differ by pattern, not colour alone
    text = say.rates_sentences(frame, rate, None, False)["chart"]
    assert "llama-server q8_0 80 tokens/s of a 188 tokens/s limit (43%)" in text


def test_gguf_bytes_read_per_token_leave_the_header_out_and_an_untied_table(tmp_path):
    import numpy as np
    from gguf import GGUFWriter

    def write(path, untied: bool):
        writer = GGUFWriter(str(path), "llama")
        writer.add_string("tokenizer.note", "x" * 10_000)  # header bytes, not read per token
        writer.add_tensor("token_embd.weight", np.zeros((100, 8), dtype=np.float32))
        writer.add_tensor("blk.0.ffn_up.weight", np.zeros((8, 8), dtype=np.float32))
        if untied:
            writer.add_tensor("output.weight", np.zeros((100, 8), dtype=np.float32))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        return path

    tied = write(tmp_path / "tied.gguf", untied=False)
    assert gguf.bytes_read_per_token(tied) == (100 * 8 + 8 * 8) * 4 < tied.stat().st_size
    assert gguf.bytes_read_per_token(write(tmp_path / "untied.gguf", untied=True)) == (8 * 8 + 100 * 8) * 4


def test_the_bench_key_holds_the_three_columns_of_the_page(smollm2, capsys):
    """real_decode_rates: transformers timed on SmolLM2 (the app's threads), the limit from the bandwidth given,
    each row's share; printed as the page's three columns."""
    from inference.bench import real_gguf as bench

    servers = fake_gguf({"f32": (538 * MB, [50.0]), "q8_0": (143 * MB, [96.0])})
    frame, record = bench.decode_rates(servers, bandwidth_gbs=20.0)
    assert record["bandwidth_gbs"] == 20.0 and record["transformers_threads"] >= 1
    own = record["transformers float32"]
    assert own["bytes_per_token"] == smollm2.info.weight_bytes
    assert own["limit_tokens_per_s"] == round(20e9 / smollm2.info.weight_bytes, 1)
    assert own["share_of_limit"] == pytest.approx(own["tokens_per_s"] / own["limit_tokens_per_s"], rel=0.01)
    assert record["llama-server q8_0"] == {
        "tokens_per_s": 96.0,
        "limit_tokens_per_s": round(20e9 / (143 * MB), 1),
        "share_of_limit": round(96.0 / (20e9 / (143 * MB)), 3),
        "bytes_per_token": 143 * MB,
    }
    bench.print_rates(record)
    printed = capsys.readouterr().out
    assert "llama-server q8_0" in printed and "20.0 GB/s" in printed


def test_the_torch_copies_join_as_transformers_rows_with_their_own_bytes_and_limits():
    """The page's comparison (when measured) adds bfloat16 / int8 / int4 rows; its float32 is the model timed here."""
    from types import SimpleNamespace

    def copy(weight_bytes, rate):
        return SimpleNamespace(weight_bytes=weight_bytes, decode_tokens_per_s=rate)

    comparison = SimpleNamespace(
        results={
            "float32": copy(500 * MB, 99.0),
            "bfloat16": copy(250 * MB, 20.0),
            "int8": copy(160 * MB, 8.0),
            "int4": copy(100 * MB, 30.0),
        }
    )
    rate = fake_rate(step_ms=50.0, bytes_per_token=500 * MB, bandwidth=25e9, cache=None)
    frame = rates.table(rate, None, comparison)
    assert frame["weights"].tolist() == ["float32", "bfloat16 copy", "int8 copy", "int4 copy"]
    assert frame.loc[0, "measured tokens/s"] == pytest.approx(20.0)  # timed here, not the comparison's 99
    assert frame.loc[2, "bandwidth limit tokens/s"] == pytest.approx(25e9 / (160 * MB))
    text = gap(frame, rate)
    assert "bfloat16 copy 20%, int8 copy 5%, int4 copy 12%" in text  # 20/100, 8/156.25, 30/250


def test_widely_spread_timings_say_the_machine_was_busy():
    rate = fake_rate(step_ms=50.0, bytes_per_token=500 * MB, bandwidth=25e9, cache=None)
    calm = fake_gguf({"f32": (500 * MB, [40.0, 41.0])})
    assert "busy" not in gap(rates.table(rate, calm), rate, calm)
    busy = fake_gguf({"f32": (500 * MB, [20.0, 60.0])})
    text = gap(rates.table(rate, busy), rate, busy)
    assert text.startswith("**The machine was busy while this ran** (llama-server's f32 rounds differed by 200%)")
    jumpy = rates.TransformersRate(**{**rate.__dict__, "timing": Timing((10.0, 20.0, 30.0, 40.0), 3, "a step")})
    assert "transformers' middle half of steps differed by" in gap(rates.table(jumpy), jumpy)
