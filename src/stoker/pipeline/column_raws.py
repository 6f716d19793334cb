"""A run of samples read as columns: each field's values, with where each sample came from.

A reader whose format is columnar (token sequences of a ``.bin``, rows of Parquet row groups)
reads a run of references in one go as a :class:`ColumnRaws`: one list per field, the samples'
keys, shards, indices in their shards, byte offsets and member file names. The stream builds
crude samples or whole batches from the columns (:mod:`stoker.runtime.column_runs`,
:mod:`stoker.runtime.column_pieces`); a raw sample, as :meth:`read` would give it, is made only
when asked for (to report a failure, or to go one by one).

Example:
    >>> raws = ColumnRaws({"text": ["a", "b"], "n": [1, 2]}, ["r/0", "r/1"], [0, 1], [4, 4],
    ...                   ["f.parquet"] * 2, [("r/0.text", "r/0.n"), ("r/1.text", "r/1.n")])
    >>> raws[1]
    RawSample(key='r/1', parts={'text': 'b', 'n': 2}, shard='f.parquet', index=1, offset=4)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stoker.format.tar_members import RawSample, new_raw
from stoker.pipeline.read_lines import LazyRaws


class ColumnRaws(LazyRaws):
    """The raw samples of a run read as columns (see the module docstring)."""

    __slots__ = ("fields", "indices", "keys", "names", "shards", "starts")

    def __init__(
        self,
        fields: dict[str, list[Any]],
        keys: list[str],
        indices: Sequence[int],
        starts: Sequence[int],
        shards: Sequence[str],
        names: Sequence[tuple[str, ...]],
    ) -> None:
        #: Each field's values, in the samples' order.
        self.fields = fields
        #: The samples' keys, shards, indices in them, byte offsets and member file names.
        self.keys, self.indices, self.starts = keys, indices, starts
        self.shards, self.names = shards, names

    def __len__(self) -> int:
        return len(self.keys)

    def _make(self, at: int) -> RawSample:
        parts = {name: values[at] for name, values in self.fields.items()}
        return new_raw(
            RawSample, (self.keys[at], parts, self.shards[at], self.indices[at], self.starts[at])
        )


def member_names(keys: list[str], fields: Sequence[str]) -> list[tuple[str, ...]]:
    """Each sample's member file names, ``key.field`` per field (as a tar sample's).

    Example:
        >>> member_names(["r/0", "r/1"], ["text", "n"])
        [('r/0.text', 'r/0.n'), ('r/1.text', 'r/1.n')]
    """
    suffixes = ["." + name for name in fields]
    if not suffixes:
        return [()] * len(keys)
    if len(suffixes) == 1:
        suffix = suffixes[0]
        return [(key + suffix,) for key in keys]
    return list(zip(*[[key + suffix for key in keys] for suffix in suffixes], strict=True))


__all__ = ["ColumnRaws", "member_names"]
