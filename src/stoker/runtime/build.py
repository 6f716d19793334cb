"""From raw parts to a sample: filter parts, decode them, apply the field map or sample loader,
and cook crude samples with the task encoder's cookers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any, NoReturn

from stoker.errors import SampleError, StokerError
from stoker.model.cache_pool import current_cache_pool
from stoker.model.cooking import Cooker, select_cooker
from stoker.model.samples import CrudeSample, Sample
from stoker.model.source_info import source_info
from stoker.pipeline.decode import (
    JSON_PART,
    JSON_SCANNER,
    PartDecoder,
    SampleDecoder,
)
from stoker.pipeline.errors import SkipSample, wrap_failure
from stoker.pipeline.parquet_read import decode_row
from stoker.pipeline.read import LineRaws, RawSample
from stoker.pipeline.stage_clock import CLOCK, COOK
from stoker.runtime.line_runs import scanned_lines
from stoker.sources.aux import (
    DecodeFileStore,
    FileStore,
    JsonlFileStore,
    PrimaryFileStore,
    WebdatasetFileStore,
    open_aux,
)
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


#: A raw sample's key and shard (its fields 0 and 2).
_first, _third = itemgetter(0), itemgetter(2)


def _json_part(raw: RawSample) -> bytes | None:
    """The bytes of ``raw``'s ``json`` part where it is its only part, else None."""
    parts = raw[1]
    return parts.get("json") if len(parts) == 1 else None


def fuses_float_images(
    task_encoder: TaskEncoder[Any, Any, Any, Any],
    batch_size: int | None,
    packing: bool,
    grouping: bool,
) -> bool:
    """Whether float images may stay uint8 until batching (:meth:`SampleDecoder.fused`).

    Only where no user code sees a decoded sample before it is batched: a
    ``DefaultTaskEncoder`` (or a subclass that only sets the decoder or types) batching plain
    samples. This is a speed-up with identical batches, not a change of behaviour.
    :class:`SampleBuilder` also checks the source for sample loaders, joins and cookers.
    """
    from stoker.model.task import DefaultTaskEncoder

    hooks = ("encode_sample", "preencode_sample", "postencode_sample", "batch")
    default_hooks = isinstance(task_encoder, DefaultTaskEncoder) and not any(
        task_encoder._is_overridden(getattr(task_encoder, hook), (DefaultTaskEncoder,))
        for hook in hooks
    )
    plain = default_hooks and not task_encoder.cookers
    return plain and batch_size is not None and not packing and not grouping


#: Not looked up yet (in a cache whose values may be None).
_UNSET: Any = object()


