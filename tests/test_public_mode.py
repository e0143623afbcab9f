"""INFERENCE_LAB_PUBLIC: whether visitors are the public (no typed engine URLs, folders only under the models
folder) is an explicit setting; left at auto, only an app listening on a loopback address is a developer's."""

import pytest

from inference.core.limits import Limits

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "address, public",
    [
        ("127.0.0.1", False),
        ("localhost", False),
        ("::1", False),
        ("[::1]", False),
        ("127.0.0.2", False),
        ("", True),
        (None, True),
        ("0.0.0.0", True),
        ("10.0.0.5", True),
        ("my-host", True),
    ],
)
def test_auto_decides_by_the_bind_address(address, public):
    assert Limits().is_public(address) is public


def test_the_setting_overrides_the_bind_address_behind_a_proxy_on_the_same_machine():
    assert Limits.from_env({"INFERENCE_LAB_PUBLIC": "1"}).is_public("127.0.0.1") is True
    assert Limits.from_env({"INFERENCE_LAB_PUBLIC": "0"}).is_public("0.0.0.0") is False
    with pytest.raises(ValueError, match="INFERENCE_LAB_PUBLIC"):
        Limits(public="maybe").is_public("127.0.0.1")
