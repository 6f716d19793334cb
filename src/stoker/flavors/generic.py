"""The factories a ``dataset.yaml`` configures: field map or sample loader, decoder, sample type.

``DefaultGenericWebdatasetFactory`` builds samples of ``__sample_type__`` with stoker's field
map machinery; ``DefaultDecoderWebdatasetFactory`` decodes the parts first (``decoder=``);
``StandardWebdatasetFactory`` takes the sample type as an argument (a plain ``dataset.yaml``).
A user's subclass may set ``__sample_type__``, replace ``_decoder`` or override ``load_sample``.

Example:
    >>> from stoker import Sample, edataclass
    >>> @edataclass
    ... class ChatMLSample(Sample):
    ...     conversation: str
    >>> class ChatMLWebdataset(DefaultDecoderWebdatasetFactory[ChatMLSample]):
    ...     __sample_type__ = ChatMLSample
    >>> factory = ChatMLWebdataset("coco-wds", field_map={"conversation": "txt"},
    ...                            split_part="val", training=False, worker_config=wc)
    >>> len(factory), type(next(iter(factory.build()))).__name__
    (10, 'ChatMLSample')
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from stoker.errors import ConfigError
from stoker.flavors.webdataset import BaseWebdatasetFactory
from stoker.format.dataset_config import DatasetConfig, parse_field_map
from stoker.model.samples import Sample
from stoker.pipeline.decode import SampleDecoder
from stoker.sources.field_map import build_sample, load_part_filter, load_sample_loader

if TYPE_CHECKING:
    from stoker.sources.source import DataSource

T_sample = TypeVar("T_sample", covariant=True)

#: Energon's default decoder of ``DefaultDecoderWebdatasetFactory`` (images as float tensors).
DEFAULT_DECODER = SampleDecoder()
_META = ("__key__", "__restore_key__", "__sources__", "__subflavors__")


class DefaultGenericWebdatasetFactory(BaseWebdatasetFactory[T_sample], Generic[T_sample]):
    """Samples of ``__sample_type__`` from a ``field_map`` or a ``sample_loader``.

    Args:
        subflavors: Labels set on every sample.
        field_map: Sample field -> part spec (``jpg``, ``json[caption]``, ``jpg,png``).
        sample_loader: ``file.py:function`` in ``.nv-meta`` (runs only if trusted: pass
            ``trust_sample_loader=True`` or set ``STOKER_TRUST_SAMPLE_LOADER=1``) or a callable
            ``raw dict -> fields dict``.
        part_filter: With a sample loader: part names, ``file.py:function`` or a callable.
        **kwargs: :class:`BaseWebdatasetFactory`'s arguments.
    """

    takes_subflavors = True

    def __init__(
        self,
        path: Any,
        *,
        subflavors: dict[str, Any] | None = None,
        field_map: dict[str, str] | None = None,
        sample_loader: str | Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        part_filter: str | list[str] | Callable[[str], bool] | None = None,
        trust_sample_loader: bool = False,
        **kwargs: Any,
    ) -> None:
        if (field_map is None) == (sample_loader is None):
            raise ConfigError(
                f"{type(self).__qualname__} needs exactly one of field_map and sample_loader.",
                path=str(path),
            )
        self.subflavors = dict(subflavors or {})
        sample_type = self.__sample_type__
        name = getattr(sample_type, "__name__", None)
        module = getattr(sample_type, "__module__", None)
        config = DatasetConfig(name, module, sample_class=sample_type)
        if field_map is not None:
            config = dataclasses.replace(config, field_map=parse_field_map(field_map, str(path)))
            parts = config.parts_used()
            self._check_fields(field_map)
            self._loader: Callable[[dict[str, Any]], dict[str, Any]] | None = None
            filter_fn: Callable[[str], bool] | None = parts.__contains__
        else:
            if part_filter is None:
                raise ConfigError("a sample_loader needs a part_filter.", path=str(path))
            root = str(path)
            self._loader = (
                load_sample_loader(root, sample_loader, trust_sample_loader)
                if isinstance(sample_loader, str)
                else sample_loader
            )
            config = dataclasses.replace(config, sample_loader=_describe(sample_loader))
            filter_fn = (
                part_filter
                if callable(part_filter)
                else load_part_filter(root, part_filter, trust_sample_loader)
            )
        self._config = config
        self._spec = (field_map, sample_loader, part_filter, trust_sample_loader)
        super().__init__(path, part_filter=filter_fn, **kwargs)

    def _check_fields(self, field_map: dict[str, str]) -> None:
        sample_type = self.__sample_type__
        if not (isinstance(sample_type, type) and dataclasses.is_dataclass(sample_type)):
            return
        names = {f.name for f in dataclasses.fields(sample_type)}
        unknown = sorted(set(field_map) - names)
        if unknown:
            raise ConfigError(
                f"field_map names field {unknown[0]!r}, which {sample_type.__name__} lacks.",
                path=str(self.path) if hasattr(self, "path") else None,
                hint=f"{sample_type.__name__} fields: {', '.join(sorted(names))}.",
            )

    def load_sample(self, raw_data: dict[str, Any]) -> T_sample:
        parts = {k: v for k, v in raw_data.items() if k not in _META}
        sample: Any = build_sample(
            self._config,
            parts,
            key=raw_data.get("__key__", ""),
            restore_key=raw_data.get("__restore_key__", ()),
            subflavors=self.subflavors,
            sources=raw_data.get("__sources__"),
            sample_loader=self._loader,
            sample_class=_sample_class(self.__sample_type__),
        )
        return sample  # type: ignore[no-any-return]

    def built_source(self) -> DataSource:
        if not self._native():
            return super().built_source()
        _, sample_loader, part_filter, trust = self._spec
        config = dataclasses.replace(
            self._config,
            subflavors={},
            sample_loader=sample_loader if isinstance(sample_loader, str) else None,
            part_filter=None if callable(part_filter) else part_filter,
        )
        return dataclasses.replace(
            self._source, config=config, subflavors=dict(self.subflavors), trust_sample_loader=trust
        )

    def _native(self) -> bool:
        """Whether stoker's reader can build the samples itself (the fast path): a class of
        stoker's own, a stoker decoder, and a field map or a sample loader named by file."""
        _, sample_loader, part_filter, _ = self._spec
        return (
            type(self).__module__.startswith("stoker.")
            and isinstance(self.native_decoder(), SampleDecoder | None)
            and (sample_loader is None or isinstance(sample_loader, str))
            and not callable(part_filter)
        )

    def config(self) -> dict[str, Any]:
        return {**super().config(), "subflavors": self.subflavors}


