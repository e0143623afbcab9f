"""Machine facts: the cache size is read from the system's own files, measurements are kept per process, and the
weights-vs-cache sentence follows the cache read here."""

import pytest
import torch

from inference.core import machine

pytestmark = pytest.mark.unit


def test_last_level_cache_is_the_highest_unified_level_in_sysfs_and_none_without_it(tmp_path):
    """L1 data, L1 instruction, L2 and L3 listed: the L3's size in bytes (sysfs 'K' is binary); no files: unknown."""
    for i, (level, kind, size) in enumerate([(1, "Data", "48K"), (1, "Instruction", "32K"), (3, "Unified", "307200K")]):
        (tmp_path / f"index{i}").mkdir()
        for name, value in (("level", level), ("type", kind), ("size", size)):
            (tmp_path / f"index{i}" / name).write_text(f"{value}\n")
    assert machine._llc_from_sysfs(tmp_path) == 307_200 * 1024
    assert machine._llc_from_sysfs(tmp_path / "index0") is None and machine.describe_bytes(None) == "unknown"
    assert [machine._parse_size(t) for t in ("32768K", "300 MiB", "314572800", "lots")] == [
        2**25,
        300 * 2**20,
        314572800,
        None,
    ]


def test_measurements_are_kept_per_process_and_say_how_they_were_taken(monkeypatch):
    first = machine.peak_flops(torch.float32)
    assert first is machine.peak_flops(torch.float32) and first.unit == "FLOP/s" and first.value > 0
    assert "float32" in first.how and f"{torch.get_num_threads()} torch thread" in first.how
    machine._memory_bandwidth.cache_clear()
    monkeypatch.setattr(machine, "_bandwidth_bytes", lambda: 8 * 2**20)  # a small tensor, to keep the test quick
    result = machine.memory_bandwidth()
    machine._memory_bandwidth.cache_clear()
    assert result.unit == "bytes/s" and result.value > 0 and "8 MiB" in result.how


def test_the_bundled_model_fits_a_32_mib_cache_and_gpt2_does_not(bundled, monkeypatch):
    """The bundled model's 23 MB fit a 32 MiB cache and GPT-2's ~498 MB (from its config) do not; unknown: None."""
    from transformers import GPT2Config, GPT2LMHeadModel

    with torch.device("meta"):  # GPT-2's real shape, no memory and no download
        gpt2_bytes = sum(p.numel() * p.element_size() for p in GPT2LMHeadModel(GPT2Config()).parameters())
    monkeypatch.setattr(machine, "last_level_cache_bytes", lambda: 32 * 2**20)
    assert machine.weights_fit_in_cache(bundled.info.weight_bytes) and not machine.weights_fit_in_cache(gpt2_bytes)
    assert "they fit" in machine.weights_vs_cache(bundled.info.weight_bytes)
    assert "memory bandwidth" in machine.weights_vs_cache(gpt2_bytes)
    monkeypatch.setattr(machine, "last_level_cache_bytes", lambda: None)
    assert machine.weights_fit_in_cache(gpt2_bytes) is None and "unknown" in machine.weights_vs_cache(gpt2_bytes)
