"""Read the samples of a preview: in order, decoded and mapped exactly as the loader does.

:func:`preview_dataset` opens the split, picks the samples with :func:`kept_refs` (skipping
excluded ones), builds each with the loader's :class:`~stoker.runtime.build.SampleBuilder` and
summarises every field; a sample that fails to decode is reported with its error.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import numpy.typing as npt

from stoker.errors import ConfigError, SampleError, StokerError
from stoker.format.meta import DEFAULT_DATASET_YAML, DEFAULT_SPLIT_CONFIG
from stoker.pipeline.decode import ImageDecoderType, SampleDecoder
from stoker.pipeline.read import RawSample
from stoker.plan import global_to_shard
from stoker.preview.header import header_info
from stoker.preview.report import FieldSummary, PreviewReport, PreviewSample
from stoker.preview.summary import summarize
from stoker.runtime.build import SampleBuilder
from stoker.sources.load import load_source
from stoker.sources.source import DataSource, EmptyDatasetError

#: The split part holds no samples (``preview --split-parts`` skips it, as Energon does).
EmptySplitError = EmptyDatasetError


def preview_dataset(
    path: str,
    *,
    split_part: str = "train",
    num_samples: int = 5,
    offset: int = 0,
    image_decode: ImageDecoderType = "torchrgb8",
    split_config: str = DEFAULT_SPLIT_CONFIG,
    dataset_config: str = DEFAULT_DATASET_YAML,
    trust_sample_loader: bool = False,
    thumbnails: bool = False,
    seed: int | None = None,
) -> PreviewReport:
    """Samples ``offset`` to ``offset + num_samples`` of the split, in order, summarised.

    With a ``seed``, ``num_samples`` samples drawn at random from the split instead (the same
    seed draws the same ones; ``offset`` is ignored). A sample that cannot be decoded or
    mapped is reported with its error instead of stopping the preview; dataset-level problems
    (missing metadata or shards) raise.
    """
    if num_samples < 1 or offset < 0:
        raise ConfigError(f"invalid {num_samples=} or {offset=}.", hint="Use n >= 1, offset >= 0.")
    source = load_source(
        path,
        split_part=split_part,
        split_config=split_config,
        dataset_config=dataset_config,
        trust_sample_loader=trust_sample_loader,
    )
    if source.total == 0:
        raise EmptySplitError(
            f"split {split_part!r} holds no samples.", path=path, hint="Preview another split."
        )
    if offset >= source.total:
        raise ConfigError(
            f"{offset=} is past the end of split {split_part!r} ({source.total} samples).",
            hint="Use a smaller --offset.",
        )
    count = int(source.counts.sum())
    if seed is None:
        refs = kept_refs(count, source.excluded, offset, num_samples)
    else:
        refs = drawn_refs(count, source.excluded, num_samples, seed)
    shard_ids, indices = global_to_shard(source.counts, refs)
    builder = SampleBuilder(source, SampleDecoder(image_decode=image_decode))
    reader = source.reader()
    try:
        samples = [
            _preview_one(source, builder, reader.read(int(s), int(i)), ref, thumbnails)
            for s, i, ref in zip(shard_ids, indices, refs, strict=True)
        ]
    finally:
        reader.close()
    type_name = _type_name(source)
    return PreviewReport(
        path,
        split_part,
        type_name,
        source.total,
        offset,
        samples,
        info=header_info(source, type_name),
        seed=seed,
    )


def kept_refs(count: int, excluded: npt.NDArray[np.int64], offset: int, n: int) -> list[int]:
    """Up to ``n`` global indices below ``count``, from the ``offset``-th not ``excluded`` one.

    Example:
        >>> kept_refs(10, np.array([1, 2, 5]), 1, 3)
        [3, 4, 6]
    """
    ref = offset
    for e in np.unique(excluded).tolist():
        if e > ref:
            break
        ref += 1
    skip = set(excluded.tolist())
    refs: list[int] = []
    while ref < count and len(refs) < n:
        if ref not in skip:
            refs.append(ref)
        ref += 1
    return refs


def drawn_refs(count: int, excluded: npt.NDArray[np.int64], n: int, seed: int) -> list[int]:
    """Up to ``n`` global indices below ``count``, not ``excluded``, drawn at random with ``seed``.

    Example:
        >>> refs = drawn_refs(100, np.array([3]), 5, seed=1)
        >>> refs == drawn_refs(100, np.array([3]), 5, seed=1), len(set(refs)), 3 in refs
        (True, 5, False)
    """
    skip = set(excluded.tolist())
    # Drawing n + len(skip) distinct indices leaves at least n kept ones (or all there are).
    size = min(count, n + len(skip))
    drawn = np.random.default_rng(seed).choice(count, size=size, replace=False)
    return [int(r) for r in drawn if int(r) not in skip][:n]


def _preview_one(
    source: DataSource, builder: SampleBuilder, raw: RawSample, ref: int, thumbnails: bool
) -> PreviewSample:
    error: str | None = None
    fields: dict[str, FieldSummary] = {}
    try:
        sample = builder.build(raw, ref)
    except SampleError as e:
        error = e.message
    except StokerError:
        raise  # a dataset-level problem (config, storage): every sample would fail
    except Exception as e:  # a user sample_loader's bug: show it on this sample
        error = f"{type(e).__name__}: {e}"
    else:
        values = _fields(sample, source.jsonl)
        fields = {name: summarize(value, thumbnails) for name, value in values.items()}
    parts = _part_sizes(raw.parts)
    return PreviewSample(raw.key, raw.shard, raw.index, raw.offset, fields, error, parts)


def _part_sizes(parts: dict[str, Any]) -> dict[str, int]:
    """Bytes of each part; of a Parquet row, of its byte and text columns (numbers and lists
    have no size worth showing: their values are in the fields).

    Example:
        >>> _part_sizes({"jpg": b"abc", "text": "é", "n": 3})
        {'jpg': 3, 'text': 2}
    """
    sizes = {}
    for name, data in parts.items():
        if isinstance(data, str):
            sizes[name] = len(data.encode())
        elif isinstance(data, bytes | bytearray | memoryview):
            sizes[name] = len(data)
    return sizes


def _fields(sample: Any, jsonl: bool) -> dict[str, Any]:
    """The user-visible fields: dataclass fields or dict parts, without ``__meta__`` entries."""
    if dataclasses.is_dataclass(sample) and not isinstance(sample, type):
        items = {f.name: getattr(sample, f.name) for f in dataclasses.fields(sample)}
    else:
        items = dict(sample)
    fields = {k: v for k, v in items.items() if not k.startswith("__")}
    if jsonl and isinstance(fields.get("json"), dict):
        # One JSON object per line: show its keys, named as a field_map would access them.
        return {f"json[{k}]": v for k, v in fields["json"].items()}
    return fields


def _type_name(source: DataSource) -> str:
    if source.jsonl:
        return "JSONL (crude)"
    if source.binidx:
        return "Megatron .bin/.idx tokens (crude)"
    if source.parquet and source.config.sample_type is None and source.config.factory is None:
        return "Parquet (crude)"
    factory = source.config.factory
    if factory is not None:  # a dataset factory class named by the dataset.yaml
        return factory.name.rpartition(":")[2]
    return source.config.sample_type or "CrudeWebdataset"
