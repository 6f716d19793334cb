"""Joined sample types for the join tests: importable by name, so workers can load them."""

from __future__ import annotations

from dataclasses import dataclass

from stoker import Sample, TextSample


@dataclass(slots=True, kw_only=True)
class JoinedSample(Sample):
    """Energon's docs example of a custom join type (import changed to stoker)."""

    text1: str
    text2: str | None

    @staticmethod
    def from_joined(ds1: TextSample, ds2: TextSample | None) -> JoinedSample:
        return JoinedSample.derive_from(
            ds1, text1=ds1.text, text2=None if ds2 is None else ds2.text
        )


@dataclass(slots=True, kw_only=True)
class NamedJoin(Sample):
    """Joins named parts (the dict form of ``join``): ``from_joined(image=..., text=...)``."""

    image: str
    caption: str

    @classmethod
    def from_joined(cls, *, image: TextSample, text: TextSample) -> NamedJoin:
        return cls.derive_from(image, image=image.text, caption=text.text)


def upper_joiner(first: TextSample, second: TextSample | None) -> TextSample:
    """A function joiner: the texts of both, upper-cased."""
    other = "-" if second is None else second.text
    return TextSample.derive_from(first, text=f"{first.text}|{other}".upper())
