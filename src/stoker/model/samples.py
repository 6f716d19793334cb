"""The sample types: one dataclass per task, with Energon's names, fields and defaults.

Every sample carries ``__key__`` (its key in the shard), ``__restore_key__`` (how to find it again
after a restart), ``__subflavors__`` (labels from the dataset config) and ``__sources__`` (where
its bytes came from). :data:`SAMPLE_CLASSES` maps the names a ``dataset.yaml`` may use to classes.

Example:
    >>> s = TextSample(__key__="a", __restore_key__=("Webdataset", 0), text="hello")
    >>> TextSample.derive_from(s, text="bye").__key__
    'a'

Samples are ``edataclass``-es (keyword-only, slotted dataclasses, as in Energon), so a subclass
may re-declare a field without a default or add fields without defaults.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, TypeVar

from stoker.model.dataclass_helpers import edataclass
from stoker.model.field_access import FieldAccess
from stoker.model.source_info import SourceInfo as SourceInfo

if TYPE_CHECKING:
    import torch

S = TypeVar("S", bound="Sample")
E = TypeVar("E", bound="Extendable")
T = TypeVar("T")
RestoreKey = tuple[Any, ...]


class Extendable(FieldAccess):
    """Energon's ``extend``: an instance of a subclass from an instance of its base (and
    ``self["field"]``, :mod:`stoker.model.field_access`)."""

    __slots__ = ()

    @classmethod
    def extend(cls: type[E], src: Any, **fields: Any) -> E:
        """A ``cls`` with all of ``src``'s fields plus ``fields`` (which override).

        ``cls`` must be ``type(src)`` or a subclass of it.

        Example:
            >>> @edataclass
            ... class Scored(TextSample):
            ...     score: float
            >>> base = TextSample(__key__="k", __restore_key__=(), text="t")
            >>> Scored.extend(base, score=1.0).text
            't'
        """
        if not issubclass(cls, type(src)):
            raise TypeError(
                f"cannot extend a {type(src).__name__} into {cls.__name__}: {cls.__name__} must "
                f"be a subclass of {type(src).__name__}."
            )
        for f in dataclasses.fields(src):
            if f.init:
                fields.setdefault(f.name, getattr(src, f.name))
        return cls(**fields)


@edataclass
class Sample(Extendable):
    """Base class of all sample types: the metadata every sample carries."""

    #: Uniquely identifies the sample in its dataset.
    __key__: str
    #: Nested tuple of str/int that finds the sample again (e.g. ``("Webdataset", 42)``).
    __restore_key__: RestoreKey
    #: Labels from the dataset config, to tell samples of the same type apart.
    __subflavors__: dict[str, Any] | None = None
    #: Where the sample was loaded from.
    __sources__: tuple[SourceInfo, ...] | None = None

    @classmethod
    def derive_from(cls: type[S], base_sample: Sample, **fields: Any) -> S:
        """A new sample of this class with ``fields``, keeping ``base_sample``'s metadata.

        Example:
            >>> base = TextSample(__key__="k", __restore_key__=(), text="t")
            >>> CaptioningSample.derive_from(base, image=None, caption="c").__key__
            'k'
        """
        meta = {
            f.name: getattr(base_sample, f.name)
            for f in dataclasses.fields(Sample)
            if f.name not in fields
        }
        return cls(**meta, **fields)

    @classmethod
    def from_joined(cls: type[S], *samples: Sample | None, **named: Sample | None) -> S:
        """Join samples of joined datasets: later samples' fields override earlier ones.

        The first sample is the primary: its key, restore key and subflavors are kept; the
        sources of all samples are concatenated. ``None`` entries (missing partners) are skipped.
        Keyword arguments are not supported by this default joiner (as in Energon).

        Example:
            >>> a = TextSample(__key__="a", __restore_key__=(), text="x")
            >>> b = TextSample(__key__="b", __restore_key__=(), text="y")
            >>> TextSample.from_joined(a, b).text, TextSample.from_joined(a, b).__key__
            ('y', 'a')
        """
        if named:
            raise TypeError(
                f"{cls.__name__}.from_joined joins samples given by position; got keywords "
                f"{sorted(named)}. Override from_joined to use named samples."
            )
        if not samples or samples[0] is None:
            raise TypeError("from_joined needs a primary (first) sample that is not None.")
        primary = samples[0]
        meta = {f.name for f in dataclasses.fields(Sample)}
        init = {f.name: getattr(primary, f.name) for f in dataclasses.fields(primary)}
        for other in samples[1:]:
            if other is not None:
                init.update(
                    (f.name, getattr(other, f.name))
                    for f in dataclasses.fields(other)
                    if f.name not in meta
                )
        init["__sources__"] = tuple(s for o in samples if o for s in o.__sources__ or ())
        return cls(**{k: v for k, v in init.items() if k in _field_names(cls)})

    def get_media_metadata(self, part: str) -> Any:
        """The stored metadata of this sample's media part ``part`` (e.g. ``"mp4"``).

        Read from the dataset's ``index.sqlite`` (written by ``stoker prepare-media``) without
        decoding, e.g. to plan clips by ``video_duration`` in ``encode_sample``. Returns an
        ``AVMetadata`` or ``ImageMetadata``.
        """
        from stoker.media.lookup import media_metadata_of

        return media_metadata_of(self, part)

    def pin_memory(self: S) -> S:
        """A copy whose tensors (at any depth) are in pinned memory, for fast host-to-GPU copy."""
        return pin_memory(self)


def _field_names(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def pin_memory(value: T) -> T:
    """Pin the tensors inside dicts, dataclasses, lists, tuples and named tuples."""
    import torch

    out: Any
    if isinstance(value, torch.Tensor):
        out = value.pin_memory()
    elif isinstance(value, dict):
        out = type(value)({k: pin_memory(v) for k, v in value.items()})
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: pin_memory(getattr(value, f.name)) for f in dataclasses.fields(value)}
        out = type(value)(**fields)
    elif isinstance(value, tuple) and hasattr(value, "_fields"):
        out = type(value)(*(pin_memory(v) for v in value))
    elif isinstance(value, (list, tuple)):
        out = type(value)(pin_memory(v) for v in value)
    else:
        out = value
    return out  # type: ignore[no-any-return]


class CrudeSample(dict[str, Any]):
    """A raw sample: the decoded parts by name plus ``__key__`` and the other metadata keys.

    Crude samples are turned into typed samples later by the task encoder's cookers.
    """


@edataclass
class CaptioningSample(Sample):
    """An image (C, H, W) and its caption."""

    image: torch.Tensor
    caption: str


@edataclass
class ImageSample(Sample):
    """An image (C, H, W), e.g. for reconstruction."""

    image: torch.Tensor


@edataclass
class ImageClassificationSample(Sample):
    """An image (C, H, W) with its class label and/or label name."""

    image: torch.Tensor
    label: int | None = None
    label_name: str | None = None


@edataclass
class TextSample(Sample):
    """Plain text."""

    text: str


@edataclass
class VQASample(Sample):
    """Visual question answering: image, question (context), answers and their weights."""

    image: torch.Tensor
    context: str
    answers: list[str] | None = None
    answer_weights: torch.Tensor | None = None


@edataclass
class MultiChoiceVQASample(Sample):
    """Multiple-choice VQA: image, question, candidate answers and the correct one's index."""

    image: torch.Tensor
    context: str
    choices: list[str] | None = None
    correct_choice_idx: int = 0