class DefaultDecoderWebdatasetFactory(DefaultGenericWebdatasetFactory[T_sample], Generic[T_sample]):
    """Like :class:`DefaultGenericWebdatasetFactory`, decoding the parts with ``decoder`` first
    (a :class:`~stoker.SampleDecoder`, any callable on the sample dict, or None for bytes)."""

    def __init__(self, path: Any, *, decoder: Any = DEFAULT_DECODER, **kwargs: Any) -> None:
        self._decoder = decoder
        super().__init__(path, **kwargs)

    def native_decoder(self) -> Any:
        return self._decoder

    def load_sample(self, raw_data: dict[str, Any]) -> T_sample:
        if self._decoder is not None:
            raw_data = self._decoder(raw_data)
        return super().load_sample(raw_data)

    def config(self) -> dict[str, Any]:
        decoder = self._decoder
        return {**super().config(), **(decoder.config() if hasattr(decoder, "config") else {})}


class StandardWebdatasetFactory(DefaultDecoderWebdatasetFactory[T_sample], Generic[T_sample]):
    """The factory of a plain ``dataset.yaml``: samples of ``sample_type`` (a Sample subclass).

    Example:
        >>> from stoker import CaptioningSample
        >>> factory = StandardWebdatasetFactory(
        ...     "coco-wds", sample_type=CaptioningSample, field_map={"image": "jpg",
        ...     "caption": "txt"}, split_part="train", training=False, worker_config=wc)
        >>> len(factory)
        40
    """

    def __init__(self, path: Any, *, sample_type: type[T_sample], **kwargs: Any) -> None:
        if not _is_sample(sample_type):
            raise ConfigError(
                f"sample_type must be a subclass of stoker's Sample, got {sample_type!r}.",
                path=str(path),
            )
        self.__sample_type__ = sample_type
        super().__init__(path, **kwargs)


def _sample_class(cls: Any) -> type[Sample] | None:
    return cls if _is_sample(cls) else None


def _is_sample(cls: Any) -> bool:
    return isinstance(cls, type) and issubclass(cls, Sample)


def _describe(loader: Any) -> str:
    return loader if isinstance(loader, str) else getattr(loader, "__qualname__", "<callable>")
