"""``lint``'s sample check: decode every sample as the loader would, in parallel processes.

Each shard is one unit of work: its samples are read, decoded (images, JSON, text, ...) and
mapped by the dataset.yaml exactly as :class:`~stoker.runtime.build.SampleBuilder` does in a
dataloader worker; video and audio parts, which the loader decodes lazily, also have their
container headers read (:meth:`AVDecoder.get_metadata`). Each sample that fails becomes a
:class:`Finding` naming its shard, key and byte offset, with the decoder's error.

Example:
    >>> report = decode_samples("coco-wds", num_workers=2)
    >>> report.checked, [f.message for f in report.findings]
    (60, [])
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from stoker.errors import SampleError, StokerError
from stoker.format.dataset_config import read_dataset_config
from stoker.format.lint.report import MAX_REPORTED, Finding
from stoker.format.meta import DEFAULT_DATASET_YAML, DEFAULT_SPLIT_CONFIG, read_split_config
from stoker.format.parallel import ordered_map
from stoker.format.progress import Progress
from stoker.media.av_decoder import AVDecoder
from stoker.pipeline.decode import SampleDecoder
from stoker.preview.verify import Problem, build_or_problem
from stoker.runtime.build import SampleBuilder
from stoker.sources.load import load_source
from stoker.sources.source import DataSource
from stoker.storage import open_store


@dataclass
class DecodeReport:
    """Samples decoded, samples that failed, and a finding for each of the first that failed."""

    checked: int = 0
    failed: int = 0
    findings: list[Finding] = field(default_factory=list)


@dataclass(frozen=True)
class _ShardTask:
    source: DataSource
    shard_id: int
    #: Index in the split of the shard's first sample.
    start: int


def decode_samples(
    path: str,
    *,
    split_parts: list[str] | None = None,
    split_config: str = DEFAULT_SPLIT_CONFIG,
    dataset_config: str = DEFAULT_DATASET_YAML,
    trust_sample_loader: bool = False,
    num_workers: int | None = None,
    progress: bool = False,
) -> DecodeReport:
    """Decode every sample of ``split_parts`` (default: every split part) of the dataset.

    A shard in several split parts is decoded once; excluded samples are skipped, as the
    loader skips them. Dataset-level problems (a dataset.yaml the allow-list refuses, an
    untrusted ``sample_loader.py``) become one finding each instead of a finding per sample.
    """
    report = DecodeReport()
    tasks = _tasks(path, split_parts, split_config, dataset_config, trust_sample_loader, report)
    with Progress(len(tasks), "Decoding samples", enabled=progress) as bar:
        for checked, failed, findings in ordered_map(_decode_shard, tasks, num_workers, len(tasks)):
            report.checked += checked
            report.failed += failed
            room = MAX_REPORTED - len(report.findings)
            report.findings.extend(findings[: max(room, 0)])
            bar.update()
    listed = len(report.findings)
    if report.failed > listed:
        more = report.failed - listed
        report.findings.append(Finding("error", f"... and {more} more samples (not listed)."))
    return report


def _tasks(
    path: str,
    split_parts: list[str] | None,
    split_config: str,
    dataset_config: str,
    trust: bool,
    report: DecodeReport,
) -> list[_ShardTask]:
    """One task per shard of the split parts (each shard once)."""
    store = open_store(path)
    try:
        config = read_dataset_config(store, dataset_config)
        used_split = config.split_config or split_config
        parts = split_parts or list(read_split_config(store, used_split).split_parts)
    except StokerError as e:
        report.findings.append(Finding.from_error(e, store))
        return []
    tasks: list[_ShardTask] = []
    seen: set[str] = set()
    for part in parts:
        try:
            source = load_source(
                path,
                split_part=part,
                split_config=split_config,
                dataset_config=dataset_config,
                trust_sample_loader=trust,
            )
            SampleBuilder(source, SampleDecoder())  # user code refused here, once
        except StokerError as e:
            if not _has_samples(store, used_split, part):
                continue  # an empty split part: lint's split check warns about it
            report.findings.append(Finding.from_error(e, store))
            continue
        starts = np.concatenate(([0], np.cumsum(source.counts)[:-1]))
        for shard_id, name in enumerate(source.shards):
            if name not in seen:
                seen.add(name)
                tasks.append(_ShardTask(source, shard_id, int(starts[shard_id])))
    return tasks


def _has_samples(store: Any, split_config: str, part: str) -> bool:
    try:
        return bool(read_split_config(store, split_config).shards(part))
    except StokerError:
        return True


#: Per worker process: the builder of each source (made once, it may load user code).
_BUILDERS: dict[tuple[str, str], SampleBuilder] = {}


def _decode_shard(task: _ShardTask) -> tuple[int, int, list[Finding]]:
    """``(samples decoded, samples failed, findings for the first that failed)``."""
    source = task.source
    builder = _BUILDERS.get((source.path, source.split_part))
    if builder is None:
        builder = _BUILDERS.setdefault(
            (source.path, source.split_part), SampleBuilder(source, SampleDecoder())
        )
    count = int(source.counts[task.shard_id])
    excluded = source.excluded
    skip = set((excluded[(excluded >= task.start) & (excluded < task.start + count)]).tolist())
    reader = source.reader()
    checked, failed, findings = 0, 0, list[Finding]()
    try:
        for index in range(count):
            if task.start + index in skip:
                continue
            checked += 1
            finding = _check_sample(builder, reader, task, index)
            if finding is not None:
                failed += 1
                if len(findings) < MAX_REPORTED:
                    findings.append(finding)
    finally:
        reader.close()
    return checked, failed, findings


def _check_sample(
    builder: SampleBuilder, reader: Any, task: _ShardTask, index: int
) -> Finding | None:
    source = task.source
    try:
        raw = reader.read(task.shard_id, index)
    except StokerError as e:
        name = source.shards[task.shard_id]
        return Finding("error", e.problem, name, e.key, e.offset, e.hint)
    sample = build_or_problem(builder, raw, task.start + index)
    if not isinstance(sample, Problem):
        sample = _probe_media(sample)
    if isinstance(sample, Problem):
        return Finding("error", str(sample), raw.shard, raw.key, raw.offset)
    return None


def _probe_media(sample: Any) -> Any:
    """``sample``, or a :class:`Problem` if a video/audio field's container headers cannot be
    read (the loader reads them lazily, when the task encoder first asks)."""
    for value in _field_values(sample):
        if isinstance(value, AVDecoder):
            try:
                value.get_metadata()
            except SampleError as e:
                return Problem(f"the sample cannot be loaded: {e.problem}")
            except Exception as e:  # the decoder's error, shown on its sample
                return Problem(f"the sample cannot be loaded: {type(e).__name__}: {e}")
    return sample


def _field_values(sample: Any) -> Iterator[Any]:
    if isinstance(sample, dict):
        yield from sample.values()
    elif dataclasses.is_dataclass(sample) and not isinstance(sample, type):
        for f in dataclasses.fields(sample):
            yield getattr(sample, f.name, None)
