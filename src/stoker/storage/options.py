"""A loader's resources and I/O settings (:class:`LoaderOptions`) and their defaults.

This is the one module of stoker that reads ``STOKER_*`` environment variables. Each is the
documented default of one field (:data:`ENV`); they are read in the main process when options are
made, and a loader hands its options to its worker processes with the recipe, so workers never
read the environment. Code below the loader asks :func:`current` for the options of the process:
the loader's in its workers, else the defaults from the environment.

Example:
    >>> from stoker import LoaderOptions
    >>> options = LoaderOptions(prefetch_bytes=64 << 20, prefetch_threads=4, cache_dir=None)
    >>> options.prefetch_threads
    4
    >>> LoaderOptions(prefetch_threads=0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    stoker.errors.ConfigError: LoaderOptions.prefetch_threads=0 must be a whole number >= 1. ...
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from stoker.errors import ConfigError

#: Field -> the environment variable that sets its default.
ENV: dict[str, str] = {
    "prefetch_bytes": "STOKER_PREFETCH_BYTES",
    "prefetch_threads": "STOKER_PREFETCH_THREADS",
    "batch_slots_mb": "STOKER_BATCH_SLOTS_MB",
    "cache_dir": "STOKER_CACHE_DIR",
    "cache_max_bytes": "STOKER_CACHE_MAX_BYTES",
    "cache_fresh_seconds": "STOKER_CACHE_FRESH_SECONDS",
    "storage_config": "STOKER_STORAGE_CONFIG",
    "stats": "STOKER_STATS",
    "trust_pickles": "STOKER_TRUST_PICKLES",
    "row_group_cache_bytes": "STOKER_ROW_GROUP_CACHE_BYTES",
}
#: The variable that allows full unpickling of ``.pickle`` parts (``trust_pickles``).
TRUST_PICKLES_ENV = ENV["trust_pickles"]
#: Built-in defaults that other modules use too (where no options are at hand).
BATCH_SLOTS_MB: float | None = None  # sized from the batches and prefetch_factor
CACHE_MAX_BYTES = 4 << 30
CACHE_FRESH_SECONDS = 10.0
ROW_GROUP_CACHE_BYTES = 256 << 20
#: Other variables the defaults depend on (where the cache goes by default).
_OTHER_ENV = ("XDG_CACHE_HOME", "HOME")
#: Values of ``STOKER_CACHE_DIR`` that turn the cache off.
_OFF = ("off", "none", "0")


def _default(name: str) -> Any:
    return getattr(defaults(), name)


def _env_field(name: str) -> Any:
    return field(default_factory=lambda: _default(name))


@dataclass(frozen=True)
class LoaderOptions:
    """Resources and I/O settings of a loader; each field defaults to its environment variable.

    Attributes:
        prefetch_bytes: Bytes one worker process may hold read ahead from remote stores, over
            all its data sources together (``STOKER_PREFETCH_BYTES``, 256 MiB; 0: off).
        prefetch_threads: Concurrent remote reads of one worker process, over all its data
            sources (``STOKER_PREFETCH_THREADS``, 8).
        batch_slots_mb: Shared memory (MB) a worker keeps to build batches in and reuse
            (``STOKER_BATCH_SLOTS_MB``; None or ``auto``, the default: room for the batches
            in flight, ``prefetch_factor`` of the largest so far; 0: a fresh segment
            per batch).
        cache_dir: The metadata cache of remote datasets, shared by the processes of a machine
            (``STOKER_CACHE_DIR``, ``~/.cache/stoker``; None, or ``off`` in the variable: off).
        cache_max_bytes: Bound of the metadata cache (``STOKER_CACHE_MAX_BYTES``, 4 GiB).
        cache_fresh_seconds: How long a version check of a cached file is trusted
            (``STOKER_CACHE_FRESH_SECONDS``, 10; 0: check on every read).
        retry_seconds: Seconds one remote request may keep retrying, over every store (None:
            the storage configuration's retry budget, 120 s by default). No environment
            variable: the storage configuration sets the default.
        storage_config: A YAML file with endpoints, credentials and retry settings of object
            stores (``STOKER_STORAGE_CONFIG``; None: the AWS chain's defaults).
        stats: Measure what :meth:`Loader.stats` reports (stage times, storage, memory) in the
            workers (``STOKER_STATS``, on; ``0`` or ``off``: only counts and data wait).
        max_storage_skip_share: Under the ``skip`` error policy, the share of a pass's samples
            that may be skipped because their reads failed after every retry (reason
            ``"storage: retries exhausted"``) before the pass ends in a :class:`StorageError`
            naming the count instead of ending short (0.01: 1 %; 1.0: never; below it, one
            warning per pass with the count). Checked also every 10,000 samples of a pass, so
            that a pass that never ends (``repeat=True``) cannot run short quietly. No
            environment variable.
        trust_pickles: Unpickle ``.pickle``/``.pyd`` parts fully, running whatever code they
            name (``STOKER_TRUST_PICKLES``, off: only plain data and numpy arrays are
            unpickled, anything else is refused; docs/security.md). Only for data you trust.
        row_group_cache_bytes: Bytes of Parquet row groups (Arrow tables) and of rows made
            Python values that one reader keeps (``STOKER_ROW_GROUP_CACHE_BYTES``, 256 MiB).
            A shuffled epoch reads each row group once where this holds the row groups its
            slices touch, else again for each slice that finds it gone (docs/parquet.md).
        allow_mix_change: Let a restore continue a state saved under another mix of datasets
            (weights, schedules, datasets added or removed; docs/schedules.md); off: such a
            restore is refused, listing what differs. No environment variable.

    Example:
        >>> import dataclasses
        >>> options = LoaderOptions(prefetch_bytes=0)  # no read-ahead
        >>> dataclasses.replace(options, batch_slots_mb=512).batch_slots_mb
        512
    """

    prefetch_bytes: int = _env_field("prefetch_bytes")
    prefetch_threads: int = _env_field("prefetch_threads")
    batch_slots_mb: float | None = _env_field("batch_slots_mb")
    cache_dir: str | None = _env_field("cache_dir")
    cache_max_bytes: int = _env_field("cache_max_bytes")
    cache_fresh_seconds: float = _env_field("cache_fresh_seconds")
    retry_seconds: float | None = None
    storage_config: str | None = _env_field("storage_config")
    stats: bool = _env_field("stats")
    max_storage_skip_share: float = 0.01
    trust_pickles: bool = _env_field("trust_pickles")
    row_group_cache_bytes: int = _env_field("row_group_cache_bytes")
    allow_mix_change: bool = False

    def __post_init__(self) -> None:
        for name, check in _CHECKS.items():
            problem = check(getattr(self, name))
            if problem:
                raise ConfigError(
                    f"LoaderOptions.{name}={getattr(self, name)!r} must be {problem}.",
                    hint=f"The default is set by {ENV[name]}." if name in ENV else None,
                )


def _whole(minimum: int) -> Any:
    def check(value: object) -> str:
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= minimum
        return "" if ok else f"a whole number >= {minimum}"

    return check


def _number(*, optional: bool = False, positive: bool = False) -> Any:
    def check(value: object) -> str:
        if value is None and optional:
            return ""
        ok = False
        if isinstance(value, int | float) and not isinstance(value, bool):
            ok = math.isfinite(value) and (value > 0 if positive else value >= 0)
        what = "a number > 0" if positive else "a number >= 0"
        return "" if ok else what + (" or None" if optional else "")

    return check


def _path(value: object) -> str:
    return "" if value is None or (isinstance(value, str) and value) else "a path or None"


_CHECKS = {
    "prefetch_bytes": _whole(0),
    "prefetch_threads": _whole(1),
    "batch_slots_mb": _number(optional=True),
    "cache_dir": _path,
    "cache_max_bytes": _whole(0),
    "cache_fresh_seconds": _number(),
    "retry_seconds": _number(optional=True, positive=True),
    "storage_config": _path,
    "stats": lambda value: "" if isinstance(value, bool) else "True or False",
    "max_storage_skip_share": lambda value: _number()(value) or ("" if value <= 1 else "<= 1"),
    "trust_pickles": lambda value: "" if isinstance(value, bool) else "True or False",
    "row_group_cache_bytes": _whole(0),
    "allow_mix_change": lambda value: "" if isinstance(value, bool) else "True or False",
}

_BUILT_IN: dict[str, Any] = {
    "prefetch_bytes": 256 << 20,
    "prefetch_threads": 8,
    "batch_slots_mb": BATCH_SLOTS_MB,
    "cache_max_bytes": CACHE_MAX_BYTES,
    "cache_fresh_seconds": CACHE_FRESH_SECONDS,
    "storage_config": None,
    "stats": True,
    "trust_pickles": False,
    "row_group_cache_bytes": ROW_GROUP_CACHE_BYTES,
}


def from_env(environ: Mapping[str, str] | None = None) -> LoaderOptions:
    """Options from the ``STOKER_*`` variables of ``environ`` (default: this process's).

    Raises:
        ConfigError: a variable's value is not valid for its field (the message names both).
    """
    env = os.environ if environ is None else environ
    values = dict(_BUILT_IN)
    cache_home = env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME") or "~", ".cache")
    values["cache_dir"] = os.path.expanduser(os.path.join(cache_home, "stoker"))
    for name, var in ENV.items():
        text = env.get(var, "").strip()
        if text:
            values[name] = _parse(name, var, text)
    return LoaderOptions(**values)


def _parse(name: str, var: str, text: str) -> Any:
    if name == "cache_dir":
        return None if text.lower() in _OFF else os.path.expanduser(text)
    if name == "storage_config":
        return text
    if name == "stats":
        return text.lower() not in (*_OFF, "false", "no")
    if name == "trust_pickles":
        return text.lower() in ("1", "true", "yes", "on")
    if name == "batch_slots_mb" and text.lower() in ("auto", "none"):
        return None
    check = _CHECKS[name]
    value: Any = text
    with contextlib.suppress(ValueError, OverflowError):
        if name in ("cache_max_bytes", "row_group_cache_bytes"):  # a byte count may be 4e9
            value = int(float(text)) if math.isfinite(float(text)) else text
        else:
            value = int(text) if isinstance(_BUILT_IN[name], int) else float(text)
    problem = check(value)
    if problem:
        raise ConfigError(
            f"{var}={text!r} is not {problem} (the default of LoaderOptions.{name}).",
            hint=f"E.g. {var}={'auto' if _BUILT_IN[name] is None else _BUILT_IN[name]}.",
        )
    return value


class _RetryBudget(Protocol):
    @property
    def max_seconds(self) -> float: ...


P = TypeVar("P", bound=_RetryBudget)

_MEMO: dict[tuple[str | None, ...], LoaderOptions] = {}
_ACTIVE: list[tuple[int, LoaderOptions]] = []
_THREAD = threading.local()


def defaults() -> LoaderOptions:
    """The options the environment sets (parsed once per distinct environment)."""
    key = tuple(os.environ.get(var) for var in (*ENV.values(), *_OTHER_ENV))
    options = _MEMO.get(key)
    if options is None:
        _MEMO.clear()
        options = _MEMO[key] = from_env()
    return options


def current() -> LoaderOptions:
    """The options of this process: the loader's in its workers, else :func:`defaults`."""
    threads = getattr(_THREAD, "options", None)  # a thread worker's (activate_thread)
    if threads is not None:
        return threads  # type: ignore[no-any-return]
    if _ACTIVE and _ACTIVE[-1][0] == os.getpid():
        return _ACTIVE[-1][1]
    return defaults()


def retry_policy(policy: P) -> P:
    """``policy`` (a retry budget: a dataclass with ``max_seconds``) with
    ``LoaderOptions.retry_seconds`` of this process, where that is set."""
    seconds = current().retry_seconds
    if seconds is None or policy.max_seconds == seconds:
        return policy
    return dataclasses.replace(policy, max_seconds=seconds)  # type: ignore[type-var]


#: Security switches, read where datasets are loaded (the caller's process), not loader options.
ALLOWED_MODULES_ENV = "STOKER_ALLOWED_MODULES"
TRUST_SAMPLE_LOADER_ENV = "STOKER_TRUST_SAMPLE_LOADER"


def env_allowed_modules() -> tuple[str, ...]:
    """Modules whose classes a ``dataset.yaml`` may name (``STOKER_ALLOWED_MODULES``, comma
    separated), as ``allowed_modules=`` for code you cannot change."""
    names = os.environ.get(ALLOWED_MODULES_ENV, "").split(",")
    return tuple(n.strip() for n in names if n.strip())


def env_trusts_sample_loader() -> bool:
    """Whether ``STOKER_TRUST_SAMPLE_LOADER=1`` allows any dataset's ``sample_loader.py`` (as
    ``trust_sample_loader=True``)."""
    return os.environ.get(TRUST_SAMPLE_LOADER_ENV) == "1"


ALLOW_OUTSIDE_PATHS_ENV = "STOKER_ALLOW_OUTSIDE_PATHS"
TRUST_METADATASET_ENV = "STOKER_TRUST_METADATASET"


def _env_flag(var: str) -> bool:
    return os.environ.get(var, "").strip().lower() in ("1", "true", "yes")


def env_allows_outside_paths() -> bool:
    """Whether ``STOKER_ALLOW_OUTSIDE_PATHS`` lets dataset metadata name shards outside the
    dataset's folder (as ``allow_outside_paths=True``)."""
    return _env_flag(ALLOW_OUTSIDE_PATHS_ENV)


def env_trusts_metadataset() -> bool:
    """Whether ``STOKER_TRUST_METADATASET`` trusts every joiner the user's metadatasets name."""
    return _env_flag(TRUST_METADATASET_ENV)


def env_seconds(var: str, default: float) -> float:
    """A number of seconds >= 0 from the variable ``var`` (``default`` when unset).

    Raises:
        ConfigError: the value is not a finite number >= 0.
    """
    text = os.environ.get(var, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise ConfigError(f"{var}={text!r} must be a number of seconds >= 0.")
    return value


#: Seconds between progress lines when output is not a terminal.
PROGRESS_INTERVAL_ENV = "STOKER_PROGRESS_INTERVAL"
#: Seconds the ranks of a distributed prepare wait for each other.
DISTRIBUTED_TIMEOUT_ENV = "STOKER_DISTRIBUTED_TIMEOUT"


def env_source_date_epoch() -> int | None:
    """``SOURCE_DATE_EPOCH`` (reproducible builds): the time to record instead of now."""
    text = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    return int(text) if text.isdigit() else None


def env_debug() -> bool:
    """Whether ``STOKER_DEBUG`` (anything but empty or ``0``) asks the CLI for tracebacks."""
    return os.environ.get("STOKER_DEBUG", "") not in ("", "0")


def env_no_color() -> bool:
    """Whether ``NO_COLOR`` (https://no-color.org) asks for output without colours."""
    return bool(os.environ.get("NO_COLOR"))


#: Seconds of the storage's default retry budget (where its configuration sets none).
STORAGE_RETRY_SECONDS_ENV = "STOKER_STORAGE_RETRY_SECONDS"


def env_storage_retry_seconds() -> str:
    """``STOKER_STORAGE_RETRY_SECONDS`` as written ("" when unset); ``storage.config`` parses it."""
    return os.environ.get(STORAGE_RETRY_SECONDS_ENV, "").strip()


def activate(options: LoaderOptions | None) -> LoaderOptions | None:
    """Make ``options`` this process's (None: the defaults again); returns the previous ones."""
    previous = _ACTIVE[-1][1] if _ACTIVE and _ACTIVE[-1][0] == os.getpid() else None
    _ACTIVE.clear()
    if options is not None:
        _ACTIVE.append((os.getpid(), options))
    return previous


def activate_thread(options: LoaderOptions | None) -> None:
    """Make ``options`` those of this thread alone (a thread worker of a loader; None: the
    process's again)."""
    _THREAD.options = options
