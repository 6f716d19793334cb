"""``stateless``: mark task-encoder hooks as re-runnable, and seed their RNGs per sample.

:func:`stateless` is Energon's decorator; with ``restore_seeds=True`` a hook runs with Python's,
numpy's and torch's global RNGs seeded from the sample's keys (:func:`sample_seed`), so random
augmentations repeat exactly when a sample is read again after a restart. The caller's RNG
states are captured and restored around each call (and around each step of a generator hook).
The global RNGs are the process's: thread workers (``worker_type="thread"``) run such hooks one
at a time (:data:`_GLOBAL_RNGS`), so a hook sees the numbers of its own sample's seed.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import os
import random
import threading
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypeVar, overload

import numpy as np
import torch

from stoker.errors import StokerError

P = ParamSpec("P")
R = TypeVar("R")

#: Held while a seeded hook uses the global RNGs (re-entrant: a seeded hook may call another).
_GLOBAL_RNGS = threading.RLock()


def _new_lock_in_child() -> None:
    """A process forked while a thread worker held the lock would wait for it forever."""
    global _GLOBAL_RNGS
    _GLOBAL_RNGS = threading.RLock()


os.register_at_fork(after_in_child=_new_lock_in_child)


@overload
def stateless(fn: Callable[P, R]) -> Callable[P, R]: ...


@overload
def stateless(
    fn: None = None,
    *,
    restore_seeds: bool = False,
    failure_tolerance: int | None = None,
    skip_safe: bool | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def stateless(
    fn: Callable[P, R] | None = None,
    *,
    restore_seeds: bool = False,
    failure_tolerance: int | None = None,
    skip_safe: bool | None = None,
) -> Any:
    """Mark a hook as stateless: its output depends only on its input (so it can be re-run).

    With ``restore_seeds=True``, each call runs with Python's ``random``, numpy's global RNG and
    torch's CPU RNG seeded from the sample's ``__restore_key__`` and ``__key__`` (blake2b), and
    the caller's RNG states are restored afterwards: random augmentations repeat exactly when a
    sample is read again after a restart. ``failure_tolerance=N``: after N failures of this
    hook in a row the run stops with :class:`~stoker.errors.FatalSampleError` (0: no limit);
    without it, the loader's ``ErrorPolicy.max_consecutive_failures`` applies
    (:mod:`stoker.pipeline.tolerance`). ``skip_safe`` sets the :func:`skip_safe` mark (None:
    keeps the mark the function has).

    Example:
        >>> import random
        >>> from stoker import TaskEncoder
        >>> class Enc(TaskEncoder):
        ...     @stateless(restore_seeds=True)
        ...     def encode_sample(self, sample):
        ...         return random.random()
    """
    if fn is None:
        return functools.partial(
            stateless,
            restore_seeds=restore_seeds,
            failure_tolerance=failure_tolerance,
            skip_safe=skip_safe,
        )
    wrapped = _with_seeds(fn) if restore_seeds else fn
    if skip_safe is not None:
        setattr(wrapped, "__skip_safe__", skip_safe)  # noqa: B010 - Energon's (#236) marker
    setattr(wrapped, "__stateless__", True)  # noqa: B010 - Energon's marker, read by get_stateless
    if failure_tolerance is not None:
        setattr(wrapped, "__failure_tolerance__", failure_tolerance)  # noqa: B010
    return wrapped


def skip_safe(fn: Callable[P, R]) -> Callable[P, R]:
    """Mark a task encoder hook as safe to leave out for outputs that Energon's logical workers
    (its #236) stride past: where several physical workers share a logical stream, each runs
    the whole stream but calls ``batch``, ``encode_batch``, ``pack_selected_samples`` and
    ``postencode_sample`` only for its own outputs where they are marked (see
    :mod:`stoker.runtime.logical_stride`). The default hooks are marked.

    Example:
        >>> @skip_safe
        ... def batch(samples): return samples
        >>> get_skip_safe(batch), get_skip_safe(stateless(skip_safe=False)(batch))
        (True, False)
    """
    setattr(fn, "__skip_safe__", True)  # noqa: B010 - Energon's marker
    return fn


def get_skip_safe(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` was marked :func:`skip_safe` (or ``stateless(skip_safe=True)``)."""
    return bool(getattr(fn, "__skip_safe__", False))


def get_stateless(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` was marked with :func:`stateless`."""
    return bool(getattr(fn, "__stateless__", False))


def sample_seed(*args: Any) -> int:
    """A 64-bit seed from the first argument that is a sample (or a list of samples).

    Example:
        >>> sample_seed({"__key__": "a", "__restore_key__": ("Webdataset", 3)}) > 0
        True
    """
    for arg in args:
        keys = _keys_of(arg)
        if keys is not None:
            digest = hashlib.blake2b(repr(keys).encode(), digest_size=8).digest()
            return int.from_bytes(digest, "little")
    raise StokerError(
        "stateless(restore_seeds=True) found no sample among the hook's arguments.",
        hint="The hook must take a sample (with __key__/__restore_key__) or a list of them.",
    )


def _keys_of(value: Any) -> Any:
    if isinstance(value, list):
        keys = [_keys_of(v) for v in value]
        return tuple(keys) if keys and None not in keys else None
    if isinstance(value, dict):
        restore_key, key = value.get("__restore_key__"), value.get("__key__")
    else:
        restore_key = getattr(value, "__restore_key__", None)
        key = getattr(value, "__key__", None)
    return None if restore_key is None and key is None else (restore_key, key)


@dataclasses.dataclass
class _RngState:
    python: Any
    numpy: Any
    torch: torch.Tensor

    @staticmethod
    def capture() -> _RngState:
        return _RngState(random.getstate(), np.random.get_state(), torch.get_rng_state())

    @staticmethod
    def seeded(seed: int) -> _RngState:
        """The state the three RNGs have after seeding with ``seed`` (they are left so)."""
        random.seed(seed)
        np.random.seed(seed % 2**32)
        torch.default_generator.manual_seed(seed)
        return _RngState.capture()

    def apply(self) -> None:
        random.setstate(self.python)
        np.random.set_state(self.numpy)
        torch.set_rng_state(self.torch)


def _with_seeds(fn: Callable[P, R]) -> Callable[P, R]:
    if inspect.isgeneratorfunction(fn):
        return functools.wraps(fn)(_seeded_generator(fn))

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with _GLOBAL_RNGS:
            outer = _RngState.capture()
            _RngState.seeded(sample_seed(*args, *kwargs.values()))
            try:
                return fn(*args, **kwargs)
            finally:
                outer.apply()

    return wrapper


def _seeded_generator(fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Iterator[Any]:
        # The generator runs on its own RNG states; the caller's are swapped back at each yield.
        with _GLOBAL_RNGS:
            outer = _RngState.capture()
            inner = _RngState.seeded(sample_seed(*args, *kwargs.values()))
            outer.apply()
        items = fn(*args, **kwargs)
        while True:
            with _GLOBAL_RNGS:
                outer = _RngState.capture()
                inner.apply()
                try:
                    item = next(items)
                except StopIteration:
                    return
                finally:
                    inner = _RngState.capture()
                    outer.apply()
            yield item

    return wrapper
