"""Client-style classes a ``dataset.yaml`` names by module (for test_flavors_loading.py).

They mirror what frameworks define: a Sample subclass with a field map, and a Megatron-Bridge
style ``ChatMLWebdataset(DefaultDecoderWebdatasetFactory[ChatMLSample])`` that installs its own
decoder; plus a factory overriding ``load_sample`` and a callable that is not a class at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stoker import Sample
from stoker.flavors import DefaultDecoderWebdatasetFactory


@dataclass
class CaptionedText(Sample):
    """A user's sample type: text and its number, from a field map."""

    text: str
    number: int = -1


@dataclass
class ChatMLSample(Sample):
    """As Bridge's: a JSON conversation string and optional images."""

    conversation: str
    imgs: list[Any] | None = None


def _chat_decoder(sample: dict[str, Any]) -> dict[str, Any]:
    """Bridge installs its own decoder; this one keeps JSON as text and tags the parts."""
    return {
        k: (v.decode() if isinstance(v, bytes) and not k.startswith("__") else v)
        for k, v in sample.items()
    }


class ChatMLWebdataset(DefaultDecoderWebdatasetFactory[ChatMLSample]):
    """Bridge's pattern: drop the given decoder and install one of its own."""

    __sample_type__ = ChatMLSample

    def __init__(self, path: Any, *, auto_decode: bool = True, **kwargs: Any) -> None:
        kwargs.pop("decoder", None)
        super().__init__(path, decoder=None, **kwargs)
        if auto_decode:
            self._decoder = _chat_decoder


class UpperTextWebdataset(DefaultDecoderWebdatasetFactory[CaptionedText]):
    """A factory that overrides ``load_sample`` (as Energon allows)."""

    __sample_type__ = CaptionedText

    def load_sample(self, raw_data: dict[str, Any]) -> CaptionedText:
        sample = super().load_sample(raw_data)
        return CaptionedText.derive_from(sample, text=sample.text.upper(), number=sample.number)


def not_a_sample() -> str:
    """A callable that is neither a Sample nor a factory: a dataset.yaml may not name it."""
    return "called"


def text_factory(path: Any, **kwargs: Any) -> Any:
    """A plain function a dataset.yaml names as its class: allowed only explicitly."""
    from stoker.flavors import StandardWebdatasetFactory
    from stoker.model.samples import TextSample

    kwargs.pop("decoder", None)
    return StandardWebdatasetFactory(path, sample_type=TextSample, **kwargs)
