"""A ``LightningDataModule`` whose checkpoints carry the loader position.

``Trainer.fit(model, datamodule=dm, ckpt_path=...)`` then resumes the data exactly: the resumed
run trains on the very batches the uninterrupted run would have, mid-epoch too. Needs PyTorch
Lightning (``pip install 'stoker[lightning]'``).

Example:
    >>> from stoker.integrations.lightning import StokerDataModule
    >>> dm = StokerDataModule("coco-wds", batch_size=8, num_workers=0)
    >>> train = dm.train_dataloader()  # what trainer.fit(model, datamodule=dm) iterates
    >>> len(train), next(iter(train)).image.shape
    (5, torch.Size([8, 3, 48, 64]))
    >>> state = dm.state_dict()  # what a checkpoint keeps
    >>> resumed = StokerDataModule("coco-wds", batch_size=8, num_workers=0)
    >>> resumed.load_state_dict(state)  # what trainer.fit(..., ckpt_path=...) does
    >>> next(iter(resumed.train_dataloader())).__key__ == next(iter(train)).__key__
    True

How: the training loader has a length (batches per pass), so Lightning does not prefetch
beyond the batch it trains on, and the position saved with a checkpoint is exactly after the
last batch trained on. The loader is also stateful in Lightning's sense, so a ``LightningModule``
that returns ``dm.train_dataloader()`` from its own hook resumes the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stoker.errors import MissingDependencyError

try:
    import pytorch_lightning as pl
except ImportError as error:  # pragma: no cover - depends on the environment
    raise MissingDependencyError.for_module(
        "pytorch_lightning", "stoker.integrations.lightning"
    ) from error

import torch
from lightning_utilities.core.apply_func import apply_to_collection

from stoker.api import get_savable_loader, get_train_dataset, get_val_dataset
from stoker.integrations.lightning_stats import StokerStatsCallback
from stoker.integrations.loaders import RestartingLoader, ResumableLoader
from stoker.integrations.topology import data_parallel_worker_config
from stoker.model.task import DefaultTaskEncoder, TaskEncoder
from stoker.model.worker_config import WorkerConfig
from stoker.runtime.stats_view import LoaderStats
from stoker.storage.options import LoaderOptions

__all__ = ["StokerDataModule", "StokerStatsCallback"]


class StokerDataModule(pl.LightningDataModule):
    """Training, validation and test loaders of a stoker dataset, resumable from checkpoints.

    Args:
        path: A prepared dataset folder, an indexed ``.jsonl`` file or a metadataset YAML.
        batch_size: Samples per batch on each rank.
        task_encoder: Encodes and batches training samples (None: ``DefaultTaskEncoder()``).
        val_task_encoder: For validation and test (None: ``task_encoder``).
        num_workers: Dataloader processes of the training loader.
        num_val_workers: Dataloader processes of the validation and test loaders (None: as
            ``num_workers``).
        shuffle_buffer_size: Shuffle window of the training loader.
        max_samples_per_sequence: Longest run of samples read from one shard.
        packing_buffer_size: Pack samples with the task encoder's packing hooks (None: off).
        val_limit: At most this many validation batches per pass (None: the whole split).
        worker_config: Topology to load with (None: the pure data-parallel rank, see
            :mod:`stoker.integrations.topology`, which is ``torch.distributed``'s rank under
            Lightning's DDP).
        pg_collection: Megatron process groups to take the data-parallel rank from.
        options: Read-ahead, batch slots, metadata cache and retry budget of the loaders
            (:class:`~stoker.LoaderOptions`; None: from the environment).
        log_stats_every_n_steps: Log the training loader's ``stats().flat()`` through the
            ``LightningModule``'s ``log_dict`` every this many steps (adds a
            :class:`StokerStatsCallback` to the trainer; None: off).
        log_stats_every: Seconds between two lines of the training loader's figures on the
            ``stoker`` logger (see ``get_loader``; None: off).
        worker_type: Where the loaders' workers run: ``"fork"``, ``"spawn"``, ``"thread"``,
            ``"main"`` (see ``docs/worker_types.md``; None: processes).
        **dataset_kwargs: Passed to ``get_train_dataset`` / ``get_val_dataset``
            (``virtual_workers``, ``subflavors``, ...).
    """

    def __init__(
        self,
        path: str,
        *,
        batch_size: int,
        task_encoder: TaskEncoder[Any, Any, Any, Any] | None = None,
        val_task_encoder: TaskEncoder[Any, Any, Any, Any] | None = None,
        num_workers: int = 2,
        num_val_workers: int | None = None,
        shuffle_buffer_size: int | None = 100,
        max_samples_per_sequence: int | None = 100,
        packing_buffer_size: int | None = None,
        val_limit: int | None = None,
        worker_config: WorkerConfig | None = None,
        pg_collection: Any = None,
        options: LoaderOptions | None = None,
        log_stats_every_n_steps: int | None = None,
        log_stats_every: float | None = None,
        worker_type: str | None = None,
        **dataset_kwargs: Any,
    ) -> None:
        super().__init__()
        self.path = path
        self.batch_size = batch_size
        self.task_encoder = task_encoder or DefaultTaskEncoder()
        self.val_task_encoder = val_task_encoder or self.task_encoder
        self.num_workers = num_workers
        self.num_val_workers = num_workers if num_val_workers is None else num_val_workers
        self.shuffle_buffer_size = shuffle_buffer_size
        self.max_samples_per_sequence = max_samples_per_sequence
        self.packing_buffer_size = packing_buffer_size
        self.val_limit = val_limit
        self.worker_config = worker_config
        self.pg_collection = pg_collection
        self.options = options
        self.dataset_kwargs = dataset_kwargs
        self.log_stats_every = log_stats_every
        self.worker_type = worker_type
        self._stats_callback = (
            None
            if log_stats_every_n_steps is None
            else StokerStatsCallback(log_stats_every_n_steps, datamodule=self)
        )
        self._train: ResumableLoader | None = None
        self._eval: dict[str, RestartingLoader] = {}
        self._pending_state: dict[str, Any] | None = None

    def _worker_config(self, num_workers: int) -> WorkerConfig:
        if self.worker_config is not None:
            return self.worker_config
        return data_parallel_worker_config(num_workers, pg_collection=self.pg_collection)

    def train_dataloader(self) -> ResumableLoader:
        """The training loader; built once, so that every epoch continues the stream."""
        if self._train is None:
            dataset = get_train_dataset(
                self.path,
                worker_config=self._worker_config(self.num_workers),
                batch_size=self.batch_size,
                shuffle_buffer_size=self.shuffle_buffer_size,
                max_samples_per_sequence=self.max_samples_per_sequence,
                packing_buffer_size=self.packing_buffer_size,
                task_encoder=self.task_encoder,
                **self.dataset_kwargs,
            )
            loader = get_savable_loader(
                dataset,
                options=self.options,
                log_stats_every=self.log_stats_every,
                worker_type=self.worker_type,
            )
            self._train = ResumableLoader(loader)
            if self._pending_state is not None:
                self._train.load_state_dict(self._pending_state)
                self._pending_state = None
        return self._train

    def setup(self, stage: str) -> None:
        """Add the stats callback (``log_stats_every_n_steps``) to the trainer, once."""
        trainer = getattr(self, "trainer", None)
        callback = self._stats_callback
        if callback is not None and trainer is not None and callback not in trainer.callbacks:
            trainer.callbacks.append(callback)

    def stats(self, *, reset: bool = False) -> LoaderStats | None:
        """The training loader's :meth:`~stoker.runtime.loader.Loader.stats` (None before
        it is built). ``dm.stats().flat()`` gives ``{"data/wait_frac": ...}`` for a logger."""
        return None if self._train is None else self._train.loader.stats(reset=reset)

    def val_dataloader(self) -> RestartingLoader:
        """The ``val`` split in order; every validation run is a full pass (or ``val_limit``)."""
        return self._eval_loader("val")

    def test_dataloader(self) -> RestartingLoader:
        """The ``test`` split in order."""
        return self._eval_loader("test")

    def _eval_loader(self, split: str) -> RestartingLoader:
        if split not in self._eval:
            dataset = get_val_dataset(
                self.path,
                split_part=split,
                worker_config=self._worker_config(self.num_val_workers),
                batch_size=self.batch_size,
                packing_buffer_size=self.packing_buffer_size,
                limit=self.val_limit,
                task_encoder=self.val_task_encoder,
                **self.dataset_kwargs,
            )
            loader = get_savable_loader(dataset, options=self.options, worker_type=self.worker_type)
            self._eval[split] = RestartingLoader(loader)
        return self._eval[split]

    def state_dict(self) -> dict[str, Any]:
        """``{"train": {"ranks": [...]}}``: the position of every data-parallel rank after the
        last batch trained on ({} before training). Lightning calls it on every rank."""
        if self._train is not None:
            return {"train": self._train.state_dict()}
        if self._pending_state is not None:
            return {"train": self._pending_state}
        return {}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Resume the training loader from a checkpoint's state (Lightning calls this)."""
        if not state_dict:
            return
        state = dict(state_dict.get("train", state_dict))
        if self._train is None:
            self._pending_state = state
        else:
            self._train.load_state_dict(state)

    def transfer_batch_to_device(
        self, batch: Any, device: torch.device, dataloader_idx: int
    ) -> Any:
        """Move the batch's tensors to ``device``.

        Lightning's default refuses batches that hold frozen dataclasses (a task encoder's
        own batch type may be one); stoker's ``SourceInfo`` is not one, so a plain stoker loader
        goes into ``Trainer.fit(model, train_dataloaders=loader)`` too.
        """
        blocking = device.type not in ("cuda", "xpu")
        return apply_to_collection(
            batch,
            torch.Tensor,
            lambda tensor: tensor.to(device, non_blocking=not blocking),
            allow_frozen=True,
        )

    def teardown(self, stage: str) -> None:
        """Stop the worker processes of every loader (they restart when iterated again)."""
        loaders: list[ResumableLoader | RestartingLoader] = list(self._eval.values())
        if self._train is not None:
            loaders.append(self._train)
        for loader in loaders:
            loader.close()
