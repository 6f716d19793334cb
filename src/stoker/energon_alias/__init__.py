"""Serve Energon's module paths (``megatron.energon...``) from stoker, opt-in.

Frameworks (Megatron-Bridge, NeMo, Megatron-LM) import ``megatron.energon`` inside their own code,
where their users cannot change the import. After :func:`install`, ``import megatron.energon``
and every public submodule path real clients use (``megatron.energon.task_encoder.base``,
``.flavors.webdataset``, ``.epathlib``, ``.tools.prepare``, ...) resolve to stoker's objects.
``python -m stoker.energon_alias SCRIPT [ARGS]`` runs a script with the alias installed, in the
main process and in its dataloader workers (forked or spawned: see ``hook``).

Example:
    >>> import stoker, stoker.energon_alias
    >>> stoker.energon_alias.install()
    >>> from megatron.energon.task_encoder.base import stateless
    >>> stateless is stoker.stateless
    True
    >>> stoker.energon_alias.uninstall()
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys

from stoker.energon_alias import hook
from stoker.energon_alias.modules import AliasFinder, AliasModule, EnergonNameError
from stoker.energon_alias.table import ROOT
from stoker.errors import StokerError

__all__ = ["ENV_VAR", "EnergonNameError", "install", "is_installed", "uninstall"]

#: Set to ``1`` by :func:`install` so that Python processes started from this one by other means
#: than multiprocessing (``subprocess``) install the alias when they import stoker.
ENV_VAR = "STOKER_ENERGON_ALIAS"

_log = logging.getLogger(__name__)
_finder = AliasFinder()
_state: dict[str, object] = {}


def is_installed() -> bool:
    """Whether ``megatron.energon`` is currently served by stoker."""
    return _finder in sys.meta_path


def install() -> None:
    """Make ``import megatron.energon...`` resolve to stoker (idempotent).

    Raises:
        StokerError: the real ``megatron.energon`` was already imported in this process; its
            classes would mix with stoker's. Install before anything imports it, or run the
            program under ``python -m stoker.energon_alias``.
    """
    if is_installed():
        return
    loaded = sys.modules.get(ROOT)
    if loaded is not None and not isinstance(loaded, AliasModule):
        raise StokerError(
            f"the real {ROOT} was imported before stoker.energon_alias.install().",
            hint="Call install() before anything imports megatron.energon, "
            "or run the program with `python -m stoker.energon_alias SCRIPT`.",
        )
    real = _real_package_installed()
    _state["env"] = os.environ.get(ENV_VAR)
    sys.meta_path.insert(0, _finder)
    hook.patch()
    if real:
        # Said once per program: processes started from this one inherit ENV_VAR and stay quiet.
        level = logging.INFO if _state["env"] == "1" else logging.WARNING
        _log.log(level, "megatron.energon is installed; stoker serves its imports instead")
    os.environ[ENV_VAR] = "1"


def uninstall() -> None:
    """Undo :func:`install`: remove the finder and every served ``megatron.energon`` module."""
    if not is_installed():
        return
    sys.meta_path.remove(_finder)
    hook.unpatch()
    for name in [n for n, m in sys.modules.items() if isinstance(m, AliasModule)]:
        del sys.modules[name]
    megatron = sys.modules.get("megatron")
    if megatron is not None:
        if isinstance(getattr(megatron, "energon", None), AliasModule):
            delattr(megatron, "energon")
        if megatron.__loader__ is _finder:
            del sys.modules["megatron"]
    previous = _state.pop("env", None)
    if previous is None:
        os.environ.pop(ENV_VAR, None)
    else:
        os.environ[ENV_VAR] = str(previous)


def _real_package_installed() -> bool:
    """Whether a real megatron.energon is installed (found without importing it)."""
    try:
        return importlib.util.find_spec(ROOT) is not None
    except (ImportError, ValueError):
        return False


def install_if_requested() -> None:
    """Install when :data:`ENV_VAR` is ``1`` (a process started by an aliased program)."""
    if os.environ.get(ENV_VAR) == "1":
        install()
