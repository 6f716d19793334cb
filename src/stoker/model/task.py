"""Task encoders: the user's hooks that turn samples into model inputs, with Energon's names.

Order of the hooks: ``encode_sample`` (or ``preencode_sample`` -> pack -> ``postencode_sample``)
-> ``batch`` -> ``encode_batch``. Every hook has a defined default. As in Energon, some wiring
follows from which hooks a subclass overrides (all of it decided in :func:`sample_hooks` and
:func:`uses_grouping`): overriding ``batch_group_criterion`` turns grouped batching on, and an
overridden ``preencode_sample`` takes the place of ``encode_sample``. Packing is on when
``packing_buffer_size`` is given; ``select_samples_to_pack`` and ``pack_selected_samples`` raise
``NotImplementedError`` if it is and they were not written.

Example:
    >>> class Captions(TaskEncoder):
    ...     def encode_sample(self, sample):
    ...         return {"caption": sample.caption.lower()}
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from types import MethodType
from typing import Any, Generic, TypeVar

from stoker.model.samples import Sample
from stoker.pipeline import hook_index
from stoker.pipeline.batch import batch_samples, generic_batch
from stoker.pipeline.decode import SampleDecoder
from stoker.pipeline.hooks import convert, iter_encoded, iter_hook
from stoker.pipeline.sample_failure import SkipSample
from stoker.pipeline.seeds import get_stateless, sample_seed, skip_safe, stateless
from stoker.pipeline.skip_policy import ErrorPolicy, ErrorTracker

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
    @skip_safe
    def cook_crude_sample(self, sample: Any, cooker: Any, aux: dict[str, Any]) -> Any:
        """Cook a crude sample with ``cooker`` (its ``cook(sample, **aux)``)."""
        return cooker.cook(sample, **aux)

    @property
    def cache(self) -> Any:
        """The loader's cache pool (``get_loader(..., cache_pool=...)``; else one that reads
        directly), as cookers with ``need_cache`` get it (Energon's ``TaskEncoder.cache``)."""
        from stoker.model.cache_pool import current_cache_pool

        return current_cache_pool()

    @stateless
    @skip_safe
    def encode_sample(self, sample: T_sample) -> Any:
        """Encode one sample (identity by default)."""
        return sample

    @stateless
    @skip_safe
    def preencode_sample(self, sample: T_sample) -> Any:
        """Encode one sample before packing (identity by default)."""
        return sample

    @stateless
    @skip_safe
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
        """(group key, batch size of that group, None: the loader's ``batch_size``).

        Overriding it turns grouped batching on (Energon's rule, see :func:`uses_grouping`).
        The default puts every sample in one group: ``(None, None)``.
        """
        return None, None

    @stateless
    def blend_sample_size(self, sample: Any) -> int | float:
        """The size of a cooked ``sample`` for a blend (e.g. its tokens).

        Overriding it makes a weighted blend balance the sum of sizes per dataset instead of
        sample counts (:mod:`stoker.plan.sized_blend`). The default counts samples: 1.
        """
        return 1

    @stateless
    @skip_safe
    def batch(self, samples: list[Any]) -> Any:
        """Batch encoded samples with :func:`generic_batch`: a sample of the same type whose
        tensors are pad-stacked and other fields are lists."""
        return generic_batch(samples)

    @stateless
    @skip_safe
    def encode_batch(self, batch: Any) -> Any:
        """Encode one batch (identity by default)."""
        return batch

    @property
    def current_batch_index(self) -> int:
        """The rank's index of the batch being built while this hook runs (as in Energon).

        Every batch of a rank gets the next number (0, 1, 2, ...), whatever worker builds it;
        restored with the loader's state. Only readable inside a hook a loader calls.
        """
        return hook_index.current()[0]

    @property
    def current_sample_index(self) -> int:
        """The rank-unique index of the current ``encode_sample`` call (as in Energon).

        Each stream counts its calls; ``calls * streams + place`` makes them unique on the
        rank. All outputs of one generator call share it. In ``batch``, ``encode_batch``,
        ``batch_group_criterion`` and the packing hooks it equals :attr:`current_batch_index`.
        """
        return hook_index.current()[1]

    def _is_overridden(self, bound_method: Any, bases: Sequence[type[Any]] | None = None) -> bool:
        """Whether ``bound_method`` is defined outside ``bases`` (Energon's helper)."""
        if not isinstance(bound_method, MethodType):
            return True  # set on the instance
        name = bound_method.__func__.__name__
        return not any(
            getattr(base, name, None) is bound_method.__func__ for base in bases or (TaskEncoder,)
        )

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
    @skip_safe
    def encode_sample(self, sample: T_sample) -> Any:
        return convert(sample, self._encoded_sample_type)

    @stateless
    @skip_safe
    def batch(self, samples: list[Any]) -> Any:
        return self._batch(samples, self._raw_batch_type or type(samples[0]))

    @stateless
    @skip_safe
    def encode_batch(self, batch: Any) -> Any:
        if self._batch_type is None or self._batch_type is self._raw_batch_type:
            return batch
        return convert(batch, self._batch_type)


class AugmentTaskEncoder(TaskEncoder[T_sample, T_encoded_sample, T_raw_batch, T_batch]):
    """Wraps a task encoder: ``decoder``, ``encode_sample``, ``batch`` and ``encode_batch`` go to
    it; a subclass overrides what it changes (Energon's class, same forwarding).

    Example:
        >>> class Lower(AugmentTaskEncoder):
        ...     def encode_sample(self, sample):
        ...         return super().encode_sample(sample).lower()
        >>> Lower(TaskEncoder()).encode_sample("ABC")
        'abc'
    """

    def __init__(
        self, task_encoder: TaskEncoder[T_sample, T_encoded_sample, T_raw_batch, T_batch]
    ) -> None:
        self._task_encoder = task_encoder

    @property
    def decoder(self) -> SampleDecoder | None:
        return self._task_encoder.decoder

    @decoder.setter
    def decoder(self, value: SampleDecoder | None) -> None:
        self._task_encoder.decoder = value

    @property
    def cookers(self) -> Sequence[Any]:  # type: ignore[override]
        return self._task_encoder.cookers

    def encode_sample(self, sample: T_sample) -> Any:
        return self._task_encoder.encode_sample(sample)

    def batch(self, samples: list[Any]) -> Any:
        return self._task_encoder.batch(samples)

    def encode_batch(self, batch: Any) -> Any:
        return self._task_encoder.encode_batch(batch)


def uses_grouping(
    task_encoder: TaskEncoder[Any, Any, Any, Any], group_batches: bool | None = None
) -> bool:
    """Whether batches are grouped by ``batch_group_criterion``: the one place that decides.

    ``group_batches`` (stoker's switch) wins when given; else, as in Energon, grouping is on
    when the task encoder overrides ``batch_group_criterion`` (in its class or on the instance).

    Example:
        >>> class Buckets(TaskEncoder):
        ...     def batch_group_criterion(self, sample):
        ...         return len(sample), 4
        >>> uses_grouping(Buckets()), uses_grouping(Buckets(), False), uses_grouping(TaskEncoder())
        (True, False, False)
    """
    if group_batches is not None:
        return bool(group_batches)
    return task_encoder._is_overridden(task_encoder.batch_group_criterion)


def blend_sizer(task_encoder: TaskEncoder[Any, Any, Any, Any]) -> Any:
    """The task encoder's ``blend_sample_size`` if it is overridden, else None.

    Example:
        >>> class Tokens(TaskEncoder):
        ...     def blend_sample_size(self, sample):
        ...         return len(sample)
        >>> blend_sizer(Tokens())("abc"), blend_sizer(TaskEncoder())
        (3, None)
    """
    if task_encoder._is_overridden(task_encoder.blend_sample_size):
        return task_encoder.blend_sample_size
    return None


def sample_hooks(task_encoder: TaskEncoder[Any, Any, Any, Any], *, packing: bool) -> list[str]:
    """The per-sample hooks a stream applies to each sample, in order (Energon's rules).

    An overridden ``preencode_sample`` takes the place of ``encode_sample`` (Energon rejects
    overriding both; stoker runs ``encode_sample`` first then). Without packing, an overridden
    ``postencode_sample`` follows; with packing, the packer calls it.

    Example:
        >>> sample_hooks(TaskEncoder(), packing=False)
        ['encode_sample']
    """
    overridden = task_encoder._is_overridden
    hooks = ["encode_sample"]
    if overridden(task_encoder.preencode_sample):
        if not overridden(task_encoder.encode_sample, (TaskEncoder, DefaultTaskEncoder)):
            hooks = []
        hooks.append("preencode_sample")
    if not packing and overridden(task_encoder.postencode_sample):
        hooks.append("postencode_sample")
    return hooks


__all__ = [
    "AugmentTaskEncoder",
    "DefaultTaskEncoder",
    "ErrorPolicy",
    "ErrorTracker",
    "IgnoreSample",
    "Sample",
    "SkipSample",
    "TaskEncoder",
    "blend_sizer",
    "convert",
    "get_stateless",
    "iter_encoded",
    "iter_hook",
    "sample_hooks",
    "sample_seed",
    "stateless",
    "uses_grouping",
]
