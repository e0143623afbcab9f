"""Sentences about a run that steps (Generate, and the pages that reuse its Stepper): every number passed in."""

from __future__ import annotations

from inference.core.run import STOP_CONTEXT, STOP_EOS, STOP_MAX_NEW_TOKENS


def stop_sentence(reason: str, max_new_tokens: int, context: int, chooser: str = "the model") -> str:
    """Why a finished run stopped; `chooser` names the model that picks the tokens ("the target")."""
    return {
        STOP_EOS: f"stopped: {chooser} chose its end-of-text token",
        STOP_MAX_NEW_TOKENS: f"stopped: reached max new tokens ({max_new_tokens})",
        STOP_CONTEXT: f"stopped: the model's context of {context} tokens is full",
    }[reason]
