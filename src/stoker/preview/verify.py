"""Build the samples of a split as the loader would; a sample that fails becomes a :class:`Problem`.

``stoker preview`` shows them (:func:`iter_built`); ``stoker lint``'s sample check
(:mod:`stoker.preview.lint_decode`) builds each with :func:`build_or_problem`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from stoker.errors import SampleError, StokerError
from stoker.format.meta import DEFAULT_DATASET_YAML, DEFAULT_SPLIT_CONFIG
from stoker.pipeline.decode import SampleDecoder
from stoker.pipeline.read import RawSample
from stoker.plan import global_to_shard
from stoker.preview.read import kept_refs
from stoker.runtime.build import SampleBuilder
from stoker.sources.load import load_source

#: References planned and read at a time.
_BLOCK = 1024


def iter_built(
    path: str,
    *,
    split_part: str,
    split_config: str = DEFAULT_SPLIT_CONFIG,
    dataset_config: str = DEFAULT_DATASET_YAML,
    trust_sample_loader: bool = False,
) -> Iterator[tuple[RawSample, Any]]:
    """Every sample of the split in order: ``(raw, sample)``, or ``(raw, Problem)``.

    A sample that fails to decode or map gives a :class:`Problem`; dataset-level problems
    (config, storage) raise. Samples are built as the loader builds them.
    """
    source = load_source(
        path,
        split_part=split_part,
        split_config=split_config,
        dataset_config=dataset_config,
        trust_sample_loader=trust_sample_loader,
    )
    builder = SampleBuilder(source, SampleDecoder())
    reader = source.reader()
    count = int(source.counts.sum())
    try:
        position = 0
        while position < source.total:
            refs = kept_refs(count, source.excluded, position, _BLOCK)
            if not refs:
                break
            shard_ids, indices = global_to_shard(source.counts, refs)
            for s, i, ref in zip(shard_ids, indices, refs, strict=True):
                raw = reader.read(int(s), int(i))
                yield raw, build_or_problem(builder, raw, ref)
            position += len(refs)
    finally:
        reader.close()


class Problem(str):
    """Why a sample could not be built (a ``str``, told apart from text samples by type)."""


def build_or_problem(builder: SampleBuilder, raw: RawSample, ref: int) -> Any:
    try:
        return builder.build(raw, ref)
    except SampleError as e:
        return Problem(f"the sample cannot be loaded: {e.problem}")
    except StokerError:
        raise  # a dataset-level problem: every sample would fail
    except Exception as e:  # a user sample_loader's bug, shown on its sample
        return Problem(f"the sample cannot be loaded: {type(e).__name__}: {e}")
