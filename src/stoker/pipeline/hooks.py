"""Running a user's hook on a sample: its 0..n outputs, skips counted, failures named.

A hook returns one output, or is a generator of several; :class:`SkipSample` drops the sample
(counted by the stream's :class:`ErrorTracker`); any other exception becomes a
:class:`~stoker.errors.SampleError` naming the sample and the hook. The task encoder's hooks
(:mod:`stoker.model.task`) and the packing hooks run through these functions.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterator, Sequence
from typing import Any

from stoker.errors import SampleError, StokerError
from stoker.pipeline.sample_failure import SkipSample, wrap_failure
from stoker.pipeline.skip_policy import ErrorTracker


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
    task_encoder: Any,
    sample: Any,
    *,
    tracker: ErrorTracker | None = None,
    hooks: Sequence[str] = ("encode_sample",),
) -> Iterator[Any]:
    """``task_encoder.encode_sample(sample)`` (or the chain of ``hooks``, see
    :func:`sample_hooks`) as an iterator of its 0..n outputs.

    A returned value gives one output, a generator its items; :class:`SkipSample` ends the
    outputs (counted by ``tracker``). Other exceptions propagate as a :class:`SampleError`
    naming the sample's key and sources.

    Example:
        >>> class Lower:
        ...     def encode_sample(self, sample):
        ...         return sample.lower()
        >>> list(iter_encoded(Lower(), "S"))
        ['s']
    """
    values = iter_hook(getattr(task_encoder, hooks[0]), sample, stage=hooks[0], tracker=tracker)
    for name in hooks[1:]:
        values = _then(getattr(task_encoder, name), values, name, tracker)
    return values


def _then(hook: Any, values: Iterator[Any], stage: str, tracker: ErrorTracker | None) -> Any:
    """The outputs of ``hook`` on each of ``values``, made as they are taken."""
    for value in values:
        yield from iter_hook(hook, value, stage=stage, tracker=tracker)


#: What :func:`call_hook` returns when the hook skipped its sample (:class:`SkipSample`).
NO_OUTPUT: Any = object()


def iter_hook(
    hook: Any, value: Any, *, stage: str, tracker: ErrorTracker | None = None
) -> Iterator[Any]:
    """Call ``hook(value)`` and iterate its output(s); see :func:`iter_encoded`."""
    result = call_hook(hook, value, stage=stage, tracker=tracker)
    if inspect.isgenerator(result):
        yield from hook_items(result, value, stage=stage, tracker=tracker)
    elif result is not NO_OUTPUT:
        yield result


def call_hook(hook: Any, value: Any, *, stage: str, tracker: ErrorTracker | None = None) -> Any:
    """``hook(value)``: its result (a generator as it is, see :func:`hook_items`), or
    :data:`NO_OUTPUT` where the hook raised :class:`SkipSample` (counted by ``tracker``).

    Example:
        >>> call_hook(str.lower, "S", stage="encode_sample")
        's'
    """
    try:
        return hook(value)
    except SkipSample:
        if tracker is not None:
            tracker.skip(value, stage)
        return NO_OUTPUT
    except Exception as e:
        raise _failure(e, value, stage)  # noqa: B904 (wrap_failure sets the cause)


def hook_items(
    items: Iterator[Any], value: Any, *, stage: str, tracker: ErrorTracker | None = None
) -> Iterator[Any]:
    """The items of a generator hook's ``items`` (made on ``value``), each made as it is
    taken; :class:`SkipSample` ends them (counted), other failures name the sample."""
    try:
        yield from items
    except SkipSample:
        if tracker is not None:
            tracker.skip(value, stage)
    except Exception as e:
        raise _failure(e, value, stage)  # noqa: B904 (wrap_failure sets the cause)


def _failure(error: Exception, value: Any, stage: str) -> Exception:
    """What a hook's failure raises: a configuration error (not a :class:`SampleError`) as it
    is, anything else as a :class:`SampleError` naming the sample and the hook."""
    if isinstance(error, (NotImplementedError, StokerError)) and not isinstance(error, SampleError):
        return error
    wrapped = wrap_failure(error, value, stage)
    vars(wrapped)["_hook"] = stage  # whose failure_tolerance applies (ErrorTracker.failed)
    return wrapped
