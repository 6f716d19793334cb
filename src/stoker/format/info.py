"""``info``: what a prepared dataset holds, read from its metadata alone (no shard is opened).

The report counts samples and bytes per dataset and per split part (after ``exclude``), and says
what ``dataset.yaml`` declares, as written. ``stoker lint`` checks that the metadata is right.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stoker.errors import ConfigError, FormatError, StorageError
from stoker.format.binidx import TokenIndex, idx_name, token_dataset
from stoker.format.jsonl import jsonl_index_name
from stoker.format.meta import (
    DEFAULT_DATASET_YAML,
    DEFAULT_SPLIT_CONFIG,
    INDEX_SQLITE,
    INDEX_UUID,
    META_DIR,
    DatasetInfo,
    SplitConfig,
    load_yaml_or_json,
    read_info,
    read_split_config,
)
from stoker.format.parquet import HF_SPLIT, is_parquet_dataset, parquet_names, scan_parquet
from stoker.format.sample_types import BUILTIN_MODULES, CRUDE_CLASS, LEGACY_DATASET_CLASSES
from stoker.format.tar_index import sample_count
from stoker.storage import Store, open_store, split_location

_LINT_HINT = "Run `stoker lint PATH` for a full check."


@dataclass(frozen=True)
class SplitInfo:
    """One split part: its shards and samples after ``exclude``."""

    name: str
    shards: int
    samples: int
    #: Single samples (``shard.tar/key``) excluded from this part's shards.
    excluded_samples: int


@dataclass
class InfoReport:
    """A summary of a prepared dataset (webdataset folder or indexed JSONL file)."""

    path: str
    #: ``webdataset``, ``jsonl``, ``binidx`` or ``parquet``.
    kind: str
    samples: int
    bytes: int
    shards: int = 0
    #: The ``energon_version`` value of ``.info.json`` (the tool that prepared the dataset).
    writer: str | None = None
    index_uuid: str | None = None
    has_sqlite_index: bool = False
    #: The sample type's class name, ``crude`` for crude data, or None without dataset.yaml.
    sample_type: str | None = None
    #: The field map as written in dataset.yaml (field -> part spec).
    field_map: dict[str, str] | None = None
    subflavors: dict[str, Any] = field(default_factory=dict)
    splits: list[SplitInfo] = field(default_factory=list)
    #: Of a ``.bin``/``.idx`` token dataset: its documents, tokens and their dtype.
    tokens: dict[str, Any] | None = None
    #: Of a Parquet dataset: its columns, and its media columns (name -> image/audio).
    columns: list[str] = field(default_factory=list)
    media_columns: dict[str, str] = field(default_factory=dict)


def dataset_info(
    path: str,
    *,
    split_config: str = DEFAULT_SPLIT_CONFIG,
    dataset_config: str = DEFAULT_DATASET_YAML,
) -> InfoReport:
    """Summarise the prepared dataset at ``path`` (a folder of shards or a ``.jsonl`` file).

    Raises:
        StorageError: the path does not exist, or the dataset is not prepared.
        StokerError: a metadata file is invalid.

    Example:
        >>> report = dataset_info("coco-wds")
        >>> [(s.name, s.samples) for s in report.splits]
        [('train', 40), ('val', 10), ('test', 10)]
    """
    if path.endswith(".jsonl"):
        return _jsonl_info(path)
    if (bin_path := token_dataset(path, prefix=False)) is not None:
        return _binidx_info(bin_path)
    store = open_store(path)
    if not store.is_dir(""):
        if (bin_path := token_dataset(path)) is not None:  # a .bin/.idx prefix
            return _binidx_info(bin_path)
        raise StorageError(
            "no such folder.",
            path=path,
            hint="Pass the folder of a prepared dataset, or a .jsonl file.",
        )
    if is_parquet_dataset(store):
        report = _parquet_info(store, path)
        if store.exists(f"{META_DIR}/{dataset_config}"):
            _describe_dataset_yaml(store, report, dataset_config)
        return report
    info = read_info(store)
    split = read_split_config(store, split_config)
    report = InfoReport(
        path=path,
        kind="webdataset",
        samples=info.total_samples,
        bytes=sum(store.size(name) for name in info.shard_counts if store.exists(name)),
        shards=len(info.shard_counts),
        writer=info.writer,
        index_uuid=store.read_text(INDEX_UUID).strip() if store.exists(INDEX_UUID) else None,
        has_sqlite_index=store.exists(INDEX_SQLITE),
        splits=split_infos(info, split, store.url(f"{META_DIR}/{split_config}")),
    )
    if store.exists(f"{META_DIR}/{dataset_config}"):
        _describe_dataset_yaml(store, report, dataset_config)
    elif dataset_config != DEFAULT_DATASET_YAML:  # named explicitly: as Energon, it must exist
        raise StorageError(
            f"dataset config {dataset_config!r} not found.",
            path=store.url(f"{META_DIR}/{dataset_config}"),
            hint="Pass the name of a dataset config in .nv-meta (e.g. dataset.yaml).",
        )
    return report


def split_infos(info: DatasetInfo, split: SplitConfig, where: str) -> list[SplitInfo]:
    """Shards and samples of each split part, after excluding shards and single samples."""
    excluded = split.excluded_samples()
    out = []
    for name in split.split_parts:
        try:
            shards = split.shards(name)
        except ConfigError as e:  # unbalanced braces
            raise ConfigError(e.problem, path=where, hint=e.hint) from None
        unknown = [shard for shard in shards if shard not in info.shard_counts]
        if unknown:
            raise FormatError(
                f"split part {name!r} names shard {unknown[0]!r}, which .info.json does not list.",
                path=where,
                hint=_LINT_HINT,
            )
        dropped = sum(len(excluded.get(shard, ())) for shard in shards)
        samples = sum(info.shard_counts[shard] for shard in shards) - dropped
        out.append(SplitInfo(name, len(shards), samples, dropped))
    return out


def _describe_dataset_yaml(store: Store, report: InfoReport, name: str) -> None:
    """Fill in the sample type, field map and subflavors from dataset.yaml, as written.

    Not validated here (``stoker lint`` does that), so that info also describes datasets whose
    sample type lives in the user's own module.
    """
    path = f"{META_DIR}/{name}"
    raw = load_yaml_or_json(store, path)
    if not isinstance(raw, dict):
        raise ConfigError("dataset.yaml must be a mapping.", path=store.url(path), hint=_LINT_HINT)
    report.sample_type = _sample_type_name(raw)
    field_map = raw.get("field_map")
    if isinstance(field_map, dict):
        report.field_map = {str(k): str(v) for k, v in field_map.items()}
    subflavors = raw.get("subflavors")
    if isinstance(subflavors, dict):
        report.subflavors = {str(k): v for k, v in subflavors.items()}


def _sample_type_name(raw: dict[str, Any]) -> str | None:
    """``CaptioningSample``, ``crude``, or ``module.Class`` for a user's own type."""
    spec = raw.get("sample_type")
    if isinstance(spec, dict):
        cls, module = str(spec.get("__class__")), str(spec.get("__module__", ""))
        return cls if module in BUILTIN_MODULES or not module else f"{module}.{cls}"
    legacy = raw.get("__class__")
    if legacy is None:
        return None
    if legacy == CRUDE_CLASS:
        return "crude"
    return LEGACY_DATASET_CLASSES.get(str(legacy), str(legacy))


