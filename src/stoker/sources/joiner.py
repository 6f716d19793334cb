"""The worker side of joins: read a primary sample's partners and call the joiner.

The joiner is a sample class (its ``from_joined`` is called, as in Energon) or a function,
named in the metadataset; ``__module__: megatron.energon`` means stoker's own classes. Without
a joiner, the primary sample's class joins (a stoker extension; Energon requires one).

Example:
    >>> from stoker.metadataset.nodes import ObjectRef
    >>> from stoker.model.samples import TextSample
    >>> join = resolve_joiner(ObjectRef("megatron.energon", "TextSample"), None, None)
    >>> join([TextSample(__key__="a", __restore_key__=(), text="x"), None]).text
    'x'
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from stoker.errors import ConfigError, SampleError, StokerError
from stoker.format.sample_types import BUILTIN_MODULES
from stoker.metadataset.nodes import ObjectRef
from stoker.model.samples import SAMPLE_CLASSES
from stoker.pipeline.read import RawSample, ShardReader
from stoker.pipeline.sample_failure import SkipSample

if TYPE_CHECKING:
    from stoker.sources.joins import JoinSpec

Joiner = Callable[[Sequence[Any]], Any]
BuildFn = Callable[[RawSample, int], Any]


def resolve_joiner(
    joiner: ObjectRef | None, names: tuple[str, ...] | None, primary_type: str | None
) -> Joiner:
    """A function of the list of samples (primary first; ``None`` for a missing partner)."""
    if joiner is None:
        if names is not None or primary_type not in SAMPLE_CLASSES:
            raise ConfigError(
                "this join names no joiner, and the primary dataset's sample type "
                f"({primary_type or 'crude'}) cannot join "
                + ("named datasets." if names is not None else "samples."),
                hint="Add `joiner: {__module__: my_module, __class__: MyJoinedSample}`.",
            )
        target: Any = SAMPLE_CLASSES[primary_type]
    else:
        target = _import(joiner)
    call = (
        target.from_joined
        if isinstance(target, type) and hasattr(target, "from_joined")
        else target
    )
    if not callable(call):
        raise ConfigError(f"the joiner {joiner} is not a class or function.")
    if names is not None:
        return functools.partial(_call_named, call, names)
    return functools.partial(_call_positional, call)


def _call_named(call: Callable[..., Any], names: tuple[str, ...], samples: Sequence[Any]) -> Any:
    return call(**dict(zip(names, samples, strict=True)))


def _call_positional(call: Callable[..., Any], samples: Sequence[Any]) -> Any:
    return call(*samples)


def _import(ref: ObjectRef) -> Any:
    module = "stoker" if ref.module in BUILTIN_MODULES else ref.module
    try:
        return getattr(importlib.import_module(module), ref.name)
    except (ImportError, AttributeError) as e:
        raise ConfigError(
            f"cannot import the joiner {ref.name!r} from module {ref.module!r}: {e}",
            hint="The module must be importable in the training process and its workers "
            "(installed, or on PYTHONPATH).",
        ) from None


class Partners:
    """A worker's readers of a join's partner datasets: opened on first use, then kept."""

    def __init__(self, spec: JoinSpec, make_builder: Callable[[Any], BuildFn]) -> None:
        self.spec = spec
        self._make_builder = make_builder
        self._io: list[tuple[ShardReader, BuildFn]] | None = None
        self._ends = [np.cumsum(p.counts) for p in spec.partners]

    def read(self, ref: int, key: str) -> list[Any]:
        """The partner samples of primary sample ``ref`` (key ``key``); None where missing."""
        if self._io is None:
            self._io = [(p.reader(), self._make_builder(p)) for p in self.spec.partners]
        out: list[Any] = []
        for p, location in enumerate(self.spec.locations[:, ref].tolist()):
            out.append(None if location < 0 else self._read_one(p, location, key))
        return out

    def _read_one(self, p: int, location: int, key: str) -> Any:
        source, (reader, build) = self.spec.partners[p], self._io[p]  # type: ignore[index]
        shard = int(np.searchsorted(self._ends[p], location, side="right"))
        index = location - (int(self._ends[p][shard - 1]) if shard else 0)
        if source.first_index is not None:
            index += int(source.first_index[shard])
        where = f"{source.root}/{source.shards[shard]}"
        try:
            raw = reader.read(shard, index)
            if raw.key != key:
                raise SampleError(
                    f"the join index points to sample {raw.key!r}, not {key!r}.",
                    hint="A joined dataset changed since the join index was built; run "
                    "`stoker prepare` on the metadataset again.",
                )
            return build(raw, location)
        except SkipSample:
            raise
        except StokerError as e:
            if e.path is None:
                e.path, e.key = where, e.key or key
            raise
        except Exception as e:
            raise SampleError(f"joined dataset {source.path}: {e}", path=where, key=key) from e

    def close(self) -> None:
        for reader, _ in self._io or ():
            reader.close()
