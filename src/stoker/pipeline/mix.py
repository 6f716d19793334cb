"""Mixing whole batches: one stream's batches drawn from sub-datasets by weight, then mixed.

Each mixed batch is ``mix_fn([b_1, ..., b_n])``: ``n`` sub-batches, each taken whole from the same
stream of one sub-dataset. Which sub-dataset gives the ``k``-th sub-batch is the weighted blend
schedule (:func:`stoker.plan.weighted_choices`) over the counts of sub-batches taken so far, so the
choices are a pure function of those counts. A sub-dataset whose stream runs out (``repeat=False``,
or none of its samples in this stream) drops out; the others go on with their weights renormalised.

The position of a mixed stream, one flat list of ints, is per sub-dataset its own stream position
(``[*counts, skip]``), the sub-batches taken from it and whether it ran out, then the outputs of the
current group already used (``mix_fn`` may be a generator)::

    [*sub_0 position, taken_0, done_0, *sub_1 position, taken_1, done_1, ..., skip]

What the sub-datasets' packing/grouping stages hold is saved per sub-dataset: ``{"0": {...}}``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from stoker.errors import ConfigError, StokerError
from stoker.pipeline.node import Node, NodeState
from stoker.pipeline.refs import Buffers, Position
from stoker.pipeline.sample_failure import SkipSample
from stoker.plan import weighted_choices
from stoker.plan.scheduled_blend import StreamRates, scheduled_choices
from stoker.plan.weights import BlendWeights, Weight, WeightSchedule, weights_at

logger = logging.getLogger("stoker")

#: Choices computed at a time (any size gives the same sequence).
_BLOCK = 256

MixFn = Callable[[list[Any]], Any]
SubBatches = Iterator[tuple[Any, Position, Buffers | None]]


@dataclass(frozen=True)
class SubState:
    """One sub-dataset's part of a mixed stream's position."""

    position: Position
    held: Buffers | None = None
    taken: int = 0
    done: bool = False


def encode(subs: Sequence[SubState], skip: int) -> tuple[Position, Buffers | None]:
    """A mixed stream's position (the flat layout of the module docstring) and buffers."""
    flat: list[int] = []
    for sub in subs:
        flat += [*sub.position.to_list(), sub.taken, int(sub.done)]
    held = {str(d): sub.held for d, sub in enumerate(subs) if sub.held}
    return Position(tuple(flat), skip), held or None


def decode(
    position: Position, buffers: Buffers | None, sizes: Sequence[int]
) -> tuple[list[SubState], int]:
    """The sub-states and skip of :func:`encode`; ``sizes[d]`` = sources of sub-dataset ``d``."""
    flat, buffers = list(position.counts), buffers or {}
    if len(flat) != sum(n + 3 for n in sizes):
        raise ConfigError(
            f"a saved stream position has {len(flat) + 1} values, a mix of datasets with "
            f"{list(sizes)} sources needs {sum(n + 3 for n in sizes) + 1}.",
            hint="Restore with the same MixBatchDataset (datasets in the same order).",
        )
    subs, at = [], 0
    for d, n in enumerate(sizes):
        part = flat[at : at + n + 3]
        subs.append(SubState(Position.from_list(part[: n + 1]), buffers.get(str(d)),
                             part[n + 1], bool(part[n + 2])))  # fmt: skip
        at += n + 3
    return subs, position.skip


@dataclass(frozen=True)
class MixSpec:
    """How a stream's sub-batches are mixed (picklable)."""

    weights: tuple[Weight, ...]
    batch_size: int
    mix_fn: MixFn
    seed: int
    stream: int
    virtual_workers: int = 1


