"""A Megatron-style multimodal data module: Megatron-Bridge's ``EnergonMultiModalDataModule``.

Same constructor (current Bridge's arguments, and Bridge 0.3's with ``image_processor`` and
``global_batch_size``), methods, attributes and loader wrapper as Megatron-Bridge's Energon data
module, so the switch is one import::

    # from megatron.bridge.data.energon.base_energon_datamodule import EnergonMultiModalDataModule
    from stoker.integrations.megatron import EnergonMultiModalDataModule

    data = EnergonMultiModalDataModule(path, tokenizer, seq_length=4096, micro_batch_size=2,
                                       num_workers=4, pg_collection=pg_collection)
    train_iter = data.train_dataloader()        # endless: next(train_iter) per micro-batch
    state = train_iter.save_state()             # put it into the checkpoint of this rank
    train_iter.restore_state(checkpoint)        # the state, or a checkpoint dict holding it

The loaders run on the pure data-parallel rank (:mod:`stoker.integrations.topology`), so
context-parallel peers receive identical micro-batches. megatron-core itself is optional.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import torch

from stoker.api import get_savable_loader, get_train_dataset, get_val_dataset
from stoker.errors import ConfigError
from stoker.integrations.bridge_args import CURRENT, bind_bridge_arguments
from stoker.integrations.loaders import (
    EnergonDataloader,
    StokerDataloader,
    cyclic_iter,
    find_loader_state,
)
from stoker.integrations.task_encoder import MultiModalSampleConfig, MultiModalTaskEncoder
from stoker.integrations.topology import data_parallel_worker_config
from stoker.model.task import TaskEncoder
from stoker.runtime.dataset import LoaderDataset
from stoker.runtime.loader import Loader
from stoker.runtime.stats_view import LoaderStats
from stoker.storage.options import LoaderOptions

__all__ = [
    "EnergonDataloader",
    "EnergonMultiModalDataModule",
    "MultiModalDataModule",
    "StokerDataloader",
    "cyclic_iter",
]


class MultiModalDataModule:
    """Train and validation loaders for a multimodal dataset, as Megatron-Bridge builds them.

    Takes current Bridge's arguments, and Bridge 0.3's (``image_processor`` third and
    ``global_batch_size`` sixth), by keyword or by position (see
    :mod:`stoker.integrations.bridge_args`):

    Args:
        path: A prepared dataset folder or a metadataset YAML.
        tokenizer: Tokenizes the text of the default task encoder.
        seq_length: Tokens per sequence of the default task encoder.
        micro_batch_size: Sequences per micro-batch (per data-parallel rank).
        num_workers: Dataloader processes of the training loader.
        num_val_workers: Dataloader processes of the validation loader (None: ``num_workers``).
        pin_memory: Pin batches in page-locked memory (only where CUDA is available).
        shuffle_buffer_size: Shuffle window of the training loader.
        max_samples_per_sequence: Longest run of samples read from one shard.
        multimodal_sample_config: :class:`MultiModalSampleConfig` of the default task encoder.
        task_encoder: Your own task encoder (None: :class:`MultiModalTaskEncoder`).
        decoder_seq_length: Kept for encoder-decoder models (as in Bridge).
        packing_buffer_size: Pack sequences from a buffer of this many (None: no packing).
        validation_task_encoder: Task encoder of the validation split (None: ``task_encoder``).
        pg_collection: Megatron ``ProcessGroupCollection`` to take the data-parallel rank from
            (None: Megatron's ``parallel_state`` if initialised, else ``torch.distributed``).
        image_processor: Processes the images of the default task encoder (Bridge 0.3's third
            parameter; keyword only in current Bridge's order).
        global_batch_size: Sequences per optimizer step over all ranks, kept for the trainer
            (Bridge 0.3's sixth parameter; keyword only in current Bridge's order).
        options: stoker's :class:`~stoker.LoaderOptions` for both loaders (read-ahead, batch
            slots, metadata cache, retry budget; keyword only; None: from the environment).
        log_stats_every: Seconds between two lines of the training loader's figures on the
            ``stoker`` logger (keyword only; None: off). :meth:`stats` gives them to log yourself.
        **kwargs: Passed to ``get_train_dataset`` / ``get_val_dataset`` (e.g. ``virtual_workers``).

    Attributes, as Bridge documents them: ``init_global_step`` (0; the trainer sets it when it
    resumes), ``train_dataloader_object`` / ``val_dataloader_object`` (the stoker
    :class:`~stoker.runtime.loader.Loader` under each iterator, None until built).

    Example:
        >>> data = MultiModalDataModule("coco-wds", tokenizer, seq_length=64,
        ...                             micro_batch_size=2, num_workers=0,
        ...                             image_processor=image_processor)
        >>> train_iter, valid_iter = data.build()
        >>> next(train_iter).tokens.shape
        torch.Size([2, 64])
    """

    __signature__: ClassVar[inspect.Signature] = CURRENT

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        values, extra = bind_bridge_arguments(args, kwargs)
        self.path: str = values["path"]
        self.tokenizer: Any = values["tokenizer"]
        self.image_processor: Any = values["image_processor"]
        self.seq_length: int = values["seq_length"]
        self.decoder_seq_length: int | None = values["decoder_seq_length"]
        self.micro_batch_size: int = values["micro_batch_size"]
        self.global_batch_size: int | None = values["global_batch_size"]
        global_batch_size = self.global_batch_size
        if self.micro_batch_size < 1 or (global_batch_size is not None and global_batch_size < 1):
            raise ConfigError(
                f"micro_batch_size={self.micro_batch_size} and "
                f"global_batch_size={self.global_batch_size} must be >= 1."
            )
        self.num_workers: int = values["num_workers"]
        num_val_workers = values["num_val_workers"]
        self.num_val_workers: int = self.num_workers if num_val_workers is None else num_val_workers
        self.pin_memory: bool = values["pin_memory"]
        self.shuffle_buffer_size: int = values["shuffle_buffer_size"]
        self.max_samples_per_sequence: int | None = values["max_samples_per_sequence"]
        self.multimodal_sample_config: MultiModalSampleConfig = (
            values["multimodal_sample_config"] or MultiModalSampleConfig()
        )
        self.task_encoder: TaskEncoder[Any, Any, Any, Any] = values[
            "task_encoder"
        ] or MultiModalTaskEncoder(
            self.tokenizer, self.image_processor, self.seq_length, self.multimodal_sample_config
        )
        self.validation_task_encoder: TaskEncoder[Any, Any, Any, Any] = (
            values["validation_task_encoder"] or self.task_encoder
        )
        self.packing_buffer_size: int | None = values["packing_buffer_size"]
        self.pg_collection: Any = values["pg_collection"]
        self.options: LoaderOptions | None = extra.pop("options", None)
        self.log_stats_every: float | None = extra.pop("log_stats_every", None)
        #: Where the loaders' workers run (``get_loader``'s ``worker_type``; None: processes).
        self.worker_type: str | None = extra.pop("worker_type", None)
        self.kwargs: dict[str, Any] = extra
        self.init_global_step = 0
        self.train_dataloader_object: Loader | None = None
        self.val_dataloader_object: Loader | None = None
        self._train: StokerDataloader | None = None
        self._val: StokerDataloader | None = None
        self._pending_state: dict[str, Any] | None = None

    def datasets_provider(
        self, worker_config: Any, split: Literal["train", "val"] = "val"
    ) -> LoaderDataset:
        """The dataset of ``split``: training shuffled and endless, validation in order."""
        common = dict(
            worker_config=worker_config,
            batch_size=self.micro_batch_size,
            packing_buffer_size=self.packing_buffer_size,
            **self.kwargs,
        )
        if split == "train":
            return get_train_dataset(
                self.path,
                task_encoder=self.task_encoder,
                shuffle_buffer_size=self.shuffle_buffer_size,
                max_samples_per_sequence=self.max_samples_per_sequence,
                **common,
            )
        if split == "val":
            return get_val_dataset(self.path, task_encoder=self.validation_task_encoder, **common)
        raise ConfigError(f"{split=} must be 'train' or 'val'.")

    def _loader(self, split: Literal["train", "val"], num_workers: int) -> Loader:
        worker_config = data_parallel_worker_config(num_workers, pg_collection=self.pg_collection)
        dataset = self.datasets_provider(worker_config, split)
        pin = self.pin_memory and torch.cuda.is_available()
        return get_savable_loader(
            dataset,
            pin_memory=pin,
            options=self.options,
            log_stats_every=self.log_stats_every if split == "train" else None,
            worker_type=self.worker_type,
        )

    def train_dataloader(self) -> StokerDataloader:
        """The training iterator (built once; a state given to :meth:`load_state_dict` first
        is applied)."""
        if self._train is None:
            self.train_dataloader_object = self._loader("train", self.num_workers)
            self._train = StokerDataloader(self.train_dataloader_object)
            if self._pending_state is not None:
                self._train.restore_state(self._pending_state)
                self._pending_state = None
        return self._train

    def val_dataloader(self) -> StokerDataloader:
        """The validation iterator: endless, pass after pass over the validation split."""
        if self._val is None:
            self.val_dataloader_object = self._loader("val", self.num_val_workers)
            self._val = StokerDataloader(self.val_dataloader_object)
        return self._val

    def test_dataloader(self) -> None:
        """None: as in Bridge, there is no test loader."""

    def build(self) -> tuple[StokerDataloader, StokerDataloader]:
        """``(train_dataloader(), val_dataloader())``."""
        return self.train_dataloader(), self.val_dataloader()

    def stats(self, *, reset: bool = False) -> LoaderStats | None:
        """The training loader's :meth:`~stoker.runtime.loader.Loader.stats` (None before
        :meth:`train_dataloader`), for the training loop to log.

        Example:
            >>> data = MultiModalDataModule("coco-wds", tokenizer, seq_length=64,
            ...                             micro_batch_size=2, num_workers=0,
            ...                             image_processor=image_processor)
            >>> data.stats() is None  # before the training loader is built
            True
            >>> batch = next(data.train_dataloader())
            >>> "wait_frac" in data.stats(reset=True).flat("")  # e.g. for writer.add_scalars
            True
        """
        loader = self.train_dataloader_object
        return None if loader is None else loader.stats(reset=reset)

    def state_dict(self) -> dict[str, Any]:
        """``{"dataloader_state": ...}`` with the training position ({} before training)."""
        if self._train is not None:
            return {"dataloader_state": self._train.save_state()}
        if self._pending_state is not None:
            return {"dataloader_state": self._pending_state}
        return {}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore the training position from :meth:`state_dict`'s output, a loader state, or a
        checkpoint dict holding one; before or after :meth:`train_dataloader`."""
        state = find_loader_state(state_dict)
        if self._train is None:
            self._pending_state = state
        else:
            self._train.restore_state(state)


#: Megatron-Bridge's name, for a one-line switch.
EnergonMultiModalDataModule = MultiModalDataModule
