"""The stage protocol: a stage is a node, an iterator with explicit state, over its upstream node.

A :class:`Node` yields items with :meth:`Node.next`, says what it holds with :meth:`Node.state`,
starts over from such a state with :meth:`Node.reset`, and releases what it holds with
:meth:`Node.close`. Stages compose by taking their upstream node as an argument: a stream's
``SampleStream -> Packer -> Grouper`` (or ``-> FixedBatcher``) is a chain of nodes, and a
``MixStream`` is a node over several such chains.

State is one flat dict of plain data: each node puts its own part under its :attr:`Node.name`
next to its upstream's parts (``{"stream": ..., "pack": ..., "group": ...}``), and leaves the
key out while it holds nothing, so a chain's state is small and the names say which stage saved
what. Resetting a node from a state resets its upstream from the same dict: the continuation is
the same as if the chain had never stopped.

Example:
    >>> class Count(Node[int]):
    ...     name = "count"
    ...     def __init__(self, n: int) -> None:
    ...         super().__init__()
    ...         self.n, self.at = n, 0
    ...     def _reset(self, state: NodeState) -> None:
    ...         self.at = state.get(self.name, 0)
    ...     def _run(self) -> Iterator[int]:
    ...         while self.at < self.n:
    ...             self.at += 1
    ...             yield self.at - 1
    ...     def state(self) -> NodeState:
    ...         return {self.name: self.at}
    >>> node = Count(5)
    >>> [node.next(), node.next()], node.state()
    ([0, 1], {'count': 2})
    >>> again = Count(5)
    >>> again.reset(node.state())
    >>> list(again)
    [2, 3, 4]
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar, Generic, TypeVar

T = TypeVar("T")

#: A chain's state: each node's part under its name (plain data, JSON- and pickle-safe).
NodeState = dict[str, Any]


class Node(ABC, Generic[T]):
    """One stage: ``reset(state)``, ``next()``, ``state()``, ``close()`` (see module).

    Subclasses write :meth:`_run` (a generator of the items, resuming from the state
    :meth:`_reset` took in), :meth:`_reset` and :meth:`state`. A node not reset before its first
    :meth:`next` starts from the beginning.
    """

    #: The key of this node's part of a chain's state.
    name: ClassVar[str] = "node"

    def __init__(self) -> None:
        self._items: Iterator[T] | None = None
        self._ready = False

    def reset(self, state: NodeState | None = None) -> None:
        """Start over from ``state`` (a chain's :meth:`state`; None: from the beginning)."""
        self._close_items()
        self._reset(state or {})
        self._ready = True

    def next(self) -> T:
        """The next item; ``StopIteration`` at the end."""
        return next(self.items())

    def items(self) -> Iterator[T]:
        """The items from here on as a plain iterator: what a downstream node loops over (the
        same items as :meth:`next`, without a method call per item)."""
        if self._items is None:
            if not self._ready:
                self.reset()
            self._items = self._run()
        return self._items

    def close(self) -> None:
        """Stop: what the node holds is released; :meth:`reset` starts it again."""
        self._close_items()
        self._ready = False
        for upstream in self._upstreams():
            upstream.close()

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        return self.next()

    @abstractmethod
    def state(self) -> NodeState:
        """This node's and its upstream's parts, each under its node's name."""

    @abstractmethod
    def _reset(self, state: NodeState) -> None:
        """Take this node's part of ``state`` (and reset the upstream from it)."""

    @abstractmethod
    def _run(self) -> Iterator[T]:
        """The items from where :meth:`_reset` left the node."""

    def _upstreams(self) -> Sequence[Node[Any]]:
        """The nodes this one reads from (closed with it)."""
        return ()

    def _close_items(self) -> None:
        items, self._items = self._items, None
        close = getattr(items, "close", None)
        if close is not None:
            close()


def nested(upstream: Node[Any], name: str, own: Any) -> NodeState:
    """``upstream``'s state with ``own`` under ``name`` (left out when ``own`` is None)."""
    state = upstream.state()
    if own is not None:
        state[name] = own
    return state


__all__ = ["Node", "NodeState", "nested"]
