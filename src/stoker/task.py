"""Task encoders: the user's hooks that turn samples into model inputs, with Energon's names.

Order of the hooks: ``encode_sample`` (or ``preencode_sample`` -> pack -> ``postencode_sample``)
-> ``batch`` -> ``encode_batch``. Every hook has a defined default, and the loader turns features
on by its own arguments (``packing_buffer_size``, grouping), never by looking at which methods a
subclass overrides: ``select_samples_to_pack``, ``pack_selected_samples`` and
``batch_group_criterion`` raise ``NotImplementedError`` when such a feature is on and the hook
was not written.

Example:
    >>> class Captions(TaskEncoder):
    ...     def encode_sample(self, sample):
    ...         return {"caption": sample.caption.lower()}
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Hashable, Iterator, Sequence
from typing import Any, Generic, TypeVar

from stoker.errors import StokerError
from stoker.pipeline.batch import batch_samples, generic_batch
from stoker.pipeline.decode import SampleDecoder
from stoker.pipeline.errors import (
    ErrorPolicy,
    ErrorTracker,
    SampleError,
    SkipSample,
    wrap_failure,
)
from stoker.pipeline.seeds import get_stateless, sample_seed, stateless
from stoker.samples import Sample

T_sample = TypeVar("T_sample")
T_encoded_sample = TypeVar("T_encoded_sample")
T_raw_batch = TypeVar("T_raw_batch")
T_batch = TypeVar("T_batch")

#: Energon's other name for :class:`SkipSample`.
IgnoreSample = SkipSample


class TaskEncoder(Generic[T_sample, T_encoded_sample, T_raw_batch, T_batch]):
    """Base class of task encoders; override the hooks you need.

    ``encode_sample``, ``preencode_sample`` and ``encode_batch`` may return one value, or be
    generators yielding any number of values; any hook may raise :class:`SkipSample`.
    """

    #: Decodes the parts of samples; ``None`` gives the raw bytes.
    decoder: SampleDecoder | None = SampleDecoder()
    #: Cookers that turn crude samples into typed samples.
    cookers: Sequence[Any] = ()

    @stateless
    def cook_crude_sample(self, sample: Any, cooker: Any, aux: dict[str, Any]) -> Any:
        """Cook a crude sample with ``cooker`` (its ``cook(sample, **aux)``)."""
        return cooker.cook(sample, **aux)

    @property
    def cache(self) -> Any:
        """The loader's cache pool (``get_loader(..., cache_pool=...)``; else one that reads
        directly), as cookers with ``need_cache`` get it (Energon's ``TaskEncoder.cache``)."""
        from stoker.cache_pool import current_cache_pool

        return current_cache_pool()

    @stateless
    def encode_sample(self, sample: T_sample) -> Any:
        """Encode one sample (identity by default)."""
        return sample

    @stateless
    def preencode_sample(self, sample: T_sample) -> Any:
        """Encode one sample before packing (identity by default)."""
        return sample

    @stateless
    def postencode_sample(self, sample: Any) -> Any:
        """Encode one sample after packing was chosen (identity by default)."""
        return sample

    def select_samples_to_pack(self, samples: list[Any]) -> list[list[Any]]:
        """Split a full packing buffer into groups to pack. Needed with packing only."""
        raise NotImplementedError(
            f"packing is on (packing_buffer_size is set), so {type(self).__name__} must "
            "implement select_samples_to_pack and pack_selected_samples."
        )

    def pack_selected_samples(self, samples: list[Any]) -> Any:
        """Pack one selected group into one sample. Needed with packing only."""
        raise NotImplementedError(
            f"packing is on (packing_buffer_size is set), so {type(self).__name__} must "
            "implement select_samples_to_pack and pack_selected_samples."
        )

    def batch_group_criterion(self, sample: Any) -> tuple[Hashable, int | None]:
        """(group key, batch size of that group) for grouped batching. Needed with grouping."""
        raise NotImplementedError(
            f"grouped batching is on, so {type(self).__name__} must implement "
            "batch_group_criterion(sample) -> (group key, batch size)."
        )

    @stateless
    def batch(self, samples: list[Any]) -> Any:
        """Batch encoded samples with :func:`generic_batch`: a sample of the same type whose
        tensors are pad-stacked and other fields are lists."""
        return generic_batch(samples)

    @stateless
    def encode_batch(self, batch: Any) -> Any:
        """Encode one batch (identity by default)."""
        return batch

    def _batch(
        self,
        samples: list[Any],
        result_type: type[Any],
        actions: dict[str, Any] | None = None,
        default_action: Any = None,
    ) -> Any:
        """Batch ``samples`` into ``result_type`` field by field (Energon's helper)."""
        if default_action is None:
            return batch_samples(samples, result_type, actions)
        return batch_samples(samples, result_type, actions, default_action)


class DefaultTaskEncoder(TaskEncoder[T_sample, T_encoded_sample, T_raw_batch, T_batch]):
    """A task encoder that converts samples and batches to given types, matching fields by name.

    Types may be dataclasses, NamedTuples or ``dict``; ``None`` keeps the type.

    Example:
        >>> encoder = DefaultTaskEncoder(raw_batch_type=dict)
    """

    def __init__(
        self,
        *,
        encoded_sample_type: type[T_encoded_sample] | None = None,
        raw_batch_type: type[T_raw_batch] | None = None,
        batch_type: type[T_batch] | None = None,
    ) -> None:
        self._encoded_sample_type = encoded_sample_type
        self._raw_batch_type = raw_batch_type
        self._batch_type = batch_type

    @stateless
    def encode_sample(self, sample: T_sample) -> Any:
        return convert(sample, self._encoded_sample_type)

    @stateless
    def batch(self, samples: list[Any]) -> Any:
        return self._batch(samples, self._raw_batch_type or type(samples[0]))

    @stateless
    def encode_batch(self, batch: Any) -> Any:
        if self._batch_type is None or self._batch_type is self._raw_batch_type:
            return batch
        return convert(batch, self._batch_type)


def convert(value: Any, target: type[Any] | None) -> Any:
    """``value`` (dataclass, NamedTuple or dict) as ``target``, fields matched by name."""
    if target is None or isinstance(value, target):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    elif isinstance(value, tuple) and hasattr(value, "_fields"):
        fields = dict(zip(value._fields, value, strict=True))
    elif isinstance(value, dict):
        fields = dict(value)
    else:
        raise SampleError(f"cannot convert a {type(value).__name__} to {target.__name__}.")
    if issubclass(target, dict):
        return fields
    return target(**fields)


def iter_encoded(
    task_encoder: TaskEncoder[Any, Any, Any, Any],
    sample: Any,
    *,
    tracker: ErrorTracker | None = None,
) -> Iterator[Any]:
    """``task_encoder.encode_sample(sample)`` as an iterator of its 0..n outputs.

    A returned value gives one output, a generator its items; :class:`SkipSample` ends the
    outputs (counted by ``tracker``). Other exceptions propagate as a :class:`SampleError`
    naming the sample's key and sources.

    Example:
        >>> list(iter_encoded(TaskEncoder(), "s"))
        ['s']
    """
    return iter_hook(task_encoder.encode_sample, sample, stage="encode_sample", tracker=tracker)


def iter_hook(
    hook: Any, value: Any, *, stage: str, tracker: ErrorTracker | None = None
) -> Iterator[Any]:
    """Call ``hook(value)`` and iterate its output(s); see :func:`iter_encoded`."""
    try:
        result = hook(value)
        if inspect.isgenerator(result):
            yield from result
        else:
            yield result
    except SkipSample:
        if tracker is not None:
            tracker.skip(value, stage)
    except (NotImplementedError, StokerError) as e:
        if not isinstance(e, SampleError):
            raise
        raise wrap_failure(e, value, stage) from e
    except Exception as e:
        raise wrap_failure(e, value, stage) from e


__all__ = [
    "DefaultTaskEncoder",
    "ErrorPolicy",
    "ErrorTracker",
    "IgnoreSample",
    "Sample",
    "SkipSample",
    "TaskEncoder",
    "convert",
    "get_stateless",
    "iter_encoded",
    "iter_hook",
    "sample_seed",
    "stateless",
]