class SampleBuilder:
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
        self.sample_loader = (
            load_sample_loader(source.root, config.sample_loader, source.trust_sample_loader)
            if config.sample_loader
            else None
        )
        if config.factory is not None:  # a dataset factory class decodes and loads itself
            self.sample_loader, decoder = factory_sample_loader(source, decoder), None
        user_code = self.sample_loader or source.join or (task_encoder and task_encoder.cookers)
        if decoder is not None and fuse_float_images and not user_code:
            decoder = decoder.fused()
        self.decoder = decoder
        self.part_filter: Callable[[str], bool] | None
        if config.field_map is not None:
            # Decode only what the field map reads: other parts cost nothing.
            self.part_filter = frozenset(config.parts_used()).__contains__
        else:
            self.part_filter = load_part_filter(
                source.root, config.part_filter, source.trust_sample_loader
            )
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
            source.jsonl
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

    def assemble_run(
        self, raws: list[RawSample], refs: list[int]
    ) -> tuple[list[Any], Exception | None]:
        """:meth:`assemble` of each of ``raws`` in order, up to the first that fails (and its
        error): many small samples per call, without user code where :attr:`bulk` is set.
        """
        out: list[Any] = []
        try:
            if self.source.parquet:  # rows: only media columns are decoded (decode_row)
                append, assemble = out.append, self.assemble
                for raw, ref in zip(raws, refs, strict=False):
                    append(assemble(raw, ref))
            elif self.bulk and self.crude and self.jsonl_lines:
                self._jsonl_run(raws, refs, out)
            elif self.bulk and (self.crude or self.plain_fields is not None):
                self._plain_run(raws, refs, out)
            else:
                append, assemble = out.append, self.assemble
                for raw, ref in zip(raws, refs, strict=False):
                    append(assemble(raw, ref))
        except Exception as e:
            return out, e
        return out, None

    def _jsonl_run(self, raws: list[RawSample], refs: list[int], out: list[Any]) -> None:
        """Crude samples of JSONL lines (each one ``json`` part) into ``out``, as
        :meth:`_plain_run` makes them (:meth:`_crude_lines`)."""
        keys, lines = list(map(_first, raws)), list(map(_json_part, raws))
        self._crude_lines(keys, lines, list(map(_third, raws)), raws, refs, out)

    def assemble_lines(self, raws: LineRaws, refs: list[int]) -> tuple[list[Any], Exception | None]:
        """:meth:`assemble_run` of JSONL lines cut in one go (where :attr:`jsonl_crude`): the
        crude samples made straight from the lines' bytes, a raw sample made only for a line
        that :func:`scan_json` does not take."""
        out: list[Any] = []
        keys, shards = list(map(str, raws.indices)), [raws.shard] * len(raws)
        try:
            self._crude_lines(keys, raws.lines, shards, raws, refs, out)
        except Exception as e:
            return out, e
        return out, None

    def _crude_lines(
        self,
        keys: list[str],
        lines: Sequence[bytes | None],
        shards: list[str],
        raws: Sequence[RawSample],
        refs: list[int],
        out: list[Any],
    ) -> None:
        """Crude samples of JSONL lines of ``raws`` (their keys, the ``json`` parts' bytes or
        None, and shards) into ``out``: all in C loops where every line is one JSON value
        (:func:`scanned_lines`), else in a loop without a call per part, where a line that
        :func:`scan_json` does not take goes through :meth:`_plain_run` (which decodes or
        reports it)."""
        path, subflavors = self.source.path, self.subflavors
        run = scanned_lines(path, subflavors, keys, lines, shards, refs)
        if run is not None:
            out.extend(run)
            return
        append, new, info, scan = out.append, CrudeSample, source_info, JSON_SCANNER
        items = zip(keys, lines, shards, refs, strict=False)
        for at, (key, data, shard, ref) in enumerate(items):
            try:  # scan_json, inline: the common case (UTF-8, one value, nothing around)
                text = data.decode("utf-8")  # type: ignore[union-attr]  # (None: to _plain_run)
                value, end = scan(text, 0)
                scanned = end == len(text)
            except Exception:
                scanned = False
            if not scanned:
                self._plain_run([raws[at]], [ref], out)
                continue
            sample = new(json=value)
            sample["__key__"], sample["__restore_key__"] = key, ("Webdataset", path, ref)
            sample["__subflavors__"] = subflavors
            sample["__sources__"] = (info(path, ref, shard, (key + ".json",)),)
            append(sample)

    def _plain_run(self, raws: list[RawSample], refs: list[int], out: list[Any]) -> None:
        """Crude samples, or typed ones of :attr:`plain_fields`, of ``raws`` into ``out``, as
        :meth:`assemble` makes them, in one loop (:meth:`assemble` where a field is missing or
        the class refuses them: it reports that)."""
        decoder, typed = self.decoder, self.plain_fields
        part_filter, subflavors, path = self.part_filter, self.subflavors, self.source.path
        new: Any = dict if typed is not None else CrudeSample
        append = out.append
        plain: dict[str, PartDecoder | None] = {}  # part name -> its plain decoder (or None)
        for raw, ref in zip(raws, refs, strict=False):
            key, parts, shard = raw[0], raw[1], raw[2]
            names = tuple(map(f"{key}.".__add__, parts))  # raw.file_names, without a frame
            if part_filter is not None:
                parts = {name: data for name, data in parts.items() if part_filter(name)}
            if decoder is None:
                sample = new(parts)
            else:  # json/txt/cls parts straight to their decoder (decode() if one fails)
                sample = new()
                for name, data in parts.items():
                    fn = plain.get(name, _UNSET)
                    if fn is _UNSET:
                        fn = plain[name] = decoder.plain_decoder(name)
                    if fn is None:
                        sample = new(decoder.decode(key, parts))
                        break
                    try:
                        sample[name] = fn(name, data, decoder)
                    except Exception:
                        sample = new(decoder.decode(key, parts))
                        break
            restore_key = ("Webdataset", path, ref)
            sources = (source_info(path, ref, shard, names),)
            if typed is None:
                sample["__key__"], sample["__restore_key__"] = key, restore_key
                sample["__subflavors__"], sample["__sources__"] = subflavors, sources
                append(sample)
                continue
            cls, pairs = typed
            try:
                fields = {}
                for field, part in pairs:
                    fields[field] = sample[part]
                append(
                    cls(
                        __key__=key, __restore_key__=restore_key,
                        __subflavors__=subflavors, __sources__=sources, **fields,
                    )
                )  # fmt: skip
            except (KeyError, TypeError):
                append(self.assemble(raw, ref))

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


