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
from stoker.pipeline.errors import ErrorTracker, SkipSample, wrap_failure


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
        raise wrap_failure(e, value, stage)  # noqa: B904 (wrap_failure sets the cause)
    except Exception as e:
        raise wrap_failure(e, value, stage)  # noqa: B904 (wrap_failure sets the cause)
