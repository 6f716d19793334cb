"""Energon's ``get_loader`` / ``get_savable_loader``, as the alias serves them: stoker's, with
Energon's end of a finite pass (``sync_end=None``: each rank ends when its own data does).

Energon's plain loaders do not agree on the end of data across ranks (its pull request #146
adds wrappers for that, ``megatron.energon.sync_end``), and its client code relies on it: with
``repeat=False`` each rank iterates all of its own share. stoker's API defaults to
``sync_end="auto"`` (see :mod:`stoker.runtime.end_sync`); code that runs through the alias gets
Energon's behaviour unless it passes ``sync_end=`` itself.

Example:
    >>> from stoker.energon_alias.loaders import get_loader
    >>> get_loader.__name__
    'get_loader'
"""

from __future__ import annotations

from typing import Any

from stoker import api
from stoker.runtime.savable_loader import BasicDataLoader, SavableDataLoader
from stoker.runtime.streams import Loadable


def get_loader(dataset: Loadable, **kwargs: Any) -> BasicDataLoader:
    """:func:`stoker.get_loader` with ``sync_end=None`` unless given."""
    kwargs.setdefault("sync_end", None)
    return api.get_loader(dataset, **kwargs)


def get_savable_loader(dataset: Loadable, **kwargs: Any) -> SavableDataLoader:
    """:func:`stoker.get_savable_loader` with ``sync_end=None`` unless given."""
    kwargs.setdefault("sync_end", None)
    return api.get_savable_loader(dataset, **kwargs)


__all__ = ["get_loader", "get_savable_loader"]
