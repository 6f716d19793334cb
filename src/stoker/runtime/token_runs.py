"""Crude samples of a run of token sequences (a ``.bin``/``.idx`` dataset), built from columns.

:meth:`PreparedRuns._prepare <stoker.runtime.prepared_runs.PreparedRuns._prepare>` reads and
assembles a run of up to 64 references per call. For a local token dataset whose samples go through
no user code before cooking, :func:`token_run` gathers the run's sequences in one copy
(:meth:`~stoker.pipeline.read_binidx.BinIdxReader.token_run`) and makes their crude samples with
each step one C loop over the run (keys, ``SourceInfo``, the samples), where the plain path made a
raw sample, a parts dict and file names per sequence first
(:meth:`~stoker.runtime.build_runs.RunAssembly._plain_run`). The samples are the same; a raw sample
is made only for a failure to report. ``benchmarks/bench_binidx.py`` measures it.

Example:
    >>> import numpy as np
    >>> from stoker.pipeline.read_binidx import TokenRaws
    >>> raws = TokenRaws([np.arange(3, dtype=np.uint16)], [5], [10], "c.bin")
    >>> [s] = token_samples("/d/c.bin", {}, raws, [5])
    >>> s["tokens"].tolist(), s["__key__"], s["__restore_key__"], s["__sources__"][0].file_names
    ([0, 1, 2], '5', ('Webdataset', '/d/c.bin', 5), ('5.tokens',))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, overload

from stoker.model.samples import CrudeSample
from stoker.model.source_info import source_infos
from stoker.pipeline.read import ShardReader
from stoker.pipeline.read_binidx import BinIdxReader, TokenRaws

if TYPE_CHECKING:
    from stoker.runtime.build import SampleBuilder


def applies(builder: SampleBuilder) -> bool:
    """Whether the samples of ``builder``'s source may be built by :func:`token_run`: a token
    dataset built as crude samples with no user code before cooking."""
    return (
        builder.source.binidx
        and builder.bulk
        and builder.crude
        and builder.decoder is None
        and builder.part_filter is None
        and builder.join is None
    )


def token_run(
    reader: ShardReader, builder: SampleBuilder, shard_ids: Sequence[int], indices: Sequence[int],
    refs: Sequence[int],
) -> tuple[TokenRaws, TokenColumns] | None:  # fmt: skip
    """The raw samples and crude samples of references ``refs`` (sequences ``indices`` of
    files ``shard_ids``), or None where the run is not one mapped file's (the plain path then
    reads and reports each)."""
    if not isinstance(reader, BinIdxReader):
        return None
    raws = reader.token_run(shard_ids, indices)
    if raws is None:
        return None
    return raws, TokenColumns(builder.source.path, builder.subflavors, raws, refs)


class TokenColumns(Sequence[CrudeSample]):
    """The crude samples of a run of sequences (:func:`token_samples`), made when first asked
    for; until then the run's columns, which :mod:`stoker.runtime.token_batches` batches
    without them."""

    __slots__ = ("_made", "path", "raws", "refs", "subflavors")

    def __init__(
        self, path: str, subflavors: dict[str, Any] | None, raws: TokenRaws, refs: Sequence[int]
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
            made = self._made = token_samples(self.path, self.subflavors, self.raws, self.refs)
        return made[at]


def token_samples(
    path: str, subflavors: dict[str, Any] | None, raws: TokenRaws, refs: Sequence[int]
) -> list[CrudeSample]:
    """The crude samples of ``raws`` (global samples ``refs`` of the dataset ``path``), as
    :meth:`~stoker.runtime.build_runs.RunAssembly._plain_run` makes them."""
    count = len(raws)
    keys = list(map(str, raws.indices))
    names = [(key + ".tokens",) for key in keys]
    refs = list(refs)
    infos = source_infos(count, [path] * count, refs, [raws.shard] * count, names)
    new = CrudeSample
    return [
        new(
            tokens=tokens, __key__=key, __restore_key__=("Webdataset", path, ref),
            __subflavors__=subflavors, __sources__=(info,),
        )
        for tokens, key, ref, info in zip(raws.tokens, keys, refs, infos, strict=True)
    ]  # fmt: skip


__all__ = ["TokenColumns", "applies", "token_run", "token_samples"]
