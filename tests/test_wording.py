"""The lessons' number words (inference/core/wording): "1 token", never "1 tokens"; a signed change that rounds
to zero reads "0.000"."""

import pytest

from inference.core import wording

pytestmark = pytest.mark.unit


def test_plural_says_one_token_and_counts_with_commas():
    assert wording.plural(1, "token") == "1 token"
    assert wording.plural(0, "token") == "0 tokens" and wording.plural(49_152, "token") == "49,152 tokens"
    assert wording.plural(2, "query", "queries") == "2 queries"


def test_signed_never_prints_minus_zero():
    signed = wording.signed
    assert signed(-0.00004, 3) == "0.000" and signed(0.00004, 4) == "0.0000" and signed(0.0, 3) == "0.000"
    assert signed(-0.0123, 3) == "-0.012" and signed(0.0123, 3) == "+0.012"
