"""Batches made from the columns their samples were read as, not from the samples.

Under the default task encoder, a batch of crude samples is a
:class:`~stoker.model.samples.CrudeSample` of lists: each field's values (batched as the
default ``batch`` batches a field: ``generic_batch``), keys, restore keys, subflavors and
sources. The plain path makes each sample (a dict, its restore key extended) and then takes the
lists apart again. Where a stream's samples go into a fixed-size batch under the default
``batch`` and nothing runs on them in between (:func:`applies`), the stream collects them in
:class:`ColumnPieces`: the runs read as columns (token sequences, Parquet rows:
:class:`~stoker.runtime.column_runs.RunColumns`) with where each piece starts and its hook
indices, and :meth:`ColumnPieces.columnar_batch` makes the batch's lists straight from those
columns, each in one C loop. The batch equals the plain path's; a piece list mixed with other
samples (a blend with a webdataset), or with runs of other fields, is made into its samples and
batched as before. ``benchmarks/bench_binidx.py`` and ``bench_parquet.py`` measure it.

Example:
    >>> import numpy as np
    >>> from stoker.pipeline.column_raws import ColumnRaws
    >>> raws = ColumnRaws({"tokens": [np.arange(3), np.arange(2)]}, ["5", "6"], [5, 6],
    ...                   [10, 16], ["c.bin"] * 2, [("5.tokens",), ("6.tokens",)])
    >>> pieces = ColumnPieces()
    >>> pieces.add(RunColumns("/d/c.bin", None, raws, [40, 41]), 0, 2, 100, 2)
    >>> batch, keys = pieces.columnar_batch()
    >>> batch["__key__"], batch["__sources__"][1][0].file_names
    (['5', '6'], ('6.tokens',))
    >>> keys
    [('Webdataset', '/d/c.bin', 40, 100, 0), ('Webdataset', '/d/c.bin', 41, 102, 0)]
    >>> [s["__restore_key__"] for s in pieces] == keys
    True
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import repeat
from typing import TYPE_CHECKING, Any

from stoker.model.samples import CrudeSample
from stoker.model.source_info import source_infos
from stoker.model.task import DefaultTaskEncoder, TaskEncoder
from stoker.pipeline.batch import generic_batch
from stoker.pipeline.column_batches import ColumnSamples
from stoker.runtime.column_runs import RunColumns

if TYPE_CHECKING:
    from stoker.pipeline.skip_policy import ErrorTracker
    from stoker.runtime.prepared_runs import Prepared
    from stoker.runtime.stream import SampleStream


def applies(stream: SampleStream, identity: bool) -> bool:
    """Whether ``stream``'s samples may be collected in :class:`ColumnPieces`: it reads a
    dataset as columns (:mod:`stoker.runtime.column_runs`), each sample is its one output
    (``identity``: the default ``encode_sample``), no blend measures them, and the task
    encoder's ``batch`` is the default one (into the samples' own type)."""
    encoder = stream.spec.task_encoder
    return (
        identity
        and stream.sizer is None
        and any(io.columns and io.builder.kitchen is None for io in stream.io)
        and default_batch(encoder)
    )


def default_batch(encoder: TaskEncoder[Any, Any, Any, Any]) -> bool:
    """Whether ``encoder.batch`` batches crude samples into a crude sample of lists, field by
    field (``TaskEncoder``'s, or ``DefaultTaskEncoder``'s without a ``raw_batch_type``)."""
    if not isinstance(encoder, TaskEncoder):
        return False
    if not encoder._is_overridden(encoder.batch):
        return True
    return (
        isinstance(encoder, DefaultTaskEncoder)
        and not encoder._is_overridden(encoder.batch, (DefaultTaskEncoder,))
        and getattr(encoder, "_raw_batch_type", None) in (None, CrudeSample)
    )


class _Piece:
    """Samples ``start`` ... ``start + count - 1`` of a run, the first with sample index
    ``first`` (the next ``step`` more each)."""

    __slots__ = ("columns", "count", "first", "start", "step")

    def __init__(self, columns: RunColumns, start: int, count: int, first: int, step: int):
        self.columns, self.start, self.count = columns, start, count
        self.first, self.step = first, step

    def restore_keys(self) -> list[tuple[Any, ...]]:
        """Each sample's restore key, extended by its sample index (as the stream does)."""
        columns, start, n = self.columns, self.start, self.count
        indices = range(self.first, self.first + n * self.step, self.step)
        return list(
            zip(
                repeat("Webdataset", n), repeat(columns.path, n),
                columns.refs[start : start + n], indices, repeat(0, n), strict=True,
            )
        )  # fmt: skip

    def samples(self) -> list[CrudeSample]:
        """The samples themselves, their restore keys extended."""
        made = self.columns[self.start : self.start + self.count]
        for sample, key in zip(made, self.restore_keys(), strict=True):
            sample["__restore_key__"] = key
        return made


