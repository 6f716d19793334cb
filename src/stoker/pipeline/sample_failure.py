"""What a failed sample is: its scope, its key and sources in messages, Energon's handlers.

A failure of a sample (or batch) is wrapped as a stoker error naming it (:func:`wrap_failure`)
and sorted by scope (:func:`scope_of`); :class:`SkipSample` drops a sample on purpose. What is
then done with the failure (stop or skip) is :mod:`stoker.pipeline.skip_policy`'s decision.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

from stoker.errors import (
    FatalSampleError,
    SampleError,
    Scope,
    StokerError,
)

logger = logging.getLogger("stoker")


class SkipSample(Exception):
    """Raise in any task encoder hook to drop the current sample (or batch) on purpose.

    Example:
        >>> def encode_sample(sample):
        ...     if not sample.caption:
        ...         raise SkipSample()
        ...     return sample
    """


#: Stages whose failures lose a whole batch (counted apart from single samples' failures).
BATCH_STAGES = ("batch", "encode_batch", "select_samples_to_pack", "pack_selected_samples")

#: Exceptions that mean a bug or a broken environment, not a bad sample: never skipped, never
#: passed to an error handler (Energon's ``SYSTEM_EXCEPTIONS``).

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
    UnboundLocalError,
    FatalSampleError,
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
        for s in _flat(sources)
    )
    return (None if key is None else str(key)), text or "unknown"


def _flat(sources: Any) -> list[Any]:
    """Source infos, a batch's (a sequence per sample) flattened."""
    out: list[Any] = []
    for s in sources or ():
        out.extend(_flat(s) if isinstance(s, (list, tuple)) else [s])
    return out


def scope_of(error: BaseException) -> Scope:
    """How far ``error`` reaches (see :mod:`stoker.errors`): a stoker error's own scope;
    ``config`` (stop at once) for :data:`SYSTEM_EXCEPTIONS` and ``NotImplementedError`` (a bug
    or a missing hook, not a bad sample); ``sample`` for any other exception (a user hook's).

    Example:
        >>> scope_of(KeyError("caption")), scope_of(NameError("x")), scope_of(FatalSampleError("x"))
        ('sample', 'config', 'config')
    """
    if isinstance(error, StokerError):
        return error.scope
    if isinstance(error, (NotImplementedError, *SYSTEM_EXCEPTIONS)):
        return "config"
    return "sample"


def wrap_failure(error: Exception, sample: Any, stage: str) -> StokerError:
    """A :class:`SampleError` for ``error`` raised by ``stage`` on ``sample``, naming both and
    caused by ``error`` (raise it without ``from``).

    An error that already names its sample's key (or, for a shard's or the storage's error, its
    file) is returned as it is: never wrapped twice, never chained to itself. The error keeps
    ``sample`` and the original exception for an error handler (in private attributes that do
    not cross process boundaries).
    """
    if isinstance(error, StokerError) and (
        error.key is not None or (error.scope in ("storage", "shard") and error.path is not None)
    ):
        vars(error).setdefault("_sample", sample)
        return error
    key, sources = describe_sample(sample)
    wrapped = SampleError(
        f"{stage} failed with {type(error).__name__}: {error} (sources: {sources}).",
        key=key,
        hint="Fix the data or the hook, or pass ErrorPolicy(mode='skip') to skip such samples.",
    )
    wrapped.__cause__ = error
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
    return _flat(sources) or None
