"""``BaseWebdatasetFactory``: one split of a prepared tar-shard dataset (Energon's base class).

Subclasses implement ``load_sample(raw)``: ``raw`` holds the sample's parts (as bytes, after
``part_filter``) and ``__key__``, ``__restore_key__`` and ``__sources__``. ``prepare_dataset``
indexes shards with stoker's ``prepare``.
"""

from __future__ import annotations

import dataclasses
from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from stoker.errors import ConfigError
from stoker.flavors.base import BaseCoreDatasetFactory, as_epath
from stoker.format.dataset_config import DatasetConfig, FactoryRef
from stoker.format.meta import DEFAULT_SPLIT_CONFIG
from stoker.sources.source import EmptyDatasetError as EmptyDatasetError

if TYPE_CHECKING:
    from stoker.model.worker_config import WorkerConfig
    from stoker.runtime.dataset import LoaderDataset
    from stoker.sources.aux import FileStore
    from stoker.sources.source import DataSource

T_sample = TypeVar("T_sample", covariant=True)


@dataclass(frozen=True)
class ShardInfo:
    """One shard of the split: its name (relative to the dataset), path and sample count."""

    name: str
    path: Any
    count: int


class BaseWebdatasetFactory(BaseCoreDatasetFactory[T_sample], Generic[T_sample]):
    """Base class of the tar-shard dataset factories (Energon's signature).

    Args:
        path: The dataset folder (str, ``pathlib.Path`` or ``EPath``).
        split_part: Which split to load (``train``, ``val``, ``test``, ...).
        training: Shuffle shard slices and loop (True), or one pass in order (False).
        worker_config: Ranks and dataloader workers.
        shuffle_over_epochs: Shuffle slices over this many epochs (-1: draw with replacement).
        parallel_shard_iters: Shard slices read in parallel per stream (16 training, else 1).
        max_samples_per_sequence: Longest run of consecutive samples from one shard.
        subset: Only part of the split (a :class:`~stoker.metadataset.subset.SubsetRange`).
        split_config: The split file in ``.nv-meta`` (default ``split.yaml``).
        part_filter: Which parts of a sample to read (a callable on the part name).
    """

    #: The constructor takes ``subflavors=`` (workers get the current ones).
    takes_subflavors = False

    def __init__(
        self,
        path: Any,
        *,
        split_part: str,
        training: bool,
        worker_config: WorkerConfig,
        shuffle_over_epochs: int | None = 1,
        parallel_shard_iters: int | None = None,
        max_samples_per_sequence: int | None = None,
        subset: Any = None,
        split_config: str | None = None,
        part_filter: Callable[[str], bool] | None = None,
    ) -> None:
        from stoker.sources.load import load_split

        if self.__sample_type__ is None:
            raise ConfigError(
                f"{type(self).__qualname__} defines no __sample_type__.",
                hint="Set the class attribute __sample_type__ = YourSample (a Sample subclass).",
            )
        self.path = as_epath(path)
        self.paths = [self.path]
        self.name = str(self.path).rstrip("/").rsplit("/", 1)[-1]
        self.split_part = split_part
        self.split_config = split_config or DEFAULT_SPLIT_CONFIG
        crude = DatasetConfig(sample_type=None, sample_module=None)
        self._source = load_split(
            str(self.path), split_part=split_part, split_config=self.split_config, config=crude
        )
        if not self._source.shards:
            raise EmptyDatasetError(
                f"no shards in split part {split_part!r}.",
                path=str(self.path),
                hint=f"Check .nv-meta/{self.split_config}, or load another split part.",
            )
        if subset is not None:
            start, end = subset.resolve(int(self._source.counts.sum()))
            self._source = self._source.restrict(start, end)
        self.shards = [
            ShardInfo(name, self.path / name if hasattr(self.path, "__truediv__") else name, int(c))
            for name, c in zip(self._source.shards, self._source.counts.tolist(), strict=True)
        ]
        self.sample_excludes: set[int] = set(self._source.excluded.tolist())
        self.split_part_files = list(self._source.shards)
        self._keep_loading_options(
            training=training,
            worker_config=worker_config,
            shuffle_over_epochs=shuffle_over_epochs,
            parallel_shard_iters=parallel_shard_iters,
            max_samples_per_sequence=max_samples_per_sequence,
            subset=subset,
            part_filter=part_filter,
        )

    def __len__(self) -> int:
        return sum(shard.count for shard in self.shards)

    @abstractmethod
    def load_sample(self, raw_data: dict[str, Any]) -> T_sample:
        """The sample for one set of raw parts (plus ``__key__`` and the other metadata)."""

    def build(self, worker_rotation_offset: int = 0) -> LoaderDataset:
        return self._loader_dataset(self.built_source(), self.native_decoder())

    def built_source(self) -> DataSource:
        """The source ``build()`` loads: samples come from this class's ``load_sample``,
        through an instance made in each dataloader worker from the same arguments."""
        args, kwargs = self._init_call
        if self.takes_subflavors:  # as updated since construction (get_dataset_from_config)
            kwargs = {**kwargs, "subflavors": dict(self.subflavors)}
        cls = type(self)
        ref = FactoryRef(f"{cls.__module__}:{cls.__qualname__}", kwargs, args, cls, False)
        config = DatasetConfig(None, None, subflavors=dict(self.subflavors), factory=ref)
        return dataclasses.replace(self._source, config=config, subflavors=dict(self.subflavors))

    def native_decoder(self) -> Any:
        """The decoder stoker's reader applies before ``load_sample`` (None: raw bytes)."""
        return None

    def as_file_store(self) -> FileStore:
        from stoker.sources.aux import WebdatasetFileStore

        return WebdatasetFileStore(str(self.path))

    def sample_filter(self, key: str) -> bool:
        """Whether the sample ``key`` is kept (exclusions are applied by index in stoker)."""
        return True

    def config(self) -> dict[str, Any]:
        shards = [{"name": s.name, "count": s.count} for s in self.shards]
        return self._loading_config(self.path, shards=shards)

    def __str__(self) -> str:
        return f"{type(self).__name__}(path={self.path})"

    @classmethod
    def prepare_dataset(
        cls,
        parent_path: Any,
        paths: Sequence[str],
        *,
        split_parts_ratio: Sequence[tuple[str, float]] | None = None,
        split_parts_patterns: Sequence[tuple[str, str]] | None = None,
        split_config: str = DEFAULT_SPLIT_CONFIG,
        shuffle_seed: int | None = 42,
        progress_fn: Any = None,
        workers: int = 32,
        tar_index_only: bool = False,
        media_filter: Any = None,
        fix_duplicates: bool = False,
        index_sqlite_tmp_path: Any = None,
    ) -> set[str]:
        """Index the shards ``paths`` (relative to ``parent_path``, brace patterns allowed) and
        write ``.info.json``, the split config and ``index.sqlite``, as Energon's does.

        Returns the part names found in the shards. Unlike Energon, a failed prepare leaves the
        dataset as it was, and duplicate keys are an error (``fix_duplicates`` is refused).

        Example:
            >>> from stoker.format.pack import pack
            >>> shards = pack("raw", "fresh-wds", samples_per_shard=20).shards
            >>> shards
            ['shard-000000.tar', 'shard-000001.tar', 'shard-000002.tar']
            >>> sorted(BaseWebdatasetFactory.prepare_dataset(
            ...     "fresh-wds", ["shard-{000000..000002}.tar"], split_parts_ratio=[("train", 1.0)]
            ... ))
            ['jpg', 'txt']
        """
        from stoker.format.brace import expand
        from stoker.format.prepare import index_shards

        if fix_duplicates:
            raise ConfigError(
                "fix_duplicates is not supported: stoker never rewrites shards in place.",
                hint="Re-shard the data with unique keys (e.g. `stoker pack`).",
            )
        root = str(as_epath(parent_path))
        names = [name.lstrip("/") for name in expand(list(paths))]
        with index_shards(
            root,
            shards=names,
            tar_index_only=tar_index_only,
            num_workers=min(workers, 8),
            overwrite=True,
        ) as pending:
            report = pending.publish(
                split_ratio=split_parts_ratio if not split_parts_patterns else None,
                split_parts=split_parts_patterns,
                shuffle_seed=shuffle_seed,
                split_config_name=split_config,
            )
        if media_filter is not None:
            from stoker.media.prepare import prepare_media

            prepare_media(root, media_filter, num_workers=min(workers, 8))
        return set(report.part_names)