class Kitchen:
    """Cooks the crude samples of one source: picks the cooker, passes the aux stores.

    Stores open on first use (in the worker) and stay open. Without cookers, crude samples stay
    crude (``TaskEncoder.cookers`` is empty by default).
    """

    def __init__(
        self,
        source: DataSource,
        task_encoder: TaskEncoder[Any, Any, Any, Any],
        decoder: SampleDecoder | None,
    ) -> None:
        self.source = source
        self.task_encoder = task_encoder
        self.cookers: tuple[Cooker[Any], ...] = tuple(task_encoder.cookers)
        #: The first cooker where it matches every sample (no ``has_subflavors``).
        first = self.cookers[0] if self.cookers else None
        self._always = first if isinstance(first, Cooker) and not first.has_subflavors else None
        #: Whether :attr:`_always` gets no stores (no aux, no primary, no cache).
        self._bare = (
            self._always is not None
            and not source.aux
            and not self._always.need_primary
            and not self._always.need_cache
        )
        #: (need_primary, need_cache) of each cooker used, by its id (read once).
        self._needs: dict[int, tuple[bool, bool]] = {}
        #: The task encoder's cook_crude_sample (bound once).
        self.cook_crude = task_encoder.cook_crude_sample
        #: The one cook function where cook_crude_sample would just call it without stores:
        #: a loop over many samples may call it itself, with :meth:`reraise` for a failure.
        self.direct = (
            self._always.cook
            if self._bare
            and self._always is not None
            and self._always.part_filter is None
            and not task_encoder._is_overridden(task_encoder.cook_crude_sample)
            else None
        )
        self.decoder = decoder
        self._aux: dict[str, FileStore] | None = None
        self._primary: FileStore | None = None

    def cook(self, sample: CrudeSample) -> Any:
        """``cook(sample, **aux)`` of the first matching cooker, as a typed sample."""
        try:
            if self.direct is not None:  # the common case: the cooker's function, at once
                return self.direct(sample)
            cooker = self._always or select_cooker(self.cookers, sample.get("__subflavors__"))
            if getattr(cooker, "part_filter", None) is not None:  # Energon's duck-typed cookers too
                sample = cooker.keep_parts(sample)
            if self._bare:  # the one cooker gets no store
                return self.cook_crude(sample, cooker, {})
            needs = self._needs.get(id(cooker))
            if needs is None:
                needs = self._needs[id(cooker)] = (cooker.need_primary, cooker.need_cache)
            aux: dict[str, Any] = dict(self.aux()) if self.source.aux else {}
            if needs[0]:
                aux["primary"] = PrimaryFileStore(self.primary(), str(sample.get("__key__")))
            if needs[1]:
                aux["cache"] = current_cache_pool()
            return self.cook_crude(sample, cooker, aux)
        except Exception as e:
            self.reraise(e, sample)

    def reraise(self, e: Exception, sample: CrudeSample) -> NoReturn:
        """Raise what :meth:`cook` raises where cooking ``sample`` raised ``e`` (call it while
        handling ``e``): ``e`` itself, or a :class:`SampleError` naming the sample, caused by
        ``e``."""
        if isinstance(e, SkipSample):
            raise e
        if isinstance(e, SampleError):
            if e.key is not None:
                raise e
            raise SampleError(e.problem, key=sample.get("__key__"), part=e.part, hint=e.hint) from e
        if isinstance(e, StokerError):
            raise e  # a configuration problem, not this sample's
        raise wrap_failure(e, sample, "cook")  # (wrap_failure sets the cause)

    def aux(self) -> dict[str, FileStore]:
        """The source's aux stores by name (opened on first use)."""
        if self._aux is None:
            self._aux = {
                name: self._decoded(open_aux(ref)) for name, ref in self.source.aux.items()
            }
        return self._aux

    def primary(self) -> FileStore:
        """The source's own dataset as a store (for cookers with ``need_primary``)."""
        if self._primary is None:
            source = self.source
            store = (
                JsonlFileStore(source.path) if source.jsonl else WebdatasetFileStore(source.path)
            )
            self._primary = self._decoded(store)
        return self._primary

    def _decoded(self, store: FileStore) -> FileStore:
        return store if self.decoder is None else DecodeFileStore(store, decoder=self.decoder)
