"""Sequence packing: buffer encoded samples, let the task encoder pick groups, pack each group.

Each encoded sample (``preencode_sample``'s outputs where it is overridden, see
:func:`stoker.model.task.sample_hooks`) goes into a buffer. When the buffer holds
``buffer_size`` samples, ``select_samples_to_pack(buffer)`` returns groups of them; each group goes
through ``postencode_sample`` (per member) and ``pack_selected_samples`` into packed sample(s).
Samples no group takes stay in the buffer for the next round: none is dropped. It may instead
return a :class:`~stoker.pipeline.pack_output.PackedSamplesOutput`: then the samples it pushes
back lead the buffer in the order given, and those neither packed nor pushed back are dropped, as
in Energon (logged and counted). A round that takes
nothing (no group, or ``SkipSample``) from a full buffer is tried again with one more sample; too
many such rounds in a row stop the stream with an error naming the hook
(:mod:`stoker.pipeline.pack_bounds`), so the buffer never grows without bound. At the end of a
finite stream the rest is selected in further rounds; what a round then leaves out for good is
logged with its key and source and counted (``ErrorTracker.skipped``).

With packing groups (:mod:`stoker.pipeline.pack_groups`) each group has a buffer of its own:
a sample goes into its dataset's group's buffer, which is selected from when it is full; a group
whose size is None is not packed (each sample passes through ``postencode_sample`` alone).

A packed sample that has a ``__restore_key__`` gets ``("PackingDataset", output, *member keys)``.

State: the references of the buffered samples and of the groups selected but not yet packed, so a
restore re-reads exactly those (:meth:`Packer.state`). They are encoded once per round (one short
string, :func:`~stoker.pipeline.refs.encode_groups`), not once per batch: the batches of a round
carry the same string and a count of the groups already packed.
"""

from __future__ import annotations

import collections
import itertools
import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from stoker.errors import StokerError
from stoker.pipeline.batching import ELIDED, batch_elided, restore_key_of, set_restore_key
from stoker.pipeline.hook_index import BatchSlots, HookCall
from stoker.pipeline.hooks import iter_hook
from stoker.pipeline.node import Node, NodeState, nested
from stoker.pipeline.pack_bounds import stall_limit, stalled_error
from stoker.pipeline.pack_groups import PackingGroups
from stoker.pipeline.pack_output import NOT_PUSHED_BACK, split_selection
from stoker.pipeline.pack_partial import member_key, slices_of, wrap
from stoker.pipeline.pack_selection import Entry, apply_selection
from stoker.pipeline.pack_stats import count_selection
from stoker.pipeline.refs import Ref, RefSource, chunks, decode_groups, encode_groups, pick
from stoker.pipeline.sample_failure import SkipSample, describe_sample
from stoker.pipeline.seeds import get_skip_safe
from stoker.pipeline.skip_policy import ErrorTracker
from stoker.pipeline.stage_clock import PACK

if TYPE_CHECKING:
    from stoker.model.task import TaskEncoder
    from stoker.pipeline.refs import Position

logger = logging.getLogger("stoker")

#: A packed sample's ``__restore_key__``: ``(PACK_KEY, output of pack_selected_samples,
#: *the members' restore keys)``, set where the packed sample has such a field or key.
PACK_KEY = "PackingDataset"

#: A buffered sample's reference: the upstream reference plus 0 (stoker states before the
#: stream applied ``preencode_sample`` held which of its outputs the sample was here).
_MEMBER = 4

#: Skip reasons: a sample no selection took before the stream ended; a sample in the buffer
#: when ``select_samples_to_pack`` failed (under a skipping policy, the buffer is dropped).
NEVER_PACKED = "select_samples_to_pack: never packed"
DROPPED = "select_samples_to_pack: dropped with the buffer"


