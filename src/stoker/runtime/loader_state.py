"""The loader's save and restore methods (Energon's names), over the plain-data state of
:mod:`stoker.runtime.state`.

The loader's whole state is the last position of each stream it owns plus a few counters; these
methods turn it into plain data and back, on the same or another topology.
"""

from __future__ import annotations

from typing import Any

from stoker.errors import ConfigError
from stoker.pipeline.refs import Buffers, Position
from stoker.runtime import mix_change
from stoker.runtime import state as state_module
from stoker.runtime.state_schema import check_positions
from stoker.runtime.streams import Loadable
from stoker.storage.options import LoaderOptions


class LoaderState:
    """Save/restore for :class:`~stoker.runtime.loader.Loader` (a mixin: it owns the attributes)."""

    dataset: Loadable
    options: LoaderOptions
    streams: list[int]
    positions: dict[int, Position]
    buffers: dict[int, Buffers]
    #: Per stream, the references each source gave in the passes before this one.
    passed: dict[int, dict[str, int]]
    exhausted: set[int]
    #: What the last restore into a changed mix did (None: none did).
    mix_change: mix_change.MixChange | None = None
    t: int
    yielded: int
    epoch: int
    _finished: bool

    def _stop(self) -> None:
        raise NotImplementedError

    def samples_per_dataset(self, *, this_pass: bool = False) -> dict[str, int]:
        """References each data source has contributed so far on this rank: the realised blend,
        over every pass (``for`` loop over a finite loader) so far, or only in the current one.

        Counted from the positions of the batches handed out (samples a task encoder skipped or
        expanded count as one reference each). For a :class:`~stoker.MixBatchDataset`, the
        sources of all its datasets, counting what the sub-batches of its mixed batches took.

        Example:
            >>> import os
            >>> from stoker import get_loader, get_val_dataset
            >>> loader = get_loader(get_val_dataset("mix.yaml", worker_config=wc, batch_size=4))
            >>> for batch in loader:  # a whole pass over both datasets
            ...     pass
            >>> for step, batch in enumerate(loader):  # a second pass, stopped after 2 batches
            ...     if step == 1:
            ...         break
            >>> {os.path.basename(k): n for k, n in loader.samples_per_dataset().items()}
            {'coco-wds': 18, 'coyo-wds': 10}
            >>> this_pass = loader.samples_per_dataset(this_pass=True)
            >>> {os.path.basename(k): n for k, n in this_pass.items()}
            {'coco-wds': 8, 'coyo-wds': 0}
        """
        current = self.dataset.source_counts(self.positions, self.epoch)
        if this_pass:
            return current
        for counts in self.passed.values():
            for name, n in counts.items():
                current[name] = current.get(name, 0) + n
        return current

    def _end_pass(self) -> None:
        """Add what each stream gave this pass to :attr:`passed` (a new pass starts)."""
        for stream, position in self.positions.items():
            counts = self.passed.setdefault(stream, {})
            for name, n in self.dataset.source_counts({stream: position}, self.epoch).items():
                counts[name] = counts.get(name, 0) + n

    def can_restore_sample(self) -> bool:
        """Whether :meth:`restore_sample` can rebuild this loader's items from their keys."""
        check = getattr(self.dataset, "can_restore_sample", None)
        return bool(check()) if check is not None else False

    def restore_sample(self, restore_key: Any) -> Any:
        """The sample or batch whose ``__restore_key__`` is ``restore_key``, loaded again
        (Energon's method): read, decoded and encoded as the loader made it.

        Example:
            >>> batch = next(iter(loader))
            >>> again = loader.restore_sample(batch.__restore_key__)
            >>> again.__key__ == batch.__key__
            True
        """
        if not self.can_restore_sample():
            raise ConfigError(
                f"this loader's dataset ({type(self.dataset).__name__}) cannot restore samples.",
                hint="Packed samples, mixes, and map/batch functions not marked stateless "
                "cannot be rebuilt from a key; check loader.can_restore_sample() first.",
            )
        return self.dataset.restore_sample(restore_key)  # type: ignore[attr-defined]

    def save_state_rank(self) -> dict[str, Any]:
        """This rank's position after the last batch handed out: plain data, a few KB.

        Costs no round trip to the workers: every batch carried its stream's position.
        """
        identities = getattr(self.dataset, "mix_entries", None)
        origins = getattr(self.dataset, "blend_origins", None) or {}
        return state_module.make_state(
            fingerprint=self.dataset.fingerprint(),
            topology=self.dataset.topology(),
            epoch=self.epoch,
            t=self.t,
            yielded=self.yielded,
            finished=self._finished,
            exhausted=sorted(self.exhausted),
            streams={s: p.to_list() for s, p in self.positions.items()},
            buffers=self.buffers,
            passed=self.passed,
            datasets=identities() if identities is not None else None,
            origins={s: c for s, c in origins.items() if s in self.streams},
        )

    def restore_state_rank(
        self, state: dict[str, Any] | None, *, allow_mix_change: bool | None = None
    ) -> None:
        """Continue from ``state`` (saved by this rank, same world size; the number of workers
        may differ where it divides the state's virtual workers; the batch size may differ
        where it divides the samples consumed, see :func:`stoker.runtime.state.rebatch`).
        ``None`` (no state saved yet) leaves the loader at its start, as in Energon.

        ``allow_mix_change`` (default: ``LoaderOptions.allow_mix_change``): restore a state
        saved under another mix of datasets; each continues at its position, new ones start
        (:mod:`stoker.runtime.mix_change`)."""
        if state is None:
            return
        state = state_module.check_state(state)
        self._adopt_virtual_workers(state)
        state = state_module.rebatch(state, self.dataset.fingerprint())
        state = self._reconcile_mix(state, allow_mix_change)
        state_module.check_fingerprint(state, self.dataset.fingerprint())
        check_positions(state, self.dataset.position_size())
        saved, current = state["topology"], self.dataset.topology()
        if (saved["world_size"], saved["rank"]) != (current.world_size, current.rank):
            raise ConfigError(
                f"the state is rank {saved['rank']} of {saved['world_size']}, this loader is rank "
                f"{current.rank} of {current.world_size}.",
                hint="To resume on another number of ranks, pass every rank's state to "
                "restore_state_global().",
            )
        self._apply(state_module.for_rank(state_module.merge_one(state), current))

    def save_state_global(self, global_dst_rank: int = 0) -> list[dict[str, Any]] | None:
        """Gather every rank's state on ``global_dst_rank`` (None on the other ranks)."""
        group = self.dataset.worker_config.data_parallel_group
        return gather_states(self.save_state_rank(), global_dst_rank, group)

    def restore_state_global(
        self,
        states: list[dict[str, Any]] | None,
        *,
        src_rank: int | None = None,
        allow_mix_change: bool | None = None,
    ) -> None:
        """Continue from the states of all ranks, on this or another topology.

        Each rank passes the full list, or only ``src_rank`` does and it is broadcast. Without
        ``torch.distributed``, the full list restores this rank's share without communication.
        ``allow_mix_change``: as in :meth:`restore_state_rank`.
        """
        if src_rank is not None:
            import torch.distributed as dist

            box = [states]
            dist.broadcast_object_list(
                box, src=src_rank, group=self.dataset.worker_config.data_parallel_group
            )
            states = box[0]
        if states is None:
            raise ConfigError("restore_state_global needs the states (or src_rank).")
        merged = state_module.merge(states)
        self._adopt_virtual_workers(merged)
        merged = state_module.rebatch(merged, self.dataset.fingerprint())
        merged = self._reconcile_mix(merged, allow_mix_change)
        state_module.check_fingerprint(merged, self.dataset.fingerprint())
        check_positions(merged, self.dataset.position_size())
        self._apply(state_module.for_rank(merged, self.dataset.topology()))

    def state_dict(self) -> dict[str, Any]:
        """Same as :meth:`save_state_rank` (Lightning / torchdata style)."""
        return self.save_state_rank()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Same as :meth:`restore_state_rank`."""
        self.restore_state_rank(state)

    def _adopt_virtual_workers(self, state: dict[str, Any]) -> None:
        """Run over the state's number of streams, unless the caller chose one (then the
        fingerprint check reports the difference)."""
        saved = int(state["topology"]["virtual_workers"])
        if saved == self.dataset.topology().virtual_workers:
            return
        try:
            adopted = self.dataset.with_virtual_workers(saved)
        except ConfigError as e:
            topology = self.dataset.topology()
            raise ConfigError(
                f"the state was saved over virtual_workers={saved} streams; this loader's "
                f"{topology.world_size} rank(s) x {max(topology.num_workers, 1)} worker(s) do "
                f"not divide {saved}.",
                hint="Resume with a number of workers (x ranks) that divides it; to resume on "
                "more, start runs with get_*_dataset(..., virtual_workers=N), N with many "
                "divisors.",
            ) from e
        if adopted is not None:
            self._stop()
            self.dataset = adopted
            self.streams = adopted.topology().rank_streams().tolist()

    def _reconcile_mix(self, state: dict[str, Any], allow: bool | None) -> dict[str, Any]:
        """Match the state's datasets to this loader's by identity (a changed mix only where
        allowed): the loader's dataset adopts their plan keys and blend origins."""
        if not hasattr(self.dataset, "mix_entries"):
            return state
        if allow is None:
            allow = self.options.allow_mix_change
        dataset, state, change = mix_change.reconcile(
            state,
            self.dataset,  # type: ignore[arg-type]
            allow=allow,
        )
        if change is not None:
            self.mix_change = change
        if dataset is not self.dataset:
            self._stop()
            self.dataset = dataset
        return state

    def _apply(self, state: dict[str, Any]) -> None:
        self._stop()
        self.positions = {int(s): Position.from_list(p) for s, p in state["streams"].items()}
        self.buffers = {int(s): b for s, b in state.get("buffers", {}).items()}
        self.passed = {int(s): dict(c) for s, c in state.get("passed", {}).items()}
        self.exhausted = set(state["exhausted"])
        self.t, self.yielded, self.epoch = state["t"], state["yielded"], state["epoch"]
        self._finished = state["finished"]


def gather_states(
    state: dict[str, Any], global_dst_rank: int, group: Any
) -> list[dict[str, Any]] | None:
    """Every rank's ``state`` of the data-parallel ``group``, on ``global_dst_rank`` (None on
    the other ranks); ``[state]`` without ``torch.distributed``."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return [state]
    gathered: list[Any] | None = None
    if dist.get_rank() == global_dst_rank:
        gathered = [None] * dist.get_world_size(group)
    dist.gather_object(state, gathered, dst=global_dst_rank, group=group)
    return gathered