@edataclass
class OCRSample(Sample):
    """OCR: image, its text, and optional boxes (N, 4|5: x, y, w, h[, conf]) with texts."""

    image: torch.Tensor
    text: str
    block_boxes: torch.Tensor | None = None
    block_classes: torch.Tensor | list[str] | None = None
    block_text: list[str] | None = None
    lines_boxes: torch.Tensor | None = None
    lines_text: list[str] | None = None
    words_boxes: torch.Tensor | None = None
    words_text: list[str] | None = None
    chars_boxes: torch.Tensor | None = None
    chars_text: list[str] | None = None


@edataclass
class VQAOCRSample(Sample):
    """VQA and OCR on the same image."""

    image: torch.Tensor
    context: str
    text: str
    answers: list[str] | None = None
    answer_weights: torch.Tensor | None = None
    words_boxes: torch.Tensor | None = None
    words_text: list[str] | None = None


@edataclass
class InterleavedSample(Sample):
    """A sequence of images (tensors) and texts (str) in order."""

    sequence: list[torch.Tensor | str]


@edataclass
class SimilarityInterleavedSample(Sample):
    """Images and texts without alignment; a similarity matrix or indices match them."""

    images: list[torch.Tensor]
    texts: list[str]
    audio: list[torch.Tensor] | None = None
    video: list[torch.Tensor] | None = None
    similarity_matrix: torch.Tensor | None = None
    matched_text_indices: list[int] | None = None


@edataclass
class VidQASample(Sample):
    """Video question answering. ``video`` is the (lazily decodable) video part."""

    video: Any
    context: str
    answers: list[str] | None = None
    answer_weights: torch.Tensor | None = None


#: Sample type name (as in ``dataset.yaml``) -> class.
SAMPLE_CLASSES: dict[str, type[Sample]] = {
    cls.__name__: cls
    for cls in (
        CaptioningSample,
        ImageSample,
        ImageClassificationSample,
        TextSample,
        VQASample,
        MultiChoiceVQASample,
        OCRSample,
        VQAOCRSample,
        InterleavedSample,
        SimilarityInterleavedSample,
        VidQASample,
    )
}
