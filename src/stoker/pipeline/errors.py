"""Per-sample errors and the policy that decides whether one stops the run or is skipped.

A sample that fails to decode, map or encode raises :class:`SampleError` (or any exception from a
user hook). The stage running it hands the failure to an :class:`ErrorTracker`, which either
re-raises it with the sample's key and sources, or logs and counts it and moves on, up to a
limit of consecutive failures (a broken dataset should stop the run, not spin forever).
"""

from __future__ import annotations

import logging
from collections import Counter
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


@dataclass(frozen=True)
class ErrorPolicy:
    """What to do with a sample whose decoding or encoding fails.

    Args:
        mode: ``"skip"`` logs the failure (logger ``stoker``), counts it and goes on;
            ``"raise"`` stops with a :class:`SampleError` naming the sample.
        max_consecutive_failures: In skip mode, raise after this many failures in a row
            (0 disables the limit).

    Example:
        >>> ErrorPolicy(mode="raise").mode
        'raise'
    """

    mode: Literal["skip", "raise"] = "skip"
    max_consecutive_failures: int = 100

    def __post_init__(self) -> None:
        if self.mode not in ("skip", "raise"):
            raise StokerError(f"invalid error policy {self.mode=}; use 'skip' or 'raise'.")
        if self.max_consecutive_failures < 0:
            raise StokerError(f"{self.max_consecutive_failures=} must be >= 0.")


def describe_sample(sample: Any) -> tuple[str | None, str]:
    """The key of a sample (or batch) and its sources as short text, for messages.

    A ``str`` is taken as an already written description of where the sample came from.
    """
    if isinstance(sample, str):
        return None, sample
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
    """A :class:`SampleError` for ``error`` raised by ``stage`` on ``sample``, naming both."""
    if isinstance(error, SampleError) and error.key is not None:
        return error
    key, sources = describe_sample(sample)
    return SampleError(
        f"{stage} failed with {type(error).__name__}: {error} (sources: {sources}).",
        key=key,
        hint="Fix the data or the hook, or pass ErrorPolicy(mode='skip') to skip such samples.",
    )


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

    def succeeded(self) -> None:
        """Record that a sample went through; resets the consecutive failure count."""
        self.consecutive = 0

    def skip(self, sample: Any, stage: str) -> None:
        """Record a deliberate :class:`SkipSample` (not a failure)."""
        self.skipped[f"{stage}: SkipSample"] += 1

    def failed(self, error: Exception, sample: Any, stage: str = "loading") -> None:
        """Record a failure: raise under ``mode="raise"`` or past the limit, else log it.

        ``sample`` is the sample (or batch) concerned, or a text saying where it came from.
        Errors about the configuration, not one sample (a ``StokerError`` other than
        ``SampleError``, or a missing hook's ``NotImplementedError``), are re-raised at once.
        """
        fatal = isinstance(error, (StokerError, NotImplementedError))
        if fatal and not isinstance(error, SampleError):
            raise error
        wrapped = wrap_failure(error, sample, stage)
        if self.policy.mode == "raise":
            raise wrapped from error
        self.consecutive += 1
        self.skipped[f"{stage}: {type(error).__name__}"] += 1
        logger.warning("skipped a sample: %s", wrapped.message)
        limit = self.policy.max_consecutive_failures
        if limit and self.consecutive >= limit:
            raise StokerError(
                f"{self.consecutive} samples failed in a row; the last: {wrapped.message}",
                hint="The data or a hook is probably broken for every sample; fix it, or raise "
                "ErrorPolicy(max_consecutive_failures=...) (0 disables the limit).",
            ) from error
