"""Energon's index-writing internals (``flavors.webdataset.indexing``, ``.prepare`` and
``.aggregator_pool``), for client code and tools that build an index themselves.

``stoker prepare`` (:func:`stoker.prepare_dataset`) is the way to make an index; these are thin
adapters over its pieces: :class:`SqliteIndexWriter` writes rows into the same tables
(:mod:`stoker.format.sqlite_index`'s schema, which is Energon's) a batch at a time, refusing a
batch that repeats a sample key as a whole; :class:`AggregatorPool` runs a producer over tasks in
worker processes (:func:`stoker.format.parallel.ordered_map`) and hands the items, in task order
and in batches, to an aggregator in this process.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "index.sqlite"
    >>> with SqliteIndexWriter(path) as writer:
    ...     writer.append_samples([IndexSample(0, "a", 0, 0, 1024)])
    ...     writer.append_samples([IndexSample(1, "a", 0, 0, 512)])
    Traceback (most recent call last):
    ...
    stoker.energon_alias.index_writer.DuplicateSampleKeyError: ... 'a' ...
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import TracebackType
from typing import Any, Generic, TypeVar

from stoker.format.parallel import ordered_map
from stoker.format.sqlite_index import INDEXES_DDL, PARTS_DDL, SAMPLES_DDL

T_input = TypeVar("T_input")
T_item = TypeVar("T_item")
T_result = TypeVar("T_result")


def _batches(items: Iterable[T_item], size: int) -> Iterator[list[T_item]]:
    """``items`` in lists of ``size`` (the last one shorter)."""
    iterator = iter(items)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


class DuplicateSampleKeyError(RuntimeError):
    """A batch of samples repeats a key (within itself, or one already written)."""

    def __init__(self, sample_key: str) -> None:
        super().__init__(
            f"the sample key {sample_key!r} occurs twice; sample keys must be unique across a "
            "dataset's shards: rename the files of one of them (stoker lint lists every "
            "duplicate)."
        )
        self.sample_key = sample_key


@dataclasses.dataclass
class IndexSample:
    """One row of ``samples``: where a sample's tar headers start, and its size."""

    tar_file_id: int
    sample_key: str
    sample_index: int
    byte_offset: int
    byte_size: int


@dataclasses.dataclass
class IndexSamplePart:
    """One row of ``sample_parts``: where one part's data lies in its shard."""

    tar_file_id: int
    sample_index: int
    part_name: str
    content_byte_offset: int
    content_byte_size: int


class SqliteIndexWriter:
    """Writes ``index.sqlite`` row batches into Energon's schema; a context manager that commits
    (and builds the secondary indexes) on a clean exit."""

    def __init__(self, sqlite_path: Any, **_options: Any) -> None:
        local = getattr(sqlite_path, "local_path", None)
        self.sqlite_path = sqlite_path
        self.db: sqlite3.Connection | None = sqlite3.connect(
            os.fspath(local() if callable(local) else sqlite_path), isolation_level=None
        )
        self.db.execute("BEGIN")
        self.db.execute(SAMPLES_DDL)
        self.db.execute(PARTS_DDL)

    def _open(self) -> sqlite3.Connection:
        if self.db is None:
            raise RuntimeError("this SqliteIndexWriter is closed; open a new one to write")
        return self.db

    def append_samples(self, samples: Sequence[IndexSample]) -> None:
        """Add a batch of sample rows; a repeated key raises :class:`DuplicateSampleKeyError`
        and adds none of them."""
        db = self._open()
        keys = [s.sample_key for s in samples]
        seen: set[str] = set()
        for key in keys:
            if key in seen:
                raise DuplicateSampleKeyError(key)
            seen.add(key)
        for chunk in _batches(keys, 500):
            marks = ",".join("?" * len(chunk))
            found = db.execute(
                f"SELECT sample_key FROM samples WHERE sample_key IN ({marks}) LIMIT 1", chunk
            ).fetchone()
            if found is not None:
                raise DuplicateSampleKeyError(str(found[0]))
        db.executemany(
            "INSERT INTO samples VALUES (?, ?, ?, ?, ?)", (dataclasses.astuple(s) for s in samples)
        )

    def append_parts(self, parts: Iterable[IndexSamplePart]) -> None:
        """Add a batch of part rows."""
        self._open().executemany(
            "INSERT INTO sample_parts VALUES (?, ?, ?, ?, ?)",
            (dataclasses.astuple(p) for p in parts),
        )

    def close(self, commit: bool = True) -> None:
        """Build the secondary indexes and commit (or roll back), and close the file."""
        if self.db is None:
            return
        if commit:
            for ddl in INDEXES_DDL:
                self.db.execute(ddl)
        self.db.execute("COMMIT" if commit else "ROLLBACK")
        self.db.close()
        self.db = None

    def __enter__(self) -> SqliteIndexWriter:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(commit=kind is None or issubclass(kind, DuplicateSampleKeyError))


class BaseAggregator(Generic[T_item, T_result]):
    """Receives the items :class:`AggregatorPool`'s workers produce, in this process."""

    def on_start(self, aggregator_pool: AggregatorPool[Any, T_item, T_result]) -> None:
        """Called once before the first batch of items."""

    def on_item(
        self, items: list[T_item], aggregator_pool: AggregatorPool[Any, T_item, T_result]
    ) -> None:
        """Called with each batch of items (at most the pool's ``batch_size``)."""
        raise NotImplementedError(f"{type(self).__name__} must define on_item")

    def on_finish(self, aggregator_pool: AggregatorPool[Any, T_item, T_result]) -> None:
        """Called once after the last batch."""

    def get_final_result_data(self) -> T_result:
        """What :meth:`AggregatorPool.process` returns."""
        raise NotImplementedError(f"{type(self).__name__} must define get_final_result_data")


def _produce(
    produce: Callable[[Any], Iterable[Any]], batch_size: int, task: Any
) -> list[list[Any]]:
    """One task's items, in batches of ``batch_size`` (run in a worker)."""
    return list(_batches(produce(task), batch_size))


class AggregatorPool(Generic[T_input, T_item, T_result]):
    """Runs ``user_produce_data(task)`` for each submitted task in ``num_workers`` processes;
    :meth:`process` hands the items to ``aggregator`` in task order, ``batch_size`` at a time."""

    def __init__(
        self,
        num_workers: int,
        user_produce_data: Callable[[T_input], Iterable[T_item]],
        aggregator: BaseAggregator[T_item, T_result],
        batch_size: int = 1,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"AggregatorPool needs batch_size >= 1, got {batch_size=}")
        self.num_workers = num_workers
        self.user_produce_data = user_produce_data
        self.aggregator = aggregator
        self.batch_size = batch_size
        self._tasks: list[T_input] = []

    def submit_task(self, task: T_input) -> None:
        """Queue one task for :meth:`process`."""
        self._tasks.append(task)

    def process(self) -> T_result:
        """Run every queued task and return the aggregator's final result."""
        tasks, self._tasks = self._tasks, []
        produce = functools.partial(_produce, self.user_produce_data, self.batch_size)
        self.aggregator.on_start(self)
        for batches in ordered_map(produce, tasks, self.num_workers, len(tasks)):
            for batch in batches:
                self.aggregator.on_item(batch, self)
        self.aggregator.on_finish(self)
        return self.aggregator.get_final_result_data()
