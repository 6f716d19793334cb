"""Crude samples of a run read as columns (token sequences of a ``.bin``, rows of Parquet).

:meth:`PreparedRuns._prepare <stoker.runtime.prepared_runs.PreparedRuns._prepare>` reads and
assembles a run of up to 64 references per call. Where the source's reader is columnar and its
samples go through no user code before cooking (:func:`applies`), :func:`column_run` reads the
run in one go (:meth:`~stoker.pipeline.read.ShardReader.column_run`: a ``.bin``'s sequences in
one copy, Parquet rows gathered from their row groups' columns) and holds it as
:class:`RunColumns`. Its crude samples are made, each step one C loop over the run, only when
asked for: under the default ``batch`` the stream batches the columns themselves
(:mod:`stoker.runtime.column_pieces`). The plain path made a raw sample, a parts dict and file
names per sample first (:meth:`~stoker.runtime.build_runs.RunAssembly._plain_run`); the samples
are the same. ``benchmarks/bench_binidx.py`` and ``bench_parquet.py`` measure it.

Example:
    >>> from stoker.pipeline.column_raws import ColumnRaws
    >>> raws = ColumnRaws({"text": ["a cat"]}, ["f.parquet/5"], [5], [4], ["f.parquet"],
    ...                   [("f.parquet/5.text",)])
    >>> [s] = RunColumns("/d", {}, raws, [9])
    >>> s["text"], s["__key__"], s["__restore_key__"], s["__sources__"][0].file_names
    ('a cat', 'f.parquet/5', ('Webdataset', '/d', 9), ('f.parquet/5.text',))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, overload

from stoker.model.samples import CrudeSample
from stoker.model.source_info import source_infos
from stoker.pipeline.column_raws import ColumnRaws
from stoker.pipeline.read import ShardReader

if TYPE_CHECKING:
    from stoker.runtime.build import SampleBuilder


def applies(builder: SampleBuilder) -> bool:
    """Whether the samples of ``builder``'s source may be built by :func:`column_run`: a token
    or Parquet dataset built as crude samples with no user code and no decoding before cooking
    (a Parquet dataset's media columns decoded per row: not here)."""
    source = builder.source
    columnar = source.binidx or (source.parquet and (builder.decoder is None or not source.media))
    return (
        columnar
        and builder.bulk
        and builder.crude
        and builder.part_filter is None
        and builder.join is None
    )


def column_run(
    reader: ShardReader, builder: SampleBuilder, shard_ids: Sequence[int], indices: Sequence[int],
    refs: Sequence[int],
) -> tuple[ColumnRaws, RunColumns] | None:  # fmt: skip
    """The raw samples and crude samples of references ``refs`` (samples ``indices`` of shards
    ``shard_ids``), or None where the reader does not read them as columns (the plain path then
    reads and reports each)."""
    raws = reader.column_run(shard_ids, indices)
    if raws is None:
        return None
    return raws, RunColumns(builder.source.path, builder.subflavors, raws, refs)


class RunColumns(Sequence[CrudeSample]):
    """The crude samples of a run read as columns (:func:`column_samples`), made when first
    asked for; until then the run's columns, which :mod:`stoker.runtime.column_pieces` batches
    without them."""

    __slots__ = ("_made", "path", "raws", "refs", "subflavors")

    def __init__(
        self, path: str, subflavors: dict[str, Any] | None, raws: ColumnRaws, refs: Sequence[int]
    ) -> None:
        self.path, self.subflavors, self.raws, self.refs = path, subflavors, raws, refs
        self._made: list[CrudeSample] | None = None

    def __len__(self) -> int:
        return len(self.raws)

    @overload
    def __getitem__(self, at: int) -> CrudeSample: ...

    @overload
    def __getitem__(self, at: slice) -> list[CrudeSample]: ...

    def __getitem__(self, at: int | slice) -> CrudeSample | list[CrudeSample]:
        made = self._made
        if made is None:
            made = self._made = column_samples(self.path, self.subflavors, self.raws, self.refs)
        return made[at]


def column_samples(
    path: str, subflavors: dict[str, Any] | None, raws: ColumnRaws, refs: Sequence[int]
) -> list[CrudeSample]:
    """The crude samples of ``raws`` (global samples ``refs`` of the dataset ``path``), as
    :meth:`~stoker.runtime.build.SampleBuilder.assemble` makes them."""
    count = len(raws)
    refs = list(refs)
    infos = source_infos(count, [path] * count, refs, raws.shards, raws.names)
    names = list(raws.fields)
    rows = zip(*raws.fields.values(), strict=True) if names else [()] * count
    new = CrudeSample
    return [
        new(
            zip(names, values, strict=True), __key__=key,
            __restore_key__=("Webdataset", path, ref), __subflavors__=subflavors,
            __sources__=(info,),
        )
        for values, key, ref, info in zip(rows, raws.keys, refs, infos, strict=True)
    ]  # fmt: skip


__all__ = ["RunColumns", "applies", "column_run", "column_samples"]
