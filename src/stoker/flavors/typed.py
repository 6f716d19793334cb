"""Energon's per-type factories (``CaptioningWebdataset``, ...) and ``CrudeWebdataset``.

The typed ones are deprecated in Energon (a ``dataset.yaml`` names ``sample_type:`` instead) and
warn the same way when made in Python; a ``dataset.yaml`` that names them still loads.
``CrudeWebdataset`` yields :class:`~stoker.CrudeSample` dicts for the task encoder's cookers.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from stoker.errors import ConfigError
from stoker.flavors.generic import DefaultDecoderWebdatasetFactory
from stoker.format.dataset_config import DatasetConfig
from stoker.model.samples import (
    CaptioningSample,
    CrudeSample,
    ImageClassificationSample,
    ImageSample,
    InterleavedSample,
    MultiChoiceVQASample,
    OCRSample,
    SimilarityInterleavedSample,
    TextSample,
    VidQASample,
    VQAOCRSample,
    VQASample,
)

if TYPE_CHECKING:
    from stoker.sources.source import DataSource


class _Deprecated(DefaultDecoderWebdatasetFactory[Any]):
    def __init__(self, path: Any, **kwargs: Any) -> None:
        warnings.warn(
            f"{type(self).__name__} is deprecated (as in Energon): in {path}/.nv-meta/dataset.yaml "
            "remove the top-level __module__ and __class__ and add 'sample_type: {__module__: "
            f"megatron.energon, __class__: {self.__sample_type__.__name__}}}'.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__(path, **kwargs)


def _deprecated(sample_type: type[Any]) -> type[DefaultDecoderWebdatasetFactory[Any]]:
    """Energon's deprecated factory of ``sample_type`` (``XSample`` -> ``XWebdataset``), as a
    class of this module: workers and ``dataset.yaml`` files find it by module and name."""
    name = sample_type.__name__.removesuffix("Sample") + "Webdataset"
    doc = (
        f"Deprecated (as in Energon): a dataset of :class:`~stoker.{sample_type.__name__}`; "
        "a ``dataset.yaml`` names ``sample_type:`` instead."
    )
    namespace = {"__sample_type__": sample_type, "__module__": __name__, "__qualname__": name}
    return type(name, (_Deprecated,), {**namespace, "__doc__": doc})


CaptioningWebdataset = _deprecated(CaptioningSample)
ImageWebdataset = _deprecated(ImageSample)
ImageClassificationWebdataset = _deprecated(ImageClassificationSample)
InterleavedWebdataset = _deprecated(InterleavedSample)
MultiChoiceVQAWebdataset = _deprecated(MultiChoiceVQASample)
OCRWebdataset = _deprecated(OCRSample)
SimilarityInterleavedWebdataset = _deprecated(SimilarityInterleavedSample)
TextWebdataset = _deprecated(TextSample)
VQAWebdataset = _deprecated(VQASample)
VQAOCRWebdataset = _deprecated(VQAOCRSample)
VidQAWebdataset = _deprecated(VidQASample)


class CrudeWebdataset(DefaultDecoderWebdatasetFactory[CrudeSample]):
    """Crude samples: the (decoded) parts plus metadata, cooked later by the task encoder.

    Args:
        subflavors: Labels set on every sample.
        part_filter: Which parts to read (names, ``file.py:function`` or a callable; all).
        **kwargs: :class:`DefaultDecoderWebdatasetFactory`'s arguments (no sample_loader).
    """

    __sample_type__ = CrudeSample

    def __init__(
        self,
        path: Any,
        *,
        subflavors: dict[str, Any] | None = None,
        part_filter: str | list[str] | Callable[[str], bool] | None = None,
        **kwargs: Any,
    ) -> None:
        if "sample_loader" in kwargs or "field_map" in kwargs:
            raise ConfigError(
                "a CrudeWebdataset takes no sample_loader or field_map.",
                hint="Crude samples are turned into typed ones by the task encoder's cookers.",
            )
        super().__init__(
            path,
            subflavors=subflavors,
            sample_loader=_identity,
            part_filter=part_filter if part_filter is not None else _all_parts,
            **kwargs,
        )
        self._spec = (None, None, part_filter, self._spec[3])
        self._config = DatasetConfig(None, None)

    def load_sample(self, raw_data: dict[str, Any]) -> CrudeSample:
        if self._decoder is not None:
            raw_data = self._decoder(raw_data)
        return CrudeSample({**raw_data, "__subflavors__": self.subflavors})

    def built_source(self) -> DataSource:
        if not self._native():
            return super().built_source()
        part_filter = self._spec[2]
        config = dataclasses.replace(
            self._config, part_filter=None if callable(part_filter) else part_filter
        )
        return dataclasses.replace(self._source, config=config, subflavors=dict(self.subflavors))


def _identity(raw: dict[str, Any]) -> dict[str, Any]:
    return raw


def _all_parts(part: str) -> bool:
    return True
