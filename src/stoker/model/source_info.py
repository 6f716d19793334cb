"""``SourceInfo``: where a sample's bytes came from (``sample.__sources__``, one per part read).

A dataclass with Energon's fields and keyword constructor (``dataclasses.replace``, ``asdict``
and ``fields`` work), compared and hashed by its fields, and immutable: setting a field to
another value raises ``FrozenInstanceError`` (``dataclasses.replace`` makes another). It is
not declared ``frozen``, because collection walkers that rebuild dataclasses field by field
refuse frozen ones: Lightning's ``apply_to_collection``, which moves every batch to the
device, raised "A frozen dataclass was passed to `apply_to_collection`" for any batch with
sources. Such a walker writes back the values it walked, equal to the ones there (a
``SourceInfo`` holds no tensor), which is allowed.

Example:
    >>> info = SourceInfo(dataset_path="/d", index=7, shard_name="a.tar", file_names=("7.txt",))
    >>> info == source_info("/d", 7, "a.tar", ("7.txt",)), dataclasses.replace(info, index=8).index
    (True, 8)
    >>> info.index = 8
    Traceback (most recent call last):
    ...
    dataclasses.FrozenInstanceError: cannot assign to field 'index' (SourceInfo is immutable)
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Sequence
from itertools import repeat
from typing import Any

from stoker.pipeline.array_lists import pack_field

_FIELDS = ("dataset_path", "index", "shard_name", "file_names")


@dataclasses.dataclass(slots=True, kw_only=True)
class SourceInfo:
    """Where a sample's bytes came from: dataset, index in it, shard and member file names."""

    #: The dataset (its path, or an auxiliary store's name).
    dataset_path: str
    #: The sample's index in the dataset (or its key in an auxiliary store).
    index: int | str
    #: The shard the bytes were read from (None where there is none).
    shard_name: str | None
    #: The member files of the shard that made the sample.
    file_names: tuple[str, ...]

    def __setattr__(self, name: str, value: Any) -> None:
        setter = _SETTER.get(name)
        if setter is None:
            raise AttributeError(f"SourceInfo has no field {name!r}.")
        try:
            changes = getattr(self, name) != value
        except AttributeError:  # not set yet: the constructor sets it
            changes = False
        if changes:
            raise dataclasses.FrozenInstanceError(
                f"cannot assign to field {name!r} (SourceInfo is immutable)"
            )
        setter(self, value)

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r} of a SourceInfo.")

    def __hash__(self) -> int:
        return hash((self.dataset_path, self.index, self.shard_name, self.file_names))

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # One per sample crosses from the workers: a plain tuple pickles several times faster
        # than a slotted dataclass's default state (which walks its fields on both sides).
        return source_info, (self.dataset_path, self.index, self.shard_name, self.file_names)

    def __copy__(self) -> SourceInfo:
        return self  # immutable

    def __deepcopy__(self, memo: dict[int, Any]) -> SourceInfo:
        return self


#: The slots' setters, in field order (writing through them skips ``__setattr__``).
_SETTERS = tuple(getattr(SourceInfo, name).__set__ for name in _FIELDS)
_SETTER = dict(zip(_FIELDS, _SETTERS, strict=True))
_new = object.__new__
#: Runs an iterator to its end, keeping nothing (a deque of no length).
_drain = collections.deque[None](maxlen=0).extend


def source_info(
    dataset_path: str, index: int | str, shard_name: str | None, file_names: tuple[str, ...]
) -> SourceInfo:
    """A :class:`SourceInfo` from its fields in order, made several times faster than by its
    keyword ``__init__`` (one is made per sample; its pickles call this too).

    Example:
        >>> source_info("/data", 7, "a.tar", ("7.txt",)).index
        7
    """
    made = _new(SourceInfo)
    set_path, set_index, set_shard, set_names = _SETTERS
    set_path(made, dataset_path)
    set_index(made, index)
    set_shard(made, shard_name)
    set_names(made, file_names)
    return made


def source_infos(
    count: int,
    paths: Sequence[str],
    indices: Sequence[int | str],
    shards: Sequence[str | None],
    files: Sequence[tuple[str, ...]],
) -> list[SourceInfo]:
    """``count`` :class:`SourceInfo` from their fields as columns, made in C loops (``map``
    over the slots' setters): for many at once, several times faster than one by one.

    Example:
        >>> [a, b] = source_infos(2, ["/d"] * 2, [0, 1], ["a.tar"] * 2, [("0.txt",), ("1.txt",)])
        >>> b == source_info("/d", 1, "a.tar", ("1.txt",))
        True
    """
    made = list(map(_new, repeat(SourceInfo, count)))
    set_path, set_index, set_shard, set_names = _SETTERS
    _drain(map(set_path, made, paths))
    _drain(map(set_index, made, indices))
    _drain(map(set_shard, made, shards))
    _drain(map(set_names, made, files))
    return made


class SourceColumns(list[tuple[SourceInfo]]):
    """A batch's ``__sources__`` of one :class:`SourceInfo` per sample (each in a tuple of its
    own, as a sample's ``__sources__`` is) that pickles as four columns and unpickles as a plain
    list made by :func:`source_infos`: a worker's batch crosses with no reduce call per sample,
    and the training process makes the infos in C loops (see
    :func:`stoker.pipeline.array_lists.packed`).

    Example:
        >>> import pickle
        >>> sources = [(source_info("/d", i, "a.tar", (f"{i}.txt",)),) for i in range(3)]
        >>> back = pickle.loads(pickle.dumps(SourceColumns(sources)))
        >>> type(back) is list and back == sources
        True
    """

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        infos = [one for (one,) in self]
        columns = (list(map(getter, infos)) for getter in _GETTERS)
        return _from_columns, tuple(columns)


def single_sources(values: list[Any]) -> bool:
    """Whether ``values`` (a batch's ``__sources__``) holds one :class:`SourceInfo` per
    sample, each in a tuple of its own."""
    return all(type(v) is tuple and len(v) == 1 and type(v[0]) is SourceInfo for v in values)


def _from_columns(
    paths: list[str], indices: list[int | str], shards: list[str | None], files: list[Any]
) -> list[tuple[SourceInfo]]:
    return list(zip(source_infos(len(paths), paths, indices, shards, files), strict=True))


#: The slots' getters, in field order.
_GETTERS = tuple(getattr(SourceInfo, name).__get__ for name in _FIELDS)
pack_field("__sources__", single_sources, SourceColumns)

__all__ = ["SourceColumns", "SourceInfo", "single_sources", "source_info", "source_infos"]
