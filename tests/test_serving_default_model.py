"""Serve many and Inside the engine open on the app's default model: the real SmolLM2 where it is the default."""

import pytest

from inference.core import real_model
from inference.lessons.serving import experiments

pytestmark = pytest.mark.unit


def test_the_real_model_comes_first_only_when_it_is_the_apps_default(monkeypatch):
    monkeypatch.setattr(real_model, "is_available", lambda: True)
    monkeypatch.setenv("INFERENCE_LAB_DEFAULT_MODEL", "smollm2-135m-instruct")  # a name in any case
    assert experiments.real_model_first()
    monkeypatch.setenv("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")
    assert not experiments.real_model_first()


def test_without_the_wheel_the_storyteller_stays_first(monkeypatch):
    monkeypatch.setattr(real_model, "is_available", lambda: False)
    monkeypatch.setenv("INFERENCE_LAB_DEFAULT_MODEL", experiments.REAL)
    assert not experiments.real_model_first()
