"""Energon's ``megatron.energon.fork_hook``: callbacks run around ``os.fork``, held weakly.

Code written for Energon registers functions (or objects, by subclassing :class:`ForkMixin`) to
run before a fork and after it, in the parent and in the child: e.g. to drop a connection that
must not be shared with a forked worker. stoker's own workers need no such hooks; this module
serves the ones client code registers. A callback is held by a weak reference, so registering
one never keeps its object alive: once the object (or function) is gone, so is the hook.

Example:
    >>> calls = []
    >>> def note():
    ...     calls.append("before")
    >>> hooks = WeakCallbacks()
    >>> hooks.add_hook(note)
    >>> hooks.add_hook(note)  # once only
    >>> hooks.run()
    >>> calls
    ['before']
    >>> del note
    >>> len(hooks._hooks)
    0
"""

from __future__ import annotations

import os
import types
import weakref
from collections.abc import Callable
from typing import Any

__all__ = [
    "DataclassForkMixin",
    "ForkMixin",
    "WeakCallbacks",
    "after_in_child_fork_hook",
    "after_in_parent_fork_hook",
    "before_fork_hook",
]


class WeakCallbacks:
    """Callables held by weak references; :meth:`run` calls the live ones in order."""

    def __init__(self) -> None:
        self._hooks: list[weakref.ref[Any]] = []

    def add_hook(self, callback: Callable[[], object]) -> None:
        """Hold ``callback`` (a function or a bound method) until it is garbage; twice is once."""
        if any(ref() == callback for ref in self._hooks):
            return
        ref: weakref.ref[Any]
        if isinstance(callback, types.MethodType):
            ref = weakref.WeakMethod(callback, self._forget)
        else:
            ref = weakref.ref(callback, self._forget)
        self._hooks.append(ref)

    def _forget(self, dead: weakref.ref[Any]) -> None:
        self._hooks = [ref for ref in self._hooks if ref is not dead]

    def run(self) -> None:
        """Call every live callback, in the order they were added."""
        for ref in list(self._hooks):
            callback = ref()
            if callback is not None:
                callback()


_BEFORE, _IN_CHILD, _IN_PARENT = WeakCallbacks(), WeakCallbacks(), WeakCallbacks()
os.register_at_fork(
    before=_BEFORE.run, after_in_child=_IN_CHILD.run, after_in_parent=_IN_PARENT.run
)


def before_fork_hook(callback: Callable[[], object]) -> None:
    """Call ``callback`` in the parent just before each fork (while it is alive)."""
    _BEFORE.add_hook(callback)


def after_in_child_fork_hook(callback: Callable[[], object]) -> None:
    """Call ``callback`` in each forked child, first thing (while it is alive)."""
    _IN_CHILD.add_hook(callback)


def after_in_parent_fork_hook(callback: Callable[[], object]) -> None:
    """Call ``callback`` in the parent just after each fork (while it is alive)."""
    _IN_PARENT.add_hook(callback)


_METHODS = (
    ("__before_fork__", before_fork_hook),
    ("__after_in_child_fork__", after_in_child_fork_hook),
    ("__after_in_parent_fork__", after_in_parent_fork_hook),
)


class ForkMixin:
    """An object whose ``__before_fork__``, ``__after_in_child_fork__`` and
    ``__after_in_parent_fork__`` (those it defines) run around each fork while it is alive."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        instance = super().__new__(cls)
        for name, register in _METHODS:
            method = getattr(instance, name, None)
            if isinstance(method, types.MethodType):
                register(method)
        return instance


class DataclassForkMixin(ForkMixin):
    """:class:`ForkMixin` for dataclasses (the hooks are registered at construction, so the
    dataclass's generated ``__init__`` needs nothing extra)."""
