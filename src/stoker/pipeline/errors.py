"""Per-sample errors and the policy that decides whether one stops the run or is skipped.

A sample that fails to decode, map or encode raises :class:`SampleError` (or any exception from a
user hook). The stage running it hands the failure to an :class:`ErrorTracker`, which either
re-raises it with the sample's key and sources, or logs and counts it and moves on, up to a
limit of consecutive failures (a broken dataset should stop the run, not spin forever).

Energon's error handlers map onto the policy: :func:`log_exception` is ``mode="skip"``,
:func:`reraise_exception` is ``mode="raise"`` (the original exception), and any other
``handler(exception, sample, sources)`` is called for each failure: it may raise to stop the run,
or return to skip the sample (see :meth:`ErrorPolicy.from_handler`).
"""

from __future__ import annotations

import logging
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from stoker.errors import StokerError

logger = logging.getLogger("stoker")


class SkipSample(Exception):
    """Raise in any task encoder hook to drop the current sample (or batch) on purpose.

    Example:
        >>> def encode_sample(sample):
        ...     if not sample.caption:
        ...         raise SkipSample()
        ...     return sample
    """


class SampleError(StokerError):
    """One sample could not be read, decoded, mapped or encoded.

    Args:
        problem: What went wrong.
        part: The part (e.g. ``jpg``) or field concerned, if any.

    Example:
        >>> str(SampleError("cannot decode.", key="s1", part="jpg"))
        "sample 's1', part 'jpg': cannot decode."
    """

    def __init__(
        self,
        problem: str,
        *,
        path: str | None = None,
        key: str | None = None,
        offset: int | None = None,
        part: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.part = part
        super().__init__(problem, path=path, key=key, offset=offset, hint=hint)

    @property
    def where(self) -> str:
        where = super().where
        if self.part is None:
            return where
        return f"{where}, part {self.part!r}" if where else f"part {self.part!r}"


#: Exceptions that mean a bug or a broken environment, not a bad sample: never skipped, never
#: passed to an error handler (Energon's ``SYSTEM_EXCEPTIONS``).
#: Stages whose failures lose a whole batch (counted apart from single samples' failures).
BATCH_STAGES = ("batch", "encode_batch")

SYSTEM_EXCEPTIONS = (
    SystemError,
    SyntaxError,
    ImportError,
    StopIteration,
    StopAsyncIteration,
    MemoryError,
    RecursionError,
    ReferenceError,
    NameError,
)

#: Energon's error handler signature: ``handler(exception, sample, sources)``.
ErrorHandler = Callable[[Exception, Any, "list[Any] | None"], None]


def reraise_exception(e: Exception, sample: Any, sources: list[Any] | None = None) -> None:
    """Error handler that stops the run with the original exception (Energon's name).

    The exception gets a note naming the sample's key and sources.

    Example:
        >>> from stoker import WorkerConfig
        >>> wc = WorkerConfig(rank=0, world_size=1, num_workers=0,
        ...                   global_error_handler=reraise_exception)
    """
    key, where = describe_sample(sample)
    if sys.version_info >= (3, 11):
        e.add_note(f"stoker: while processing sample {key!r} (sources: {where}).")
    raise e


def log_exception(e: Exception, sample: Any, sources: list[Any] | None = None) -> None:
    """Error handler that logs the failure with the sample's key and sources, and lets the
    loader skip the sample (Energon's name and default handler; logger ``stoker``)."""
    key, where = describe_sample(sample)
    logger.warning(
        "skipped sample %r (sources: %s): %s: %s", key, where, type(e).__name__, e, exc_info=e
    )


@dataclass(frozen=True)
class ErrorPolicy:
    """What to do with a sample whose decoding or encoding fails.

    Args:
        mode: ``"skip"`` logs the failure (logger ``stoker``), counts it and goes on;
            ``"raise"`` stops with a :class:`SampleError` naming the sample.
        max_consecutive_failures: In skip mode, raise after this many failures in a row
            (0 disables the limit).
        handler: Called as ``handler(exception, sample, sources)`` for each failure instead of
            logging (Energon's ``global_error_handler``): it raises to stop, or returns to skip.

    Example:
        >>> ErrorPolicy(mode="raise").mode
        'raise'
    """

    mode: Literal["skip", "raise"] = "skip"
    max_consecutive_failures: int = 100
    handler: ErrorHandler | None = None

    def __post_init__(self) -> None:
        if self.mode not in ("skip", "raise"):
            raise StokerError(f"invalid error policy mode={self.mode!r}; use 'skip' or 'raise'.")
        if self.max_consecutive_failures < 0:
            raise StokerError(
                f"max_consecutive_failures={self.max_consecutive_failures} must be >= 0."
            )

    @staticmethod
    def from_handler(handler: ErrorHandler | None) -> ErrorPolicy:
        """The policy for an Energon error handler (``WorkerConfig.global_error_handler``).

        Example:
            >>> ErrorPolicy.from_handler(log_exception) == ErrorPolicy()
            True
        """
        if handler is None or handler is log_exception:
            return ErrorPolicy()
        if handler is reraise_exception:
            return ErrorPolicy(mode="raise", handler=reraise_exception)
        return ErrorPolicy(handler=handler)


def describe_sample(sample: Any) -> tuple[str | None, str]:
    """The key of a sample (or batch) and its sources as short text, for messages.

    A ``str`` is taken as an already written description of where the sample came from.
    """
    if isinstance(sample, str):
        return None, sample
    if isinstance(sample, list) and sample:  # the samples of a batch
        keys = [describe_sample(s)[0] for s in sample]
        where = ", ".join(sorted({describe_sample(s)[1] for s in sample})[:3])
        return f"{keys[0]} .. {keys[-1]} ({len(keys)} samples)", where
    if isinstance(sample, dict):
        key, sources = sample.get("__key__"), sample.get("__sources__")
    else:
        key, sources = getattr(sample, "__key__", None), getattr(sample, "__sources__", None)
    text = ", ".join(
        f"{getattr(s, 'shard_name', None) or getattr(s, 'dataset_path', '?')}"
        f"[{getattr(s, 'index', '?')}]"
        for s in sources or ()
    )
    return (None if key is None else str(key)), text or "unknown"


def wrap_failure(error: Exception, sample: Any, stage: str) -> SampleError:
    """A :class:`SampleError` for ``error`` raised by ``stage`` on ``sample``, naming both.

    The error keeps ``sample`` and the original exception for an error handler (in private
    attributes that do not cross process boundaries).
    """
    if isinstance(error, SampleError) and error.key is not None:
        return error
    key, sources = describe_sample(sample)
    wrapped = SampleError(
        f"{stage} failed with {type(error).__name__}: {error} (sources: {sources}).",
        key=key,
        hint="Fix the data or the hook, or pass ErrorPolicy(mode='skip') to skip such samples.",
    )
    vars(wrapped).update(_sample=sample, _original=error)
    return wrapped


def sources_of(sample: Any) -> list[Any] | None:
    """The ``__sources__`` of a sample, a dict sample or a list of them (Energon's
    ``get_source_info``), or None."""
    if isinstance(sample, list):
        found = [s for item in sample for s in sources_of(item) or ()]
        return found or None
    sources = sample.get("__sources__") if isinstance(sample, dict) else None
    if sources is None and not isinstance(sample, dict):
        sources = getattr(sample, "__sources__", None)
    return list(sources) if sources else None


class ErrorTracker:
    """Applies an :class:`ErrorPolicy` and counts what was skipped, per reason.

    Example:
        >>> tracker = ErrorTracker(ErrorPolicy(mode="skip", max_consecutive_failures=2))
        >>> tracker.failed(ValueError("bad"), {"__key__": "a"}, "encode_sample")
        >>> tracker.skipped
        Counter({'encode_sample: ValueError': 1})
    """

    def __init__(self, policy: ErrorPolicy | None = None) -> None:
        self.policy = policy or ErrorPolicy()
        self.skipped: Counter[str] = Counter()
        self.consecutive = 0
        #: Whole batches that failed in a row: samples that encode well in between do not
        #: reset it, so a ``batch()`` that fails on every batch still reaches the limit.
        self.consecutive_batches = 0

    def succeeded(self) -> None:
        """Record that a sample went through; resets the consecutive failure count."""
        self.consecutive = 0

    def batch_succeeded(self) -> None:
        """Record that a batch went through; resets the consecutive batch failure count."""
        self.consecutive_batches = 0

    def skip(self, sample: Any, stage: str) -> None:
        """Record a deliberate :class:`SkipSample` (not a failure)."""
        self.skipped[f"{stage}: SkipSample"] += 1

    def failed(self, error: Exception, sample: Any, stage: str = "loading") -> None:
        """Record a failure: raise under ``mode="raise"`` or past the limit, else log it.

        ``sample`` is the sample (or batch) concerned, or a text saying where it came from.
        Errors about the configuration, not one sample (a ``StokerError`` other than
        ``SampleError``, or a missing hook's ``NotImplementedError``), and
        :data:`SYSTEM_EXCEPTIONS` (e.g. a ``NameError`` in a hook) are raised at once.
        """
        fatal = isinstance(error, (StokerError, NotImplementedError))
        if fatal and not isinstance(error, SampleError):
            raise error
        wrapped = wrap_failure(error, sample, stage)
        subject = vars(wrapped).pop("_sample", sample)
        original = vars(wrapped).pop("_original", error)
        if isinstance(original, SYSTEM_EXCEPTIONS):  # a bug, not a bad sample (as Energon)
            raise wrapped from original
        if self.policy.handler is not None:
            self.policy.handler(original, subject, sources_of(subject))  # raises to stop
        if self.policy.mode == "raise":
            raise wrapped from error
        if stage in BATCH_STAGES:
            self.consecutive_batches += 1
            count, what, plural = self.consecutive_batches, "batch", "batches"
        else:
            self.consecutive += 1
            count, what, plural = self.consecutive, "sample", "samples"
        self.skipped[f"{stage}: {type(original).__name__}"] += 1
        text = f"{wrapped.where}: {wrapped.problem}" if wrapped.where else wrapped.problem
        logger.warning("skipped a %s: %s", what, text)
        limit = self.policy.max_consecutive_failures
        if limit and count >= limit:
            raise StokerError(
                f"{count} {plural} failed in a row; the last: {text}",
                hint="The data or a hook is probably broken for every sample; fix it, or raise "
                "ErrorPolicy(max_consecutive_failures=...) (0 disables the limit).",
            ) from error
