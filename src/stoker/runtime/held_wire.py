"""What a stream's stages hold, sent from a worker without repeating what did not change.

Every batch carries what its stream's packing and grouping stages hold (plain data, nested by
wrappers and mixes). The packing buffer's references are one string made once per selection
round (:func:`stoker.pipeline.refs.encode_groups`), so most batches of a round carry the same
string again. :class:`Sender` (in the worker) replaces a string equal to the one it sent at the
same place for the same stream by :data:`SAME`; :class:`Receiver` (in the main process) puts the
previous string back. Both remember only the last value per stream.

Example:
    >>> sender, receiver = Sender(), Receiver()
    >>> held = {"pack": {"refs": "refs1:" + "x" * 50, "popped": 0}}
    >>> receiver.expand(0, sender.compact(0, held)) == held
    True
    >>> sender.compact(0, {"pack": {**held["pack"], "popped": 1}})
    {'pack': {'refs': SAME, 'popped': 1}}
"""

from __future__ import annotations

from typing import Any


class _Same:
    """Stands for "the same string as in this stream's previous batch, at the same place"."""

    def __reduce__(self) -> str:
        return "SAME"  # pickled by name: one object in every process

    def __repr__(self) -> str:
        return "SAME"


SAME = _Same()
#: Only strings at least this long are worth replacing.
_MIN = 32


def _replace(held: Any, previous: Any, same: bool) -> Any:
    """``held`` with long strings equal to ``previous``'s at the same place replaced by
    :data:`SAME` (``same``), or :data:`SAME` replaced by ``previous``'s (not ``same``)."""
    if isinstance(held, dict):
        before = previous if isinstance(previous, dict) else {}
        return {k: _replace(v, before.get(k), same) for k, v in held.items()}
    if isinstance(held, list):
        olds = previous if isinstance(previous, list) and len(previous) == len(held) else []
        return [_replace(v, olds[i] if olds else None, same) for i, v in enumerate(held)]
    if same and isinstance(held, str) and len(held) >= _MIN and held == previous:
        return SAME
    if not same and held is SAME:
        if not isinstance(previous, str):
            raise RuntimeError("internal: a worker sent a held value the main process lacks")
        return previous
    return held


class Sender:
    """The worker's side: remembers what it sent last per stream."""

    def __init__(self) -> None:
        self.last: dict[int, Any] = {}

    def compact(self, stream: int, held: Any) -> Any:
        previous, self.last[stream] = self.last.get(stream), held
        return held if previous is None or held is None else _replace(held, previous, True)


class Receiver:
    """The main process's side: remembers what it received last per stream, expanded."""

    def __init__(self) -> None:
        self.last: dict[int, Any] = {}

    def expand(self, stream: int, held: Any) -> Any:
        previous = self.last.get(stream)
        full = held if previous is None or held is None else _replace(held, previous, False)
        self.last[stream] = full
        return full