class MixStream(Node[tuple[Any, Position, "Buffers | None"]]):
    """The mixed batches of one stream, each with the position after it (a node over its
    sub-datasets' batch nodes; its part of the state is ``"mix"``: the mixed position as a list
    and what the sub-datasets hold, as :func:`encode` makes them)."""

    name = "mix"

    def __init__(
        self, spec: MixSpec, subs: Sequence[SubBatches], start: Sequence[SubState], skip: int
    ) -> None:
        super().__init__()
        self.spec, self.subs = spec, list(subs)
        self.first, self.first_skip = list(start), skip
        self._reset({})

    def _reset(self, state: NodeState) -> None:
        saved = state.get(self.name)
        if saved is None:  # where the subs were opened
            self.at, self.skip = list(self.first), self.first_skip  # per sub-dataset
        else:
            position, held = Position.from_list(saved["position"]), saved.get("held")
            sizes = [len(sub.position.counts) for sub in self.first]
            self.at, self.skip = decode(position, held, sizes)
            for sub, part in zip(self.subs, self.at, strict=True):
                if not isinstance(sub, Node):
                    raise StokerError(
                        "internal: a mixed stream resets only over sub-streams that are nodes."
                    )
                sub.reset({"stream": part.position, **(part.held or {})})
        self._choices: list[int] = []
        self._last = encode(self.at, self.skip)
        self._scheduled_mix = any(isinstance(w, WeightSchedule) for w in self.spec.weights)
        self._rates: StreamRates | None = None  # made at the first choice (:meth:`_scheduled`)

    def _upstreams(self) -> list[Node[Any]]:
        return [sub for sub in self.subs if isinstance(sub, Node)]

    def state(self) -> NodeState:
        """``{"mix": {"position": [...], "held": {...} or None}}`` after the last output."""
        position, held = self._last
        return {self.name: {"position": position.to_list(), "held": held}}

    def _run(self) -> Iterator[tuple[Any, Position, Buffers | None]]:
        while True:
            before = list(self.at)
            group = self._take_group()
            if not group:
                return
            outputs = self._mix(group)
            for used, output in enumerate(outputs, start=1):
                if used > self.skip:
                    last = used == len(outputs)  # resume after the group, else inside it
                    self._last = encode(self.at if last else before, 0 if last else used)
                    yield (output, *self._last)
            self.skip = 0

    def _mix(self, group: list[Any]) -> list[Any]:
        """The outputs of ``mix_fn`` on a group; a :class:`SkipSample` ends them (even inside
        a generator: the outputs before it are kept)."""
        outputs: list[Any] = []
        try:
            mixed = self.spec.mix_fn(group)
            if not isinstance(mixed, Iterator):
                return [mixed]
            for output in mixed:
                outputs.append(output)
        except SkipSample:  # deliberate: logged for debugging, never an error
            logger.debug("batch_mix_fn skipped a group of %d sub-batches (stream %d) after %d "
                         "output(s)", len(group), self.spec.stream, len(outputs))  # fmt: skip
        return outputs

    def _take_group(self) -> list[Any]:
        group: list[Any] = []
        while len(group) < self.spec.batch_size:
            d = self._next_choice()
            if d is None:
                break
            try:
                batch, position, held = next(self.subs[d])
            except StopIteration:
                self.at[d] = replace(self.at[d], done=True)
                self._choices = []  # the others' weights change
                continue
            self.at[d] = SubState(position, held, self.at[d].taken + 1)
            group.append(batch)
        return group

    def _next_choice(self) -> int | None:
        if not self._choices:
            live = [d for d, sub in enumerate(self.at) if not sub.done]
            if not live:
                return None
            if self._scheduled_mix:
                self._choices = self._scheduled(live)[::-1]
                return self._choices.pop()
            picked = weighted_choices(
                [self.at[d].taken for d in live],
                weights_at([self.spec.weights[d] for d in live], [0])[:, 0],  # all constant
                _BLOCK,
                seed=self.spec.seed,
                stream=self.spec.stream,
            )
            self._choices = np.asarray(live, dtype=np.int64)[picked].tolist()[::-1]
        return self._choices.pop()

    def _scheduled(self, live: list[int]) -> list[int]:
        """The next choices under weight schedules (the group ``k // batch_size`` of the stream
        is global batch ``(k // batch_size) * V + stream``, :mod:`stoker.plan.scheduled_blend`)."""
        rates = self._rates
        if rates is None or rates.live.tolist() != [d in live for d in range(len(self.at))]:
            spec = self.spec
            rates = self._rates = StreamRates(
                BlendWeights(tuple(((spec.weights, d),) for d in range(len(spec.weights)))),
                [d in live for d in range(len(self.at))],
                batch_size=spec.batch_size, virtual_workers=spec.virtual_workers,
                stream=spec.stream,
            )  # fmt: skip
        taken = [sub.taken for sub in self.at]
        picked: list[int] = scheduled_choices(taken, _BLOCK, rates, seed=self.spec.seed).tolist()
        return picked
