"""Batches of small samples cross from a worker to the main process as a few columns.

A batch carries one :class:`~stoker.model.samples.SourceInfo` per sample (``__sources__``: a
list of one tuple per sample, or one flat tuple). Pickled one by one, each costs a Python call
to take apart in the worker and two (with four attribute writes) to rebuild in the main process:
for batches of small text samples, more than the rest of the batch together. :func:`pack` returns
what a worker pickles instead of the batch: the same batch, its sources as four columns
(dataset paths, indices, shard names, file names) and their layout. Unpickling rebuilds the
batch itself, of its own class, its sources made column by column in C loops (``map`` over
slot setters), several times faster.

Only the batch's own fields are looked at (a dict batch's values, a dataclass's state as
``__reduce_ex__`` gives it); anything else, and a batch whose pickling a class customises in
another way, is pickled as it is.

Example:
    >>> import pickle
    >>> src = SourceInfo(dataset_path="/d", index=0, shard_name="a.tar", file_names=("0.txt",))
    >>> batch = {"text": ["hi"], "__sources__": [(src,)] * 8}
    >>> pickle.loads(pickle.dumps(pack(batch))) == batch
    True
"""

from __future__ import annotations

import copyreg
from typing import Any

from stoker.model.source_info import SourceInfo, source_infos

#: Fewer sources than this are pickled one by one (columns are not worth it).
MIN_SOURCES = 8

#: What ``__reduce_ex__`` names to make an object of a class without calling its ``__init__``.
_COPYREG_NEWOBJ = getattr(copyreg, "__newobj__")  # noqa: B009 (not in the stubs)
#: The default ``__reduce_ex__`` (a class that overrides it is pickled its own way).
_DEFAULT_REDUCE_EX: Any = object.__reduce_ex__


def _rebuild_sources(
    container: type, lengths: list[int] | int | None, columns: tuple[list[Any], ...]
) -> Any:
    """The sources value :func:`_pack_sources` took apart (``lengths``: None for a flat
    sequence, 1 for one-tuples only; else per element, the length of its tuple or -1 for
    None)."""
    made = source_infos(len(columns[0]), *columns)
    if lengths is None:
        return container(made)
    if isinstance(lengths, int):  # 1: one-tuples, made in C
        return container(zip(made))
    out: list[tuple[SourceInfo, ...] | None] = []
    at = 0
    for n in lengths:
        if n < 0:
            out.append(None)
        else:
            out.append(tuple(made[at : at + n]))
            at += n
    return container(out)


class _Sources:
    """A sources value, pickled as columns (see :func:`_rebuild_sources`)."""

    __slots__ = ("args",)

    def __init__(self, *args: Any) -> None:
        self.args = args

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return _rebuild_sources, self.args


def _pack_sources(value: Any) -> Any:
    """``value`` as :class:`_Sources` if it is a list/tuple of SourceInfo, or of tuples of
    SourceInfo (or None), with at least :data:`MIN_SOURCES` of them; else ``value``."""
    container = type(value)
    if (container is not list and container is not tuple) or len(value) < MIN_SOURCES:
        return _pack_sources_slowly(value, container) if value else value
    first = value[0]
    if type(first) is SourceInfo:  # a flat sequence
        if len([s for s in value if type(s) is SourceInfo]) != len(value):
            return value
        return _Sources(container, None, _columns(value))
    if type(first) is not tuple or len(first) != 1 or type(first[0]) is not SourceInfo:
        return _pack_sources_slowly(value, container)  # not sources, or not one per element
    # one source per sample, the usual case: one pass to check, one per column
    flat = [e[0] for e in value if type(e) is tuple and len(e) == 1 and type(e[0]) is SourceInfo]
    if len(flat) == len(value):
        return _Sources(container, 1, _columns(flat))
    return _pack_sources_slowly(value, container)


def _pack_sources_slowly(value: Any, container: type) -> Any:
    """:func:`_pack_sources` of tuples of SourceInfo of any length (or None), one by one."""
    if (container is not list and container is not tuple) or not value:
        return value
    flat: list[Any] = []
    lengths: list[int] = []
    for element in value:
        if element is None:
            lengths.append(-1)
        elif type(element) is tuple and (not element or type(element[0]) is SourceInfo):
            lengths.append(len(element))
            flat.extend(element)
        else:  # not sources (checked on the first of each tuple: bail out early)
            return value
    if len(flat) < MIN_SOURCES or any(type(s) is not SourceInfo for s in flat):
        return value
    if all(n == 1 for n in lengths):
        return _Sources(container, 1, _columns(flat))
    return _Sources(container, lengths, _columns(flat))


def _columns(flat: list[SourceInfo] | tuple[SourceInfo, ...]) -> tuple[list[Any], ...]:
    return (
        [s.dataset_path for s in flat],
        [s.index for s in flat],
        [s.shard_name for s in flat],
        [s.file_names for s in flat],
    )


def _pack_values(state: Any) -> tuple[Any, bool]:
    """``state`` (a dict, list or tuple of values) with its sources packed; whether any was."""
    if type(state) is dict:
        packed = {k: _pack_sources(v) for k, v in state.items()}
        return packed, any(packed[k] is not v for k, v in state.items())
    if type(state) is list or type(state) is tuple:
        items = [_pack_sources(v) for v in state]
        return type(state)(items), any(a is not b for a, b in zip(items, state, strict=True))
    return state, False


def _newobj(cls: type, *args: Any) -> Any:
    """``cls.__new__(cls, *args)`` (what ``copyreg.__newobj__`` does: pickle accepts that one
    only for the object itself, not for a stand-in)."""
    return cls.__new__(cls, *args)


class _Reduced:
    """Stands for a batch in a pickle: its ``__reduce_ex__`` with the state packed."""

    __slots__ = ("reduced",)

    def __init__(self, reduced: tuple[Any, ...]) -> None:
        self.reduced = reduced

    def __reduce__(self) -> tuple[Any, ...]:
        return self.reduced


def _pack_object(batch: Any) -> Any:
    reduced = batch.__reduce_ex__(5)
    if type(reduced) is not tuple or len(reduced) < 3 or reduced[0] is not _COPYREG_NEWOBJ:
        return batch
    state = reduced[2]
    if type(state) is tuple and len(state) == 2:  # (dict state, slot state)
        packed_dict, changed_dict = _pack_values(state[0])
        packed_slots, changed_slots = _pack_values(state[1])
        packed, changed = (packed_dict, packed_slots), changed_dict or changed_slots
    else:
        packed, changed = _pack_values(state)
    if not changed:
        return batch
    return _Reduced((_newobj, reduced[1], packed, *reduced[3:]))


def pack(batch: Any) -> Any:
    """What a worker pickles in place of ``batch`` (see the module docs): ``batch`` itself where
    nothing is worth packing."""
    try:
        if type(batch) is dict:
            packed, changed = _pack_values(batch)
            return packed if changed else batch
        kind = type(batch)
        if kind.__reduce_ex__ is not _DEFAULT_REDUCE_EX or kind in copyreg.dispatch_table:
            return batch  # pickled its own way
        return _pack_object(batch)
    except Exception:  # left to the pickler, which reports what cannot be pickled
        return batch


__all__ = ["pack"]