class Packer(RefSource):
    """The packed samples of one upstream node, with the reading position after each (see
    module); its part of the state is ``"pack"``."""

    name = "pack"

    def __init__(
        self,
        encoder: TaskEncoder[Any, Any, Any, Any],
        buffer_size: int,
        upstream: RefSource,
        tracker: ErrorTracker,
        slots: BatchSlots | None = None,
        groups: PackingGroups | None = None,
    ) -> None:
        if buffer_size < 1:
            raise StokerError(f"{buffer_size=} must be >= 1.")
        super().__init__()
        self.encoder = encoder
        #: Per packing group, its buffer size (None: not packed); one group without groups.
        self.sizes = groups.sizes if groups is not None else (buffer_size,)
        self._of_dataset = groups.of_dataset if groups is not None else None
        self._labels = (
            [groups.label(g) for g in range(len(groups.sizes))]
            if groups is not None and groups.named
            else None
        )
        self.at = 0  # the group whose buffer ``buffer`` is
        self.upstream, self.tracker = upstream, tracker
        self.slots = slots or BatchSlots()
        self.stall_limit = stall_limit(encoder)
        #: Whether a pack another worker hands out is left unpacked (:func:`batch_elided`).
        self._elides = batch_elided(encoder) and get_skip_safe(encoder.pack_selected_samples)
        #: Samples that no selection took before the stream ended (reported, counted).
        self.left_over = 0
        #: Samples pushed back into the buffer by a ``PackedSamplesOutput`` (all rounds).
        self.pushed_back = 0
        self._reset({})

    def _reset(self, state: NodeState) -> None:
        self.upstream.reset(state)
        self.saved: dict[str, Any] | None = state.get(self.name)
        self.buffers: list[list[Entry]] = [[] for _ in self.sizes]
        self.groups: collections.deque[list[Entry]] = collections.deque()
        self.used = 0  # outputs of the first group already handed out
        self.position = self.upstream.position
        self.stalls = [0] * len(self.sizes)  # rounds in a row that selected nothing (per buffer)
        self._held: str | None = None  # groups then buffer, encoded when first asked for
        self._slices: list[list[Any]] = []  # their partial samples' slices (pack_partial)
        self._popped = 0  # groups of ``_held`` packed since

    def _upstreams(self) -> tuple[Node[Any], ...]:
        return (self.upstream,)

    @property
    def buffer(self) -> list[Entry]:
        """The buffer of the current packing group (:attr:`at`)."""
        return self.buffers[self.at]

    @buffer.setter
    def buffer(self, entries: list[Entry]) -> None:
        self.buffers[self.at] = entries

    @property
    def size(self) -> int | None:
        """The current group's buffer size (None: its samples are not packed)."""
        return self.sizes[self.at]

    def _group_of(self, ref: Ref) -> int:
        """The packing group of the sample at (member or upstream) reference ``ref``."""
        return 0 if self._of_dataset is None else self._of_dataset[ref[0]]

    def state(self) -> NodeState:
        """The upstream's state, and what this stage holds under ``"pack"`` (left out when
        empty).

        ``{"refs": text, "popped": k, "used": n}``: ``text`` encodes the selected groups and then
        the buffer (:func:`~stoker.pipeline.refs.encode_groups`, 4 ints per sample); the first
        ``k`` groups were packed since, ``n`` outputs of the next one handed out. The text is made
        once per round and shared by the batches of the round.
        """
        return nested(self.upstream, self.name, self._own_state())

    def _own_state(self) -> dict[str, Any] | None:
        if not any(self.buffers) and not self.groups:
            return None
        if self._held is None:  # the buffers one after the other (a ref tells its group)
            stages = [*self.groups, [entry for buffer in self.buffers for entry in buffer]]
            self._held = encode_groups([[ref for _, ref in stage] for stage in stages])
            self._slices = slices_of([[sample for sample, _ in stage] for stage in stages])
            self._popped = 0
        out = {"refs": self._held, "popped": self._popped, "used": self.used}
        if self._slices:  # partial samples: [[stage, place, slice], ...]
            out["slices"] = self._slices
        return out

    def _run(self) -> Iterator[tuple[Any, Position, Ref]]:
        """Packed samples, the stream position after each, and their reference.

        A packed sample's reference is ``(output, *member references)``.
        """
        self._restore()
        yield from self._drain()
        for sample, position, ref in self.upstream.items():
            self.position = position
            self.at = self._group_of(ref)
            size = self.size
            if size is None:  # a group that is not packed: the sample alone
                self.groups.append([(sample, (*ref, 0))])
                self._held = None
                yield from self._drain()
            elif self._add(sample, ref) and len(self.buffer) >= size:
                self._select()
                yield from self._drain()
        for group in range(len(self.buffers)):
            self.at = group
            while self.buffer:  # the stream ended: select from what is left
                self._select(final=True)
                if not self.groups:
                    break
                yield from self._drain()
            self._report_left_over()

    def where(self, ref: Ref) -> str:
        members = chunks(ref[1:], _MEMBER)
        return "a pack of: " + "; ".join(self.upstream.where(m[:-1]) for m in members)

    def reread(self, refs: Sequence[Ref]) -> list[Any]:
        """The packed samples at ``refs``, re-read and packed again."""
        members = [chunks(ref[1:], _MEMBER) for ref in refs]
        samples = iter(self._reread_members([m for group in members for m in group]))
        out = []
        for ref, group in zip(refs, members, strict=True):
            packed = self.sizes[self._group_of(group[0])] is not None
            outputs = self._pack([next(samples) for _ in group], strict=True, packed=packed)
            out.append(pick(outputs, ref[0], "pack_selected_samples"))
        return out

    # --- stages -------------------------------------------------------------------------------

    def _add(self, sample: Any, ref: Ref) -> bool:
        """Put ``sample`` into the buffer; whether anything was added."""
        self.buffer.append((sample, (*ref, 0)))
        self._held = None
        return True

    def _select(self, *, final: bool = False) -> None:
        """One round: move the groups the task encoder selects from the buffer to ``groups``.

        A round over a full buffer that takes nothing counts towards :attr:`stall_limit`
        (not at the end of the stream, ``final``: there the rounds stop at the first such).
        """
        taken = self._take(*self._groups())
        if final or taken or not self.buffer:  # (a failed selection's buffer was dropped)
            self.stalls[self.at] = 0
            return
        self.stalls[self.at] += 1
        if self.stalls[self.at] >= self.stall_limit:
            waited = self.upstream.where(self.buffer[0][1][:-1])
            size = self.sizes[self.at] or 0
            raise stalled_error(self.stalls[self.at], len(self.buffer), size, waited)

    def _groups(self) -> tuple[list[Any], list[Any] | None]:
        """The groups ``select_samples_to_pack`` returns for the buffer (none on SkipSample),
        and the samples it pushes back (None: it returned a plain list of groups)."""
        samples = [sample for sample, _ in self.buffer]
        with HookCall(self.slots.batch_index(), PACK):
            try:
                return split_selection(self.encoder.select_samples_to_pack(samples))
            except SkipSample:  # Energon skips the buffer; here it selects nothing this round
                return [], None
            except Exception as e:  # raises unless the policy skips: then the buffer is dropped
                self.tracker.failed(e, samples, "select_samples_to_pack")
                for sample in samples:
                    self.tracker.record(DROPPED, sample)
                self.buffer = []
                self._held = None
                return [], None

    def _take(self, groups: list[Any], pushback: list[Any] | None) -> int:
        """Move ``groups`` (of buffered samples) from the buffer to ``self.groups``; how many
        samples they took. With ``pushback`` (a ``PackedSamplesOutput``), the buffer becomes the
        pushed-back samples in that order; the others are dropped, logged and counted (see
        :mod:`stoker.pipeline.pack_selection`)."""
        chosen = apply_selection(self.buffer, groups, pushback)
        self.groups.extend(chosen.groups)
        label = None if self._labels is None else self._labels[self.at]
        count_selection(self.encoder, groups, chosen.pushed_back, label)
        for entry in chosen.dropped:
            self._drop(entry)
        self.buffer = chosen.buffer
        self.pushed_back += chosen.pushed_back
        self._held = None
        return chosen.taken

    def _drop(self, entry: Entry) -> None:
        sample, ref = entry
        logger.warning(
            "packing: select_samples_to_pack returned a PackedSamplesOutput that neither packs "
            "nor pushes back sample %r (%s); it is dropped, as in Energon. Push it back to keep "
            "it.",
            describe_sample(sample)[0],
            self.upstream.where(ref[:-1]),
        )
        self.tracker.record(NOT_PUSHED_BACK, sample)

    def _drain(self) -> Iterator[tuple[Any, Position, Ref]]:
        """Pack the selected groups in order; the state stays exact at every yield."""
        while self.groups:
            group = self.groups[0]
            packed = self.sizes[self._group_of(group[0][1])] is not None
            outputs = self._pack([sample for sample, _ in group], strict=False, packed=packed)
            members = tuple(itertools.chain.from_iterable(r for _, r in group))
            for m in range(self.used, len(outputs)):
                if m == len(outputs) - 1:  # the group is done before its last output leaves
                    self._pop_group()
                else:
                    self.used = m + 1
                yield outputs[m], self.position, (m, *members)
            if self.groups and self.groups[0] is group:  # it gave no (more) outputs
                self._pop_group()

    def _pop_group(self) -> None:
        self.groups.popleft()
        self.used = 0
        self._popped += 1

    def _pack(self, members: list[Any], *, strict: bool, packed: bool = True) -> list[Any]:
        """``postencode_sample`` on each member, then ``pack_selected_samples`` on the group
        (not ``packed``: a sample of a group that is not packed, only ``postencode_sample``)."""
        post = self.encoder.postencode_sample
        elide = self.slots.skipping and not strict and packed and self._elides
        if elide and get_skip_safe(post):  # another worker's pack (Energon's #236): not made
            return [ELIDED]
        made = [(m, self._call_hook(post, m, "postencode_sample", strict)) for m in members]
        encoded = [out for _, outs in made for out in outs]
        if not encoded or not packed:
            return encoded
        if elide:
            return [ELIDED]
        outputs = self._call_hook(
            self.encoder.pack_selected_samples, encoded, "pack_selected_samples", strict
        )
        keys = [member_key(m, restore_key_of(out)) for m, outs in made for out in outs]
        for output, sample in enumerate(outputs):  # where the pack has one (as Energon)
            set_restore_key(sample, (PACK_KEY, output, *keys))
        return outputs

    def _call_hook(self, hook: Any, value: Any, stage: str, strict: bool = False) -> list[Any]:
        """A hook's outputs; a failure is the tracker's to raise or skip (strict: raise)."""
        tracker = None if strict else self.tracker
        with HookCall(self.slots.batch_index(), PACK):
            try:
                return list(iter_hook(hook, value, stage=stage, tracker=tracker))
            except Exception as e:
                if tracker is None:
                    raise
                tracker.failed(e, value[0] if isinstance(value, list) else value, stage)
                return []

    # --- restore --------------------------------------------------------------------------------

    def _restore(self) -> None:
        state, self.saved = self.saved, None
        if not state:
            return
        parts: dict[tuple[int, int], Any] = {}
        if "refs" in state:  # one encoded string (see state())
            *groups, buffer = decode_groups(state["refs"])
            popped = int(state["popped"])
            parts = {(s - popped, p): part for s, p, part in state.get("slices", ())}
            groups = groups[popped:]
        else:  # states saved before: flat lists of ints
            buffer = chunks(state["buffer"], _MEMBER)
            groups = [chunks(group, _MEMBER) for group in state["groups"]]
        refs = buffer + [ref for group in groups for ref in group]
        samples = iter(self._reread_members(refs))

        def at(stage: int, place: int) -> Any:
            part = parts.get((stage, place))
            return next(samples) if part is None else wrap(next(samples), part)

        for p, ref in enumerate(buffer):  # each back into its group's buffer, in order
            self.buffers[self._group_of(ref)].append((at(len(groups), p), ref))
        self.groups = collections.deque(
            [(at(s, p), ref) for p, ref in enumerate(g)] for s, g in enumerate(groups)
        )
        self.used = int(state["used"])

    def _reread_members(self, refs: Sequence[Ref]) -> list[Any]:
        """Buffered samples by member reference, re-read upstream."""
        upstream_refs = sorted({ref[:-1] for ref in refs})
        read = dict(zip(upstream_refs, self.upstream.reread(upstream_refs), strict=True))
        return [pick([read[ref[:-1]]], ref[-1], "the packing buffer") for ref in refs]

    def _report_left_over(self) -> None:
        for sample, ref in self.buffer:
            key, _ = describe_sample(sample)
            logger.warning(
                "packing: sample %r (%s) was never selected by select_samples_to_pack before "
                "the stream ended; it is left out of this pass.",
                key,
                self.upstream.where(ref[:-1]),
            )
            self.tracker.record(NEVER_PACKED, sample)
        self.left_over += len(self.buffer)
        self.buffer = []
