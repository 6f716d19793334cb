"""Install the alias in every process that multiprocessing starts ("spawn", "forkserver").

A spawned child unpickles its process object, and before that re-runs the parent's main module;
either can import a module whose top does ``import megatron.energon`` (a test module's target
function, a worker's task encoder). :func:`patch` makes the preparation data that
multiprocessing sends first carry a :class:`_InstallInChild`, whose unpickling installs the alias
in the child before anything else is loaded. Forked children inherit the installed alias.
"""

from __future__ import annotations

import multiprocessing.spawn
import sys
from collections.abc import Callable
from typing import Any

_KEY = "stoker_energon_alias"  # ignored by multiprocessing.spawn.prepare (it reads known keys)
_original: list[Callable[[str], dict[str, Any]]] = []


def _install_in_child() -> None:
    from stoker.energon_alias import install

    install()


class _InstallInChild:
    """Unpickles as a call of ``install()`` (in the child, before it loads anything else)."""

    def __reduce__(self) -> tuple[Callable[[], None], tuple[()]]:
        return _install_in_child, ()


class _ParentSysPath:
    """Unpickles as ``multiprocessing.spawn.prepare({"sys_path": <the parent's>})``: the child
    gets the parent's ``sys.path`` (as ``prepare`` gives it a moment later) so that it finds
    stoker where the parent did, before :class:`_InstallInChild` is unpickled."""

    def __reduce__(self) -> tuple[Callable[[dict[str, Any]], None], tuple[dict[str, Any]]]:
        return multiprocessing.spawn.prepare, ({"sys_path": list(sys.path)},)


def _preparation_data(name: str) -> dict[str, Any]:
    # Unpickled in this order, before anything else the child loads.
    hooks = {f"{_KEY}_sys_path": _ParentSysPath(), _KEY: _InstallInChild()}
    return {**hooks, **_original[0](name)}


def patch() -> None:
    """Make multiprocessing's children install the alias first (idempotent)."""
    if not _original:
        _original.append(multiprocessing.spawn.get_preparation_data)
        setattr(multiprocessing.spawn, "get_preparation_data", _preparation_data)  # noqa: B010


def unpatch() -> None:
    """Undo :func:`patch`."""
    if _original:
        setattr(multiprocessing.spawn, "get_preparation_data", _original.pop())  # noqa: B010
