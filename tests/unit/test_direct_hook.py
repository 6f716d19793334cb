"""Which task encoders a stream calls directly, and which it skips as the identity."""

from __future__ import annotations

from typing import Any

from stoker import DefaultTaskEncoder, TaskEncoder
from stoker.runtime.sample_encoding import IDENTITY, direct_hook


class Slotted(TaskEncoder):  # type: ignore[type-arg]
    __slots__ = ()


class Own(DefaultTaskEncoder):  # type: ignore[type-arg]
    def encode_sample(self, sample: Any) -> Any:
        return sample


def test_only_the_default_identity_hooks_are_skipped() -> None:
    one = ["encode_sample"]
    assert direct_hook(DefaultTaskEncoder(), one) is IDENTITY
    assert direct_hook(Slotted(), one) is IDENTITY  # no __dict__ to look into
    converting = DefaultTaskEncoder(encoded_sample_type=dict)  # converts: not the identity
    assert direct_hook(converting, one) == converting.encode_sample
    patched = DefaultTaskEncoder()
    patched.encode_sample = lambda sample: sample  # type: ignore[method-assign]
    assert direct_hook(patched, one) is patched.encode_sample
    own = Own()
    assert direct_hook(own, one) == own.encode_sample
    assert direct_hook(own, ["encode_sample", "postencode_sample"]) is None  # a chain
