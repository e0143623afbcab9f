"""Inference Lab's engine room: plain Python, no Streamlit.

Each module has one job: loading models, training the bundled model, sampling math,
the step engine, KV-cache accounting, timing, quantization and figure building.
"""
