"""Many samples of one source assembled in one call, where no user code runs before cooking
(:attr:`SampleBuilder.bulk <stoker.runtime.build.SampleBuilder.bulk>`): crude samples, typed ones
whose fields are each one part, JSONL lines (:mod:`stoker.runtime.line_runs`).

:class:`RunAssembly` makes the same samples as :meth:`SampleBuilder.assemble
<stoker.runtime.build.SampleBuilder.assemble>` one by one, without a call per part or sample
between the steps; a sample it cannot make so goes through ``assemble``, which makes or reports it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from stoker.model.samples import CrudeSample, Sample
from stoker.model.source_info import source_info
from stoker.pipeline.decode import PartDecoder, SampleDecoder
from stoker.pipeline.read import RawSample
from stoker.runtime.line_runs import LineAssembly

#: Not looked up yet (in a cache whose values may be None).
_UNSET: Any = object()


class RunAssembly(LineAssembly):
    """Assembles runs of raw samples (a mixin of :class:`~stoker.runtime.build.SampleBuilder`,
    which owns the attributes)."""

    decoder: SampleDecoder | None
    part_filter: Callable[[str], bool] | None
    #: Crude samples (no sample type).
    crude: bool
    #: The class and (field, part) pairs where each field is one part (``plain_fields``).
    plain_fields: tuple[type[Sample], list[tuple[str, str]]] | None
    #: Whether no user code runs before cooking (see ``SampleBuilder.bulk``).
    bulk: bool
    #: Whether each sample is a JSONL line the plain JSON decoder decodes.
    jsonl_lines: bool

    if TYPE_CHECKING:

        def assemble(self, raw: RawSample, ref: int) -> Any:
            """One raw sample's sample (:meth:`SampleBuilder.assemble`)."""

    def assemble_run(
        self, raws: list[RawSample], refs: list[int]
    ) -> tuple[list[Any], Exception | None]:
        """:meth:`assemble` of each of ``raws`` in order, up to the first that fails (and its
        error): many small samples per call, without user code where :attr:`bulk` is set.
        """
        out: list[Any] = []
        # Parquet rows go one by one: only media columns are decoded (decode_row).
        runs = self.bulk and not self.source.parquet
        try:
            if runs and self.crude and self.jsonl_lines:
                self._jsonl_run(raws, refs, out)
            elif runs and (self.crude or self.plain_fields is not None):
                self._plain_run(raws, refs, out)
            else:
                append, assemble = out.append, self.assemble
                for raw, ref in zip(raws, refs, strict=False):
                    append(assemble(raw, ref))
        except Exception as e:
            return out, e
        return out, None

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


__all__ = ["RunAssembly"]
