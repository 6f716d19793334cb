"""``BaseCoreDatasetFactory``: what a ``dataset.yaml`` (or a user's subclass) describes.

A factory knows one split of one dataset and how its samples are loaded; ``build()`` turns it
into an unbatched :class:`~stoker.runtime.dataset.LoaderDataset` (stoker's plan, readers and
workers).
Energon's factory classes keep their names, arguments and override points here, so code that
subclasses them (``class ChatMLWebdataset(DefaultDecoderWebdatasetFactory[ChatMLSample])``)
keeps working after the import changes.

Example:
    >>> from stoker import get_dataset_from_config, get_loader
    >>> factory = get_dataset_from_config(
    ...     "coco-wds", split_part="val", training=False, worker_config=wc
    ... )
    >>> [sample.__key__ for sample in get_loader(factory.build())][:4]
    ['000040', '000041', '000042', '000043']
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

if TYPE_CHECKING:
    from stoker.model.worker_config import WorkerConfig
    from stoker.runtime.dataset import LoaderDataset
    from stoker.sources.aux import FileStore
    from stoker.sources.source import DataSource

T_sample = TypeVar("T_sample", covariant=True)


def as_epath(path: Any) -> Any:
    """``path`` (str, ``pathlib.Path``, ``EPath`` or anything whose ``str()`` is a path or URL)
    as an ``EPath`` where stoker has one, else as a string."""
    try:
        from stoker.storage.epath import EPath
    except ImportError:  # pragma: no cover - EPath is optional for the factories
        return str(path)
    return (
        path
        if isinstance(path, EPath)
        else EPath(os.fspath(path) if isinstance(path, os.PathLike) else str(path))
    )


class BaseCoreDatasetFactory(Generic[T_sample], ABC):
    """Base of every dataset factory: one split of one dataset, ready to ``build()``.

    Subclasses set ``__sample_type__`` (the class of the samples they load), ``paths`` and
    ``subflavors``. The constructor's arguments are recorded so that each dataloader worker can
    make its own instance of a user's subclass.
    """

    __sample_type__: type[T_sample] = cast("type[T_sample]", None)
    paths: list[Any]
    subflavors: dict[str, Any]
    _init_call: tuple[tuple[Any, ...], dict[str, Any]]
    _source: DataSource
    _len: int

    def __new__(cls, *args: Any, **kwargs: Any) -> BaseCoreDatasetFactory[T_sample]:
        self = super().__new__(cls)
        self._init_call = (args, dict(kwargs))
        return self

    @abstractmethod
    def build(self, worker_rotation_offset: int = 0) -> LoaderDataset:
        """The dataset: an unbatched :class:`LoaderDataset` (iterate it with ``get_loader``).

        ``worker_rotation_offset`` is accepted for Energon's signature: stoker spreads samples
        over virtual workers, so there is nothing to rotate.
        """

    @abstractmethod
    def as_file_store(self) -> FileStore:
        """The dataset as a random-access store (key -> raw sample)."""

    @abstractmethod
    def __len__(self) -> int:
        """Samples in the split, over all ranks."""

    def _keep_loading_options(
        self,
        *,
        training: bool,
        worker_config: WorkerConfig,
        shuffle_over_epochs: int | None,
        parallel_shard_iters: int | None,
        max_samples_per_sequence: int | None,
        subset: Any,
        part_filter: Any = None,
    ) -> None:
        """Store the loading arguments every stoker factory takes (Energon's attribute names);
        ``subflavors`` is empty unless a subclass set it before."""
        self.part_filter = part_filter
        if not hasattr(self, "subflavors"):
            self.subflavors = {}
        self.training = training
        self.worker_config = worker_config
        self.shuffle_over_epochs = shuffle_over_epochs
        self.parallel_shard_iters = parallel_shard_iters
        self.max_samples_per_sequence = max_samples_per_sequence
        self.subset = subset

    def _keep_source(self, source: DataSource, part: str | None = None) -> None:
        """Keep ``source``, restricted to the kept ``subset``, and its length: 0 where the part
        filter drops ``part``, the one part of each sample (of a token or JSONL file)."""
        if self.subset is not None:
            source = source.restrict(*self.subset.resolve(source.total))
        self._source = source
        keep = part is None or self.part_filter is None or self.part_filter(part)
        self._len = source.total if keep else 0

    def _loader_dataset(self, source: DataSource, decoder: Any) -> LoaderDataset:
        """:func:`loader_dataset` of ``source`` with the options kept by the constructor."""
        return loader_dataset(
            source,
            training=self.training,
            worker_config=self.worker_config,
            decoder=decoder,
            parallel_shard_iters=self.parallel_shard_iters,
            max_samples_per_sequence=self.max_samples_per_sequence,
            shuffle_over_epochs=self.shuffle_over_epochs,
        )

    def _loading_config(self, path: Any, **contents: Any) -> dict[str, Any]:
        """``config()`` of a factory of ``path`` with the kept loading options; ``contents``
        (what the split holds) come after the path."""
        return {
            "type": type(self).__qualname__,
            "training": self.training,
            "_path": str(path),
            **contents,
            "shuffle_over_epochs": self.shuffle_over_epochs,
            "parallel_shard_iters": self.parallel_shard_iters,
            "max_samples_per_sequence": self.max_samples_per_sequence,
        }


def loader_dataset(
    source: DataSource,
    *,
    training: bool,
    worker_config: WorkerConfig,
    decoder: Any,
    parallel_shard_iters: int | None,
    max_samples_per_sequence: int | None,
    shuffle_over_epochs: int | None,
) -> LoaderDataset:
    """The unbatched dataset of one source, as a factory's ``build()`` returns it.

    ``training`` loops and shuffles shard slices like ``get_train_dataset`` (without its shuffle
    buffer, which Energon applies after the factory); otherwise one pass in order.
    """
    from stoker.model.task import DefaultTaskEncoder
    from stoker.plan import default_virtual_workers
    from stoker.runtime.dataset import LoaderDataset

    task_encoder: DefaultTaskEncoder[Any, Any, Any, Any] = DefaultTaskEncoder()
    task_encoder.decoder = decoder
    return LoaderDataset(
        sources=[source],
        worker_config=worker_config,
        task_encoder=task_encoder,
        batch_size=None,
        training=training,
        repeat=training,
        max_samples_per_sequence=max_samples_per_sequence,
        parallel_shard_iters=parallel_shard_iters or (16 if training else 1),
        shuffle_over_epochs_multiplier=0 if shuffle_over_epochs is None else shuffle_over_epochs,
        virtual_workers=default_virtual_workers(
            worker_config.world_size, worker_config.num_workers
        ),
        virtual_workers_defaulted=True,
    )
