"""Sampling lab: one step's logits under every knob, figures."""
