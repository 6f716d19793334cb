"""Running users' functions in a wrapper: their outputs with where to resume after each, and
Energon's error rules."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import Any

from stoker.model.worker_config import WorkerConfig
from stoker.pipeline.sample_failure import SkipSample
from stoker.pipeline.skip_policy import ErrorPolicy, ErrorTracker
from stoker.pipeline.skips import Skips
from stoker.wrappers.base import Mark


def emit(
    outputs: Iterable[Any], before: Mark, after: Mark, skip: int
) -> Iterator[tuple[Any, Mark, int]]:
    """The outputs of one input (or group of inputs) with where to resume after each.

    After the last output: ``after`` (the inputs are used up); after output ``j`` of more: the
    inputs again from ``before``, less ``j`` outputs. The first ``skip`` outputs were used before
    a restore and are not yielded. Looks one output ahead to know which is the last.
    """
    iterator = iter(outputs)
    used = 0
    for current in iterator:
        while True:
            used += 1
            try:
                following = next(iterator)
            except StopIteration:
                if used > skip:
                    yield current, after, 0
                return
            if used > skip:
                yield current, before, used
            current = following


class Failures:
    """Runs a user function under Energon's error rules: :class:`SkipSample` drops the input;
    another exception goes to ``worker_config.global_error_handler`` (or ``handler``), which
    raises to stop or returns to skip, up to ``tolerance`` failures in a row (0: no limit)."""

    def __init__(
        self,
        worker_config: WorkerConfig,
        name: str,
        tolerance: int,
        handler: Callable[[Exception, Any], None] | None = None,
        skips: Skips | None = None,
    ) -> None:
        self.name = name
        policy = ErrorPolicy.from_handler(worker_config.global_error_handler)
        if handler is not None:  # Energon < 7's per-wrapper error_handler(exception, sample)
            policy = dataclasses.replace(policy, mode="skip", handler=_two_args(handler))
        policy = dataclasses.replace(policy, max_consecutive_failures=tolerance)
        self.tracker = ErrorTracker(policy, skips)

    def run(self, fn: Callable[[Any], Any], value: Any) -> Iterator[Any]:
        """The outputs of ``fn(value)``: one, or each of a generator's."""
        try:
            result = fn(value)
            if isinstance(result, Generator):
                yield from result
            else:
                yield result
        except SkipSample:
            self.tracker.skip(value, self.name)
        except Exception as e:
            self.tracker.failed(e, value, self.name)
        else:
            self.tracker.succeeded()


def _two_args(handler: Callable[[Exception, Any], None]) -> Callable[..., None]:
    def call(error: Exception, sample: Any, sources: Any = None) -> None:
        handler(error, sample)

    return call


def function_name(fn: Any) -> str:
    """A stable name of a user function, for fingerprints."""
    return str(getattr(fn, "__qualname__", type(fn).__qualname__))


def get_sample_restore_key(sample: Any) -> Any:
    """A sample's (or batch's) ``__restore_key__``, from an attribute or a dict key; None if it
    has none (Energon's helper).

    Example:
        >>> get_sample_restore_key({"__restore_key__": ("Webdataset", "/data", 3)})
        ('Webdataset', '/data', 3)
    """
    if isinstance(sample, dict):
        return sample.get("__restore_key__")
    return getattr(sample, "__restore_key__", None)