class ColumnPieces(ColumnSamples):
    """A list of samples being filled by a stream (``append``, ``len``), whose runs read as
    samples are added as columns (:meth:`add`); see the module docstring."""

    __slots__ = ("_count", "_pieces", "_plain")

    def __init__(self) -> None:
        self._pieces: list[Any] = []
        self._count = 0
        self._plain = False  # holds a sample that is not a piece of columns

    def append(self, sample: Any) -> None:
        self._pieces.append(sample)
        self._count += 1
        self._plain = True

    def add(self, columns: RunColumns, start: int, count: int, first: int, step: int) -> None:
        """Samples ``start`` ... of ``columns``, ``count`` of them, whose sample indices are
        ``first``, ``first + step``, ..."""
        self._pieces.append(_Piece(columns, start, count, first, step))
        self._count += count

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[Any]:
        for piece in self._pieces:
            if type(piece) is _Piece:
                yield from piece.samples()
            else:
                yield piece

    def columnar_batch(self) -> tuple[Any, list[Any]] | None:
        if self._plain or not self._pieces:
            return None
        names = list(self._pieces[0].columns.raws.fields)
        fields: list[list[Any]] = [[] for _ in names]
        keys: list[str] = []
        restore_keys: list[Any] = []
        subflavors: list[Any] = []
        sources: list[Any] = []
        for piece in self._pieces:
            columns, start, n = piece.columns, piece.start, piece.count
            raws, end = columns.raws, start + n
            if list(raws.fields) != names:  # runs of other fields: batched from samples
                return None
            for values, column in zip(fields, raws.fields.values(), strict=True):
                values += column[start:end]
            keys += raws.keys[start:end]
            restore_keys += piece.restore_keys()
            subflavors += [columns.subflavors] * n
            infos = source_infos(
                n, [columns.path] * n, columns.refs[start:end], raws.shards[start:end],
                raws.names[start:end],
            )  # fmt: skip
            sources += zip(infos)
        batch = CrudeSample(
            zip(names, map(generic_batch, fields), strict=True), __key__=keys,
            __restore_key__=restore_keys, __subflavors__=subflavors, __sources__=sources,
        )  # fmt: skip
        return batch, restore_keys


def add_columns(
    out: Any,
    queue: Prepared,
    n: int,
    kitchen: object,
    first: int,
    step: int,
    tracker: ErrorTracker,
) -> bool:
    """Add the next ``n`` samples of ``queue`` to ``out`` as columns (sample indices ``first``,
    ``first + step``, ...), where ``out`` collects them so and ``queue`` holds a run's columns
    and no cooker runs on them; whether it did (else nothing was done)."""
    columns: Any = queue.samples
    if type(out) is not ColumnPieces or type(columns) is not RunColumns or kitchen is not None:
        return False
    out.add(columns, queue.at, n, first, step)
    queue.at += n
    if tracker.consecutive or tracker.storage_shards:
        tracker.succeeded()
    return True


def collector(columns: bool) -> type[list[Any]] | type[ColumnPieces]:
    """What a stream fills with the samples of a batch: :class:`ColumnPieces` where its runs
    are collected as columns (``columns``), else a list."""
    return ColumnPieces if columns else list


__all__ = ["ColumnPieces", "add_columns", "applies", "collector", "default_batch"]
