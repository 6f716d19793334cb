"""From raw parts to a sample: filter parts, decode them, apply the field map or sample loader,
and cook crude samples with the task encoder's cookers (:mod:`stoker.runtime.kitchen`).

Runs of many samples are assembled in one call where no user code runs before cooking
(:mod:`stoker.runtime.build_runs`, JSONL lines :mod:`stoker.runtime.line_runs`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from stoker.errors import StokerError
from stoker.model.samples import CrudeSample, Sample
from stoker.model.source_info import source_info
from stoker.pipeline.decode import JSON_PART, SampleDecoder
from stoker.pipeline.parquet_read import decode_row
from stoker.pipeline.read import RawSample
from stoker.pipeline.sample_failure import SkipSample, wrap_failure
from stoker.pipeline.stage_clock import CLOCK, COOK
from stoker.runtime.build_runs import RunAssembly
from stoker.runtime.kitchen import Kitchen
from stoker.sources.field_map import (
    build_sample,
    factory_sample_loader,
    load_part_filter,
    load_sample_loader,
    plain_fields,
)
from stoker.sources.joiner import Joiner, Partners, resolve_joiner
from stoker.sources.source import DataSource

if TYPE_CHECKING:
    from stoker.model.task import TaskEncoder


class SampleBuilder(RunAssembly):
    """Builds the samples of one source; made once per worker (it may load user code).

    With a ``task_encoder`` that has ``cookers``, crude samples are cooked here, in the worker,
    so that a failing cooker goes through the error policy like a failing decode.
    """

    def __init__(
        self,
        source: DataSource,
        decoder: SampleDecoder | None,
        task_encoder: TaskEncoder[Any, Any, Any, Any] | None = None,
        *,
        fuse_float_images: bool = False,
    ) -> None:
        self.source = source
        config = source.config
        if source.binidx:  # token sequences arrive as arrays: nothing to decode
            decoder = None
        self.sample_loader, decoder = _sample_loader(source, decoder)
        user_code = self.sample_loader or source.join or (task_encoder and task_encoder.cookers)
        if decoder is not None and fuse_float_images and not user_code:
            decoder = decoder.fused()
        self.decoder = decoder
        self.part_filter = _part_filter(source)
        #: Crude samples (no sample type): built here without :func:`build_sample`.
        self.crude = config.is_crude
        #: The class and (field, part) pairs where each field is one part (:func:`plain_fields`).
        self.plain_fields = plain_fields(config) if self.sample_loader is None else None
        #: The samples' subflavors: the dataset.yaml's, overridden by the metadataset's; one dict
        #: every sample of the dataset carries, as in Energon (not a copy per sample).
        self.subflavors = {**config.subflavors, **(source.subflavors or {})}
        self.kitchen: Kitchen | None = None
        if task_encoder is not None and task_encoder.cookers:
            self.kitchen = Kitchen(source, task_encoder, decoder)
        self.join: tuple[Partners, Joiner] | None = None
        if source.join is not None:  # partners build with their own dataset.yaml, uncooked
            self.join = (
                Partners(source.join, lambda s: SampleBuilder(s, decoder).build),
                resolve_joiner(source.join.joiner, source.join.names, config.sample_type),
            )
        self._choose_paths()

    def _choose_paths(self) -> None:
        """Which ways the samples may take: in runs, JSONL lines from their bytes, with the
        hook indices set for user code."""
        config, decoder = self.source.config, self.decoder
        #: Whether :meth:`assemble` runs no user code (no sample loader, part filter or joiner):
        #: then many samples may be assembled ahead in one call (:meth:`assemble_run`).
        self.bulk = (
            self.sample_loader is None
            and self.join is None
            and (config.field_map is not None or config.part_filter is None)
        )
        #: Whether each sample is a JSONL line whose ``json`` part the plain JSON decoder
        #: decodes (:meth:`_jsonl_run`).
        self.jsonl_lines = (
            self.source.jsonl
            and self.part_filter is None
            and decoder is not None
            and decoder.plain_decoder("json") is JSON_PART
        )
        #: Whether runs of JSONL lines become crude samples straight from their bytes
        #: (:meth:`assemble_lines`).
        self.jsonl_crude = self.bulk and self.crude and self.jsonl_lines
        #: Whether user code (a sample loader, part filter, joiner or cooker) runs per sample.
        self.user_code = bool(
            self.sample_loader is not None
            or self.join is not None
            or self.kitchen is not None
            or (config.field_map is None and config.part_filter is not None)
        )

    def build(self, raw: RawSample, ref: int) -> Any:
        """The sample (typed, cooked or crude) for ``raw``, global sample ``ref`` of the split."""
        return self.cook(self.assemble(raw, ref))

    def assemble(self, raw: RawSample, ref: int) -> Any:
        """The sample of ``raw`` before cooking (typed or crude; see :meth:`cook`)."""
        parts = raw.parts
        if self.part_filter is not None:
            parts = {name: data for name, data in parts.items() if self.part_filter(name)}
        source = self.source
        if source.parquet:
            decoded = decode_row(self.decoder, raw.key, parts, source.media)
        elif self.decoder is not None:
            decoded = self.decoder.decode(raw.key, parts)
        else:
            decoded = dict(parts)
        sources = (source_info(source.path, ref, raw.shard, raw.file_names),)
        restore_key = ("Webdataset", source.path, ref)
        if self.crude:  # as build_sample makes it, without its other cases
            sample: Any = CrudeSample(decoded)
            sample["__key__"], sample["__restore_key__"] = raw.key, restore_key
            sample["__subflavors__"], sample["__sources__"] = self.subflavors, sources
        else:
            sample = build_sample(
                source.config,
                decoded,
                key=raw.key,
                restore_key=restore_key,
                subflavors=source.subflavors,
                sources=sources,
                sample_loader=self.sample_loader,
            )
        if self.join is not None:
            sample = self._join(self.join, sample, raw.key, ref, restore_key)
        return sample

    def cook(self, sample: Any) -> Any:
        """``sample`` cooked by the task encoder's cookers where it is crude and there are any."""
        if self.kitchen is not None and isinstance(sample, CrudeSample):
            clock = CLOCK
            clock.start(COOK)
            try:
                return self.kitchen.cook(sample)
            finally:
                clock.stop()
        return sample

    @staticmethod
    def _join(
        join: tuple[Partners, Joiner],
        primary: Any,
        key: str,
        ref: int,
        restore_key: tuple[Any, ...],
    ) -> Any:
        """The joiner's sample of ``primary`` and its partners (read here, in the worker)."""
        partners, joiner = join
        samples = [primary, *partners.read(ref, key)]
        try:
            joined = joiner(samples)
        except (SkipSample, StokerError):
            raise
        except Exception as e:
            raise wrap_failure(e, primary, "joiner")  # noqa: B904 (wrap_failure sets the cause)
        if isinstance(joined, Sample):
            joined.__restore_key__ = restore_key  # the primary's, as Energon sets it
        return joined


def _sample_loader(
    source: DataSource, decoder: SampleDecoder | None
) -> tuple[Callable[..., Any] | None, SampleDecoder | None]:
    """The source's sample loader (its ``sample_loader.py``, or a dataset factory class that
    decodes and loads itself) and the decoder left to run before it (None for a factory)."""
    config = source.config
    loader = (
        load_sample_loader(source.root, config.sample_loader, source.trust_sample_loader)
        if config.sample_loader
        else None
    )
    if config.factory is not None:
        return factory_sample_loader(source, decoder), None
    return loader, decoder


def _part_filter(source: DataSource) -> Callable[[str], bool] | None:
    """Which parts of a raw sample are kept: those the field map reads (other parts cost
    nothing), else the dataset's ``part_filter`` (None: all)."""
    config = source.config
    if config.field_map is not None:
        return frozenset(config.parts_used()).__contains__
    return load_part_filter(source.root, config.part_filter, source.trust_sample_loader)


__all__ = ["SampleBuilder"]