def _jsonl_info(path: str) -> InfoReport:
    """Samples (from the index) and bytes of an indexed JSONL file."""
    parent, name = split_location(path)
    store = open_store(parent)
    if not store.exists(name):
        raise StorageError("no such file.", path=path, hint="Check the path of the JSONL file.")
    index = jsonl_index_name(name)
    if not store.exists(index):
        raise StorageError(
            f"the JSONL file is not prepared: its index {index!r} is missing.",
            path=path,
            hint=f"Run `stoker prepare {path}` to index it.",
        )
    samples = sample_count(store.size(index), store.url(index))  # the index is not read
    return InfoReport(path=path, kind="jsonl", samples=samples, bytes=store.size(name))


def _binidx_info(bin_path: str) -> InfoReport:
    """Sequences, documents and tokens of a token dataset (from its index)."""
    parent, name = split_location(bin_path)
    store = open_store(parent)
    index_name = idx_name(name)
    for needed in (name, index_name):
        if not store.exists(needed):
            raise StorageError("no such file.", path=store.url(needed), hint="Check the path.")
    local = store.local_path(index_name) or store.cached_local_path(index_name)
    index = TokenIndex.load(local or "", store.url(index_name))
    tokens = {
        "dtype": str(index.dtype),
        "documents": max(len(index.documents) - 1, 0),
        "tokens": int(index.lengths.sum(dtype="int64")),
        "multimodal": index.modes is not None,
    }
    return InfoReport(
        path=bin_path, kind="binidx", samples=len(index), bytes=store.size(name), tokens=tokens
    )


def _parquet_info(store: Store, path: str) -> InfoReport:
    """Rows, files and columns of each split of a Parquet folder (from the footers)."""
    names = parquet_names(store)
    found = sorted({m.group("split") for n in names if (m := HF_SPLIT.search(n))}) or ["train"]
    layouts = {name: scan_parquet(store, name) for name in found}
    first = layouts[found[0]]
    return InfoReport(
        path=path,
        kind="parquet",
        samples=sum(int(x.rows.sum()) for x in layouts.values()),
        bytes=sum(store.size(n) for n in names),
        shards=len(names),
        splits=[SplitInfo(n, len(x.files), int(x.rows.sum()), 0) for n, x in layouts.items()],
        sample_type="crude",
        columns=list(first.columns),
        media_columns=dict(first.media),
    )
