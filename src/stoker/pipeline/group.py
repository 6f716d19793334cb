"""Grouped batching: batches whose samples share a key (e.g. an image's aspect ratio bucket).

``batch_group_criterion(sample) -> (key, batch_size)`` puts each sample in its key's bucket; a
bucket full to its batch size (``None``: the loader's ``batch_size``) becomes a batch
(``batch`` + ``encode_batch``, by :class:`~stoker.pipeline.batching.BatchMaker`). When a finite
stream ends, the partial buckets are batched too, oldest first, unless ``batch_drop_last``.

At most :data:`MAX_OPEN_GROUPS` buckets may be filling at once: a criterion that gives (nearly)
every sample a key of its own would otherwise hold the whole stream. One more stops the stream
with a :class:`~stoker.errors.StokerError` naming ``batch_group_criterion``.

State: the references of the samples in the partial buckets, oldest bucket first
(:meth:`Grouper.state`); keys and sizes are not saved but recomputed from the re-read samples.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from stoker.errors import ConfigError, StokerError
from stoker.pipeline.batching import SKIPPED, BatchMaker
from stoker.pipeline.hook_index import HookCall
from stoker.pipeline.node import Node, NodeState, nested
from stoker.pipeline.refs import Ref, RefSource
from stoker.pipeline.sample_failure import SkipSample
from stoker.pipeline.skip_policy import ErrorTracker
from stoker.pipeline.stage_clock import GROUP

if TYPE_CHECKING:
    from stoker.pipeline.refs import Position


#: Buckets that may be filling at once, per stream (see the module docstring).
MAX_OPEN_GROUPS = 1024


@dataclass
class _Bucket:
    size: int
    samples: list[Any] = field(default_factory=list)
    refs: list[Ref] = field(default_factory=list)


class Grouper(Node[tuple[Any, "Position"]]):
    """Grouped batches of one upstream node, with the reading position after each (see
    module); its part of the state is ``"group"``."""

    name = "group"

    def __init__(
        self,
        maker: BatchMaker,
        batch_size: int | None,
        drop_last: bool,
        upstream: RefSource,
        tracker: ErrorTracker,
    ) -> None:
        super().__init__()
        self.maker, self.encoder = maker, maker.encoder
        self.batch_size, self.drop_last = batch_size, drop_last
        self.upstream, self.tracker = upstream, tracker
        self._reset({})

    def _reset(self, state: NodeState) -> None:
        self.upstream.reset(state)
        self.saved: dict[str, Any] | None = state.get(self.name)
        #: Partial buckets in the order they were opened (a full bucket is removed).
        self.buckets: dict[Hashable, _Bucket] = {}

    def _upstreams(self) -> tuple[Node[Any], ...]:
        return (self.upstream,)

    def state(self) -> NodeState:
        """The upstream's state, and ``"group": {"buckets": [[ref, ...], ...]}`` (refs as lists
        of ints), left out when all buckets are empty."""
        own = None
        if self.buckets:
            own = {"buckets": [[list(ref) for ref in b.refs] for b in self.buckets.values()]}
        return nested(self.upstream, self.name, own)

    def _run(self) -> Iterator[tuple[Any, Position]]:
        """Batches, each with the reading position after the last sample it needed."""
        self._restore()
        position = self.upstream.position
        for sample, position, ref in self.upstream.items():
            found = self._bucket_of(sample)
            if found is None:
                continue
            key, bucket = found
            bucket.samples.append(sample)
            bucket.refs.append(ref)
            if len(bucket.samples) >= bucket.size:
                del self.buckets[key]
                batch = self.maker.make(bucket.samples)
                if batch is not SKIPPED:
                    yield batch, position
        while self.buckets and not self.drop_last:
            key = next(iter(self.buckets))
            batch = self.maker.make(self.buckets.pop(key).samples)
            if batch is not SKIPPED:
                yield batch, position
        self.buckets.clear()

    def _bucket_of(self, sample: Any, *, strict: bool = False) -> tuple[Hashable, _Bucket] | None:
        """The (key, bucket) ``sample`` goes to, opened if new; None if the criterion failed."""
        with HookCall(self.maker.slots.batch_index(), GROUP):
            try:
                key, size = self.encoder.batch_group_criterion(sample)
            except NotImplementedError:
                raise
            except SkipSample:
                if strict:
                    raise
                self.tracker.skip(sample, "batch_group_criterion")
                return None
            except Exception as e:
                if strict:
                    raise
                self.tracker.failed(e, sample, "batch_group_criterion")
                return None
        size = self.batch_size if size is None else size
        if size is None or size < 1:
            raise ConfigError(
                f"batch_group_criterion gave group {key!r} batch size {size!r}.",
                hint="Return a batch size >= 1 for the group, or None with a batch_size set.",
            )
        bucket = self.buckets.get(key)
        if bucket is None:
            self._check_room(key)
            bucket = self.buckets[key] = _Bucket(size)
        elif bucket.size != size:
            raise ConfigError(
                f"batch_group_criterion gave group {key!r} batch size {size}, but {bucket.size} "
                "before.",
                hint="Give every sample of a group the same batch size.",
            )
        return key, bucket

    def _check_room(self, key: Hashable) -> None:
        """A clear error when a new bucket would exceed :data:`MAX_OPEN_GROUPS`."""
        if len(self.buckets) < MAX_OPEN_GROUPS:
            return
        held = sum(len(b.samples) for b in self.buckets.values())
        raise StokerError(
            f"batch_group_criterion gave key {key!r} while {len(self.buckets)} groups are already "
            f"filling ({held} samples held, at most {MAX_OPEN_GROUPS} groups may fill at once); "
            "each group holds its samples until it reaches its batch size.",
            hint="Return fewer distinct keys (bucket continuous values, e.g. "
            "round(aspect_ratio, 1)) or smaller batch sizes (docs/packing.md).",
        )

    def _restore(self) -> None:
        state, self.saved = self.saved, None
        if not state:
            return
        buckets = [[tuple(int(v) for v in ref) for ref in refs] for refs in state["buckets"]]
        samples = iter(self.upstream.reread([ref for refs in buckets for ref in refs]))
        for refs in buckets:
            for ref in refs:
                sample = next(samples)
                found = self._bucket_of(sample, strict=True)
                if found is None:  # only in non-strict mode
                    raise RuntimeError("internal: strict criterion gave no bucket")
                _, bucket = found
                bucket.samples.append(sample)
                bucket.refs.append(ref)
