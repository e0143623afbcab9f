"""Machine facts: the cache size is read from the system's own files, measurements are kept per process."""

import pytest
import torch

from inference.core import machine

pytestmark = pytest.mark.unit


def fake_cache(root, entries):
    for i, (level, kind, size) in enumerate(entries):
        index = root / f"index{i}"
        index.mkdir()
        (index / "level").write_text(f"{level}\n")
        (index / "type").write_text(f"{kind}\n")
        (index / "size").write_text(f"{size}\n")


def test_last_level_cache_is_the_highest_unified_level_in_sysfs(tmp_path):
    """L1 data, L1 instruction, L2 and L3 listed: the L3's size is the answer, in bytes."""
    fake_cache(
        tmp_path, [(1, "Data", "48K"), (1, "Instruction", "32K"), (2, "Unified", "2048K"), (3, "Unified", "307200K")]
    )
    assert machine._llc_from_sysfs(tmp_path) == 307_200 * 1024 == 314_572_800


def test_a_machine_without_cache_files_gives_none_shown_as_unknown(tmp_path):
    """No sysfs entries: None, which the pages print as 'unknown'."""
    assert machine._llc_from_sysfs(tmp_path) is None
    assert machine.describe_bytes(None) == "unknown"


def test_sizes_are_parsed_in_binary_units():
    """sysfs 'K' and lscpu 'MiB' are powers of two."""
    assert machine._parse_size("32768K") == 32 * 2**20
    assert machine._parse_size("300 MiB") == 300 * 2**20
    assert machine._parse_size("314572800") == 314_572_800
    assert machine._parse_size("lots") is None


def test_weights_fit_in_cache_compares_with_the_cache_read_here(monkeypatch):
    """The comparison uses the system's number, and says None when there is none."""
    monkeypatch.setattr(machine, "last_level_cache_bytes", lambda: 32 * 2**20)
    assert machine.weights_fit_in_cache(23_081_984) is True
    assert machine.weights_fit_in_cache(497_759_232) is False
    monkeypatch.setattr(machine, "last_level_cache_bytes", lambda: None)
    assert machine.weights_fit_in_cache(1) is None


def test_peak_flops_is_measured_once_per_process_and_thread_count():
    """A second call returns the kept measurement, which says how it was taken."""
    first = machine.peak_flops(torch.float32)
    assert first is machine.peak_flops(torch.float32)
    assert first.unit == "FLOP/s" and first.value > 0
    assert "float32" in first.how and f"{torch.get_num_threads()} torch thread" in first.how


def test_memory_bandwidth_reads_the_tensor_it_reports(monkeypatch):
    """Bytes per second of a sum over a tensor of the stated size (a small one here, to keep the test quick)."""
    machine._memory_bandwidth.cache_clear()
    monkeypatch.setattr(machine, "_bandwidth_bytes", lambda: 8 * 2**20)
    result = machine.memory_bandwidth()
    machine._memory_bandwidth.cache_clear()
    assert result.unit == "bytes/s" and result.value > 0
    assert "8 MiB" in result.how


def weight_bytes_of(model):
    return sum(p.numel() * p.element_size() for p in model.parameters())  # tied weights are one parameter


def test_size_sentence_differs_for_the_bundled_model_and_a_gpt2_sized_model(bundled, monkeypatch):
    """The bundled model's 23 MB fit a 32 MiB cache and GPT-2's ~498 MB (built from its config) do not: the text says so."""
    from transformers import GPT2Config, GPT2LMHeadModel

    with torch.device("meta"):  # GPT-2's real shape, no memory and no download
        gpt2_bytes = weight_bytes_of(GPT2LMHeadModel(GPT2Config()))
    assert gpt2_bytes == 124_439_808 * 4
    bundled_text = machine.weights_vs_cache(bundled.info.weight_bytes)
    gpt2_text = machine.weights_vs_cache(gpt2_bytes)
    assert bundled_text != gpt2_text  # on this machine, whatever its cache
    monkeypatch.setattr(machine, "last_level_cache_bytes", lambda: 32 * 2**20)
    assert "they fit" in machine.weights_vs_cache(bundled.info.weight_bytes)
    assert "more than" in machine.weights_vs_cache(gpt2_bytes) and "memory bandwidth" in machine.weights_vs_cache(
        gpt2_bytes
    )
    monkeypatch.setattr(machine, "last_level_cache_bytes", lambda: None)
    assert "unknown" in machine.weights_vs_cache(gpt2_bytes)
