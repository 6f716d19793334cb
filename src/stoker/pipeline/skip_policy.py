"""The error policy: whether a failure stops the run or is skipped, decided by its scope.

A sample that fails to read, decode, map or encode raises a stoker error (or any exception from
a user hook). The stage running it hands the failure to an :class:`ErrorTracker`, which looks at
its scope (:func:`scope_of`, see :mod:`stoker.errors`): a ``config`` error stops the run at once;
a ``sample``, ``storage`` or ``shard`` error is re-raised naming the sample's key and sources
under ``mode="raise"``, or logged, counted by reason (:mod:`stoker.pipeline.skips`) and skipped
under ``mode="skip"``, up to a limit of consecutive failures (a broken dataset should stop the
run, not spin forever).

Energon's error handlers map onto the policy: :func:`log_exception` is ``mode="skip"``,
:func:`reraise_exception` is ``mode="raise"`` (the original exception), and any other
``handler(exception, sample, sources)`` is called for each failure: it may raise to stop the run,
or return to skip the sample (see :meth:`ErrorPolicy.from_handler`).
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from stoker.errors import FatalSampleError, FormatError, StokerError, StorageError
from stoker.pipeline.sample_failure import (
    BATCH_STAGES,
    ErrorHandler,
    describe_sample,
    log_exception,
    reraise_exception,
    scope_of,
    sources_of,
    wrap_failure,
)
from stoker.pipeline.skips import CORRUPT_SHARD, STORAGE, Skips

logger = logging.getLogger("stoker")


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


STORAGE_SHARDS_IN_A_ROW = 3


class ErrorTracker:
    """Applies an :class:`ErrorPolicy` by scope and counts what was skipped, per reason.

    ``skipped`` counts every skip of this tracker by reason; :meth:`take` hands over what was
    skipped since the last call (by reason, source and example keys: a
    :class:`~stoker.pipeline.skips.Skips`), which a worker sends with its next batch.

    Example:
        >>> tracker = ErrorTracker(ErrorPolicy(mode="skip", max_consecutive_failures=2))
        >>> tracker.failed(ValueError("bad"), {"__key__": "a"}, "encode_sample")
        >>> tracker.skipped
        Counter({'encode_sample: ValueError': 1})
        >>> tracker.take().examples
        {'encode_sample: ValueError': ['a']}
    """

    def __init__(
        self,
        policy: ErrorPolicy | None = None,
        pending: Skips | None = None,
        hook_limits: dict[str, int] | None = None,
    ) -> None:
        self.policy = policy or ErrorPolicy()
        #: Hook -> failures of it in a row before the run stops (its ``failure_tolerance``,
        #: :mod:`stoker.pipeline.tolerance`; 0: none); other failures share the policy's limit.
        self.hook_limits = hook_limits or {}
        #: Failures in a row of each hook of ``hook_limits``.
        self.hook_failures: Counter[str] = Counter()
        self.skipped: Counter[str] = Counter()
        #: What was skipped since the last :meth:`take` (may be shared with other trackers).
        self.pending = Skips() if pending is None else pending
        self.consecutive = 0
        #: Whole batches that failed in a row: samples that encode well in between do not
        #: reset it, so a ``batch()`` that fails on every batch still reaches the limit.
        self.consecutive_batches = 0
        #: Shards whose reads spent their retry budget since the last sample that went through.
        self.storage_shards: set[str] = set()
        #: The text of the last failure (for errors about samples skipped unread after it).
        self.last_failure = ""

    def succeeded(self) -> None:
        """Record that a sample went through; resets the consecutive failure count."""
        self.consecutive = 0
        self.storage_shards.clear()
        if self.hook_failures:
            self.hook_failures = Counter(
                {h: n for h, n in self.hook_failures.items() if h in BATCH_STAGES}
            )

    def batch_succeeded(self) -> None:
        """Record that a batch went through; resets the consecutive batch failure count."""
        self.consecutive_batches = 0
        for stage in BATCH_STAGES:
            self.hook_failures.pop(stage, None)

    def skipped_unread(self, reason: str, *, source: str, key: str) -> None:
        """Count a sample skipped unread because its shard failed earlier in this pass (damaged,
        or its storage did not answer): it counts towards the failures in a row too, so a
        storage that stays down stops the run instead of skipping every sample."""
        self.record(reason, source=source, key=key)
        self.consecutive += 1
        limit = self.policy.max_consecutive_failures
        if limit and self.consecutive >= limit:
            raise (StorageError if reason == STORAGE else FormatError)(
                f"{self.consecutive} samples failed in a row, the last unread because its "
                f"shard failed before ({self.last_failure})",
                hint="Check the storage and the shards named in the log, or raise "
                "ErrorPolicy(max_consecutive_failures=...) (0 disables the limit).",
            )

    def _check_storage(self, original: BaseException, text: str, error: BaseException) -> None:
        """Stop when reads of :data:`STORAGE_SHARDS_IN_A_ROW` different shards in a row spent
        their retry budget: the storage is down, and every further read would wait as long."""
        path = original.path if isinstance(original, StokerError) else None
        self.storage_shards.add(str(path))
        if len(self.storage_shards) >= STORAGE_SHARDS_IN_A_ROW:
            raise StorageError(
                f"reads of {len(self.storage_shards)} different shards in a row failed after "
                f"their retry budget: the storage seems to be down. The last: {text}",
                hint="Check that the storage is reachable; LoaderOptions.retry_seconds sets how "
                "long each read keeps trying.",
            ) from error

    def record(
        self, reason: str, sample: Any = None, *, source: str | None = None, key: str | None = None
    ) -> None:
        """Count one skip for ``reason``; source and key from ``sample`` where not given."""
        if sample is not None and (source is None or key is None):
            found = sources_of(sample)
            if source is None and found:
                source = getattr(found[0], "dataset_path", None)
            if key is None:
                key = describe_sample(sample)[0]
        self.skipped[reason] += 1
        self.pending.add(reason, source=None if source is None else str(source), key=key)

    def take(self) -> Skips | None:
        """What was skipped since the last call (None if nothing)."""
        return self.pending.take()

    def skip(self, sample: Any, stage: str, *, source: str | None = None) -> None:
        """Record a deliberate :class:`SkipSample` (not a failure)."""
        self.record(f"{stage}: SkipSample", sample, source=source)

    def failed(
        self,
        error: Exception,
        sample: Any,
        stage: str = "loading",
        *,
        source: str | None = None,
        key: str | None = None,
    ) -> None:
        """Record a failure: raise it, or log and count it as skipped, by its scope.

        ``sample`` is the sample (or batch) concerned, or a text saying where it came from;
        ``source`` and ``key`` name its dataset and key where ``sample`` cannot. Errors of scope
        ``config`` are raised at once (a :data:`SYSTEM_EXCEPTIONS` one as a
        :class:`SampleError` naming the sample, caused by it). Others go to the policy's
        handler, are raised under ``mode="raise"``, or are skipped and counted under reasons
        ``"<stage>: <exception type>"`` (sample scope), :data:`~stoker.pipeline.skips.STORAGE`
        or :data:`~stoker.pipeline.skips.CORRUPT_SHARD`; past ``max_consecutive_failures`` in a
        row the run stops.
        """
        hook = vars(error).pop("_hook", stage)  # the hook that failed (set by its caller)
        wrapped = wrap_failure(error, sample, stage)
        subject = vars(wrapped).pop("_sample", sample)
        original = vars(wrapped).pop("_original", error)
        scope = scope_of(original)
        if scope == "config":
            raise _config_failure(original, wrapped)
        if self.policy.handler is not None:
            self.policy.handler(original, subject, sources_of(subject))  # raises to stop
        if self.policy.mode == "raise":
            raise wrapped
        tolerance = self.hook_limits.get(hook) if scope == "sample" else None
        count, what = self._count(hook if tolerance is not None else None, stage)
        reason = {"storage": STORAGE, "shard": CORRUPT_SHARD}.get(
            scope, f"{stage}: {type(original).__name__}"
        )
        self.record(reason, subject, source=source, key=key)
        text = f"{wrapped.where}: {wrapped.problem}" if wrapped.where else wrapped.problem
        logger.warning("skipped a %s (%s): %s", what, reason, text)
        self.last_failure = text
        if scope == "storage":
            self._check_storage(original, text, error)
        if tolerance is not None:
            if tolerance and count >= tolerance:
                raise FatalSampleError(
                    f"{hook} failed {count} times in a row (its failure_tolerance={tolerance}); "
                    f"the last: {text}",
                    hint="The data or the hook is probably broken for every sample; fix it, or "
                    f"raise @stateless(failure_tolerance=N) on {hook} (0: no limit).",
                ) from error
            return
        limit = self.policy.max_consecutive_failures
        if limit and count >= limit:
            plural = "batches" if what == "batch" else "samples"
            raise {"storage": StorageError, "shard": FormatError}.get(scope, FatalSampleError)(
                f"{count} {plural} failed in a row; the last: {text}",
                hint="The data or a hook is probably broken for every sample; fix it, or raise "
                "ErrorPolicy(max_consecutive_failures=...) (0 disables the limit).",
            ) from error

    def _count(self, hook: str | None, stage: str) -> tuple[int, str]:
        """One more failure in a row, of ``hook`` (one with a failure tolerance) or else of the
        stage's kind: how many in a row now, and of what (``sample`` or ``batch``)."""
        if hook is not None:
            self.hook_failures[hook] += 1
            return self.hook_failures[hook], "batch" if hook in BATCH_STAGES else "sample"
        if stage in BATCH_STAGES:
            self.consecutive_batches += 1
            return self.consecutive_batches, "batch"
        self.consecutive += 1
        return self.consecutive, "sample"


def _config_failure(original: Exception, wrapped: StokerError) -> Exception:
    """What a failure of scope ``config`` raises: a hook not written (``NotImplementedError``) or
    a stoker error as it was raised; a bug in a hook named with its sample (caused by the bug)."""
    return original if isinstance(original, (NotImplementedError, StokerError)) else wrapped
