"""Checks of a saved loader state's fields (types, ranges, lengths) before a restore uses them.

A state is plain data that may have been edited, truncated or built by hand; each bad field gets
one :class:`~stoker.errors.ConfigError` naming the field, the bad value and what to do, instead
of a ``KeyError`` or a wrong restore later.

Example:
    >>> validate_state({"stoker_state_version": 1})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    stoker.errors.ConfigError: loader state field 'fingerprint' is missing...
"""

from __future__ import annotations

from typing import Any

from stoker.errors import ConfigError

MAX_COUNT = 2**62  # counters and positions beyond this are not from a real run
MAX_VIRTUAL_WORKERS = 2**20
_HINT = "Pass the state save_state_rank() returned, unchanged."


def bad_field(field: str, value: Any, expected: str) -> ConfigError:
    """The error for loader state field ``field`` holding ``value`` where ``expected`` belongs."""
    shown = repr(value)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return ConfigError(
        f"loader state field {field!r} is {shown} ({type(value).__name__}); expected {expected}.",
        hint=_HINT,
    )


def _get(state: dict[str, Any], key: str, field: str) -> Any:
    if key not in state:
        raise ConfigError(f"loader state field {field!r} is missing.", hint=_HINT)
    return state[key]


def _int(value: Any, field: str, low: int = 0, high: int = MAX_COUNT) -> int:
    """An int (not a bool, not a str) in ``[low, high]``."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise bad_field(field, value, f"an int from {low} to {high}")
    return value


def _dict(value: Any, field: str) -> dict[Any, Any]:
    if not isinstance(value, dict):
        raise bad_field(field, value, "a dict")
    return value


def _stream_key(key: Any, field: str, virtual_workers: int) -> int:
    """A stream id written as a decimal str, below the number of virtual workers."""
    if not isinstance(key, str) or not key.isdigit() or int(key) >= virtual_workers:
        raise bad_field(f"{field}[{key!r}]", key, f"a stream id '0'..'{virtual_workers - 1}'")
    return int(key)


def _topology(state: dict[str, Any]) -> int:
    topology = _dict(_get(state, "topology", "topology"), "topology")
    v = _int(_get(topology, "virtual_workers", "topology.virtual_workers"),
             "topology.virtual_workers", 1, MAX_VIRTUAL_WORKERS)  # fmt: skip
    world = _int(_get(topology, "world_size", "topology.world_size"), "topology.world_size",
                 1, MAX_VIRTUAL_WORKERS)  # fmt: skip
    _int(_get(topology, "rank", "topology.rank"), "topology.rank", 0, world - 1)
    _int(_get(topology, "num_workers", "topology.num_workers"), "topology.num_workers",
         0, MAX_VIRTUAL_WORKERS)  # fmt: skip
    return v


def _streams(state: dict[str, Any], v: int) -> None:
    streams = _dict(_get(state, "streams", "streams"), "streams")
    if not streams and state["epoch"] == 0 and state["t"] > 0:  # empty only before a batch
        raise bad_field("streams", streams, f"a stream position after t={state['t']} batches")
    lengths: set[int] = set()
    for key, position in streams.items():
        _stream_key(key, "streams", v)
        field = f"streams[{key!r}]"
        if not isinstance(position, list) or len(position) < 2:
            raise bad_field(field, position, "a list of at least 2 ints (counts per source, skip)")
        for i, value in enumerate(position):
            _int(value, f"{field}[{i}]")
        lengths.add(len(position))
    if len(lengths) > 1:
        raise bad_field("streams", streams, "positions of one length (one count per source + skip)")


def _exhausted_and_buffers(state: dict[str, Any], v: int) -> None:
    exhausted = _get(state, "exhausted", "exhausted")
    if not isinstance(exhausted, list):
        raise bad_field("exhausted", exhausted, "a list of stream ids")
    for i, stream in enumerate(exhausted):
        _int(stream, f"exhausted[{i}]", 0, v - 1)
    if "buffers" in state:  # absent from older states
        buffers = _dict(state["buffers"], "buffers")
        for key, value in buffers.items():
            _stream_key(key, "buffers", v)
            _dict(value, f"buffers[{key!r}]")
    for key, counts in _dict(state.get("passed", {}), "passed").items():  # absent: none
        _stream_key(key, "passed", v)
        for name, n in _dict(counts, f"passed[{key!r}]").items():
            if not isinstance(name, str):
                raise bad_field(f"passed[{key!r}]", name, "source paths (str) as keys")
            _int(n, f"passed[{key!r}][{name!r}]")


def _mix(state: dict[str, Any], v: int) -> None:
    """``datasets`` (identities, see :mod:`stoker.runtime.mix_change`) and ``origins`` (per
    stream, the counts where the mix changed); both absent from older states. The fingerprint's
    ``blend`` too, which a changed mix reads: its kind, then its weights."""
    blend = state["fingerprint"].get("blend")
    if blend is not None and not (
        isinstance(blend, list)
        and blend
        and isinstance(blend[0], str)
        and all(isinstance(w, int | float) and not isinstance(w, bool) for w in blend[1:])
    ):
        raise bad_field(
            "fingerprint.blend", blend, "a list: the blend's kind (a str), then numbers"
        )
    if "datasets" in state:
        datasets = state["datasets"]
        if not isinstance(datasets, list):
            raise bad_field("datasets", datasets, "a list of datasets")
        for i, entry in enumerate(datasets):
            field = f"datasets[{i}]"
            entry = _dict(entry, field)
            for key in ("path", "split", "content"):
                if not isinstance(entry.get(key), str):
                    raise bad_field(f"{field}.{key}", entry.get(key), "a str")
            _int(entry.get("samples"), f"{field}.samples")
            for key, length in (("plan", 2), ("subset", 2)):
                if key not in entry and key == "subset":
                    continue  # optional: a dataset without a subset
                value = entry.get(key)
                if not isinstance(value, list) or len(value) != length:
                    raise bad_field(f"{field}.{key}", value, f"a list of {length} ints")
                for j, x in enumerate(value):
                    _int(x, f"{field}.{key}[{j}]")
            _dict(entry.get("subflavors", {}), f"{field}.subflavors")
    for key, counts in _dict(state.get("origins", {}), "origins").items():
        _stream_key(key, "origins", v)
        if not isinstance(counts, list):
            raise bad_field(f"origins[{key!r}]", counts, "a list of ints (a count per dataset)")
        for i, value in enumerate(counts):
            _int(value, f"origins[{key!r}][{i}]")


def validate_state(state: dict[str, Any]) -> None:
    """Raise a :class:`ConfigError` naming the first bad field of a (version-checked) state."""
    _dict(_get(state, "fingerprint", "fingerprint"), "fingerprint")
    v = _topology(state)
    for key in ("epoch", "t", "yielded"):
        _int(_get(state, key, key), key)
    finished = _get(state, "finished", "finished")
    if not isinstance(finished, bool):
        raise bad_field("finished", finished, "True or False")
    _streams(state, v)  # after epoch and t: an empty streams dict depends on them
    _exhausted_and_buffers(state, v)
    _mix(state, v)


def check_positions(state: dict[str, Any], size: int) -> None:
    """Raise a :class:`ConfigError` unless every stream position is ``size`` ints long (the
    loader's ``position_size()``: a state of another blend or wrapper stack, or edited)."""
    for key, position in state["streams"].items():
        if len(position) != size:
            raise bad_field(
                f"streams[{key!r}]",
                position,
                f"a list of {size} ints (this loader's stream position: a count per dataset, "
                "wrapper counters, then the skip count)",
            )
