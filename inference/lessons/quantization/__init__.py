"""Quantization: torchao copies measured (experiments), GGUF rows (gguf), sentences (text), figures."""
