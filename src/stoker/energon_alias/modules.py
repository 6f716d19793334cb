"""Module objects that stand in for ``megatron.energon...``, and the finder that serves them.

Every served module resolves its names lazily from :data:`stoker.energon_alias.table.MODULES`, so
``import megatron.energon`` costs no more than ``import stoker``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Sequence
from typing import Any

from stoker.energon_alias.hints import GENERIC_HINT, HINTS
from stoker.energon_alias.table import MODULES, NOT_SERVED, ROOT


class EnergonNameError(ImportError):
    """A ``megatron.energon`` name or module path that stoker does not serve.

    Raised at ``from megatron.energon... import name`` and at attribute access; the message says
    what to use instead.
    """


def missing_message(module: str, name: str | None) -> str:
    """One line: what is missing, and what to use instead."""
    what = f"{module}.{name}" if name else module
    hint = HINTS.get(name or "") or HINTS.get(what) or GENERIC_HINT
    if name is None:
        return f"stoker's Energon alias does not serve the module {what!r}: {hint}"
    return f"stoker does not provide {name!r} (Energon's {what}): {hint}"


def resolve(target: str) -> Any:
    """The stoker object a table target names (``"mod:attr|mod2:attr2"``: first that exists).

    Raises ``LookupError`` when none of the alternatives exists (yet).
    """
    for alternative in target.split("|"):
        if alternative == NOT_SERVED:
            continue
        module_name, _, attr = alternative.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name is not None and (module_name + ".").startswith(e.name + "."):
                continue  # that stoker module does not exist (yet)
            raise
        if attr in getattr(module, "__all__", ()) or hasattr(module, attr):
            try:
                return getattr(module, attr)
            except AttributeError:
                continue
    raise LookupError(target)


def is_package(path: str) -> bool:
    """Whether other served module paths live below ``path``."""
    return any(other.startswith(path + ".") for other in MODULES)


class AliasModule(types.ModuleType):
    """A ``megatron.energon...`` module whose names are stoker's objects, resolved on first use."""

    def __getattr__(self, name: str) -> Any:
        path = self.__name__
        if name.startswith("__") and name != "__version__":
            if name == "__all__":
                return self._available()
            raise AttributeError(f"module {path!r} has no attribute {name!r}")
        target = MODULES.get(path, {}).get(name)
        child = f"{path}.{name}"
        if target is None:
            if child in MODULES or child in HINTS:  # a submodule (unserved ones raise the hint)
                return importlib.import_module(child)
            raise AttributeError(f"module {path!r} has no attribute {name!r}")
        try:
            value = resolve(target)
        except LookupError:
            raise EnergonNameError(missing_message(path, name), name=path) from None
        setattr(self, name, value)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        # Loading a submodule binds it on its parent; where the parent serves a name of the same
        # spelling (``megatron.energon.edataclass``), the name wins, as in Energon.
        if isinstance(value, AliasModule) and name in MODULES.get(self.__name__, {}):
            return
        super().__setattr__(name, value)

    def __dir__(self) -> list[str]:
        children = {m.rpartition(".")[2] for m in MODULES if m.rpartition(".")[0] == self.__name__}
        return sorted({*super().__dir__(), *MODULES.get(self.__name__, {}), *children})

    def _available(self) -> list[str]:
        """``__all__`` for star imports: the names stoker provides today."""
        found = []
        for name, target in MODULES.get(self.__name__, {}).items():
            try:
                resolve(target)
            except LookupError:
                continue
            found.append(name)
        return sorted(found)


class AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves ``megatron.energon`` and its submodules; ``megatron`` stays a namespace package."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == "megatron":
            return self._namespace_spec()
        if fullname != ROOT and not fullname.startswith(ROOT + "."):
            return None
        spec = importlib.machinery.ModuleSpec(fullname, self, is_package=is_package(fullname))
        if spec.submodule_search_locations is not None:
            spec.submodule_search_locations = []  # no files: only this finder serves children
        return spec

    def _namespace_spec(self) -> importlib.machinery.ModuleSpec | None:
        """An empty ``megatron`` package, only where no installed distribution provides one
        (megatron-core, Megatron-Bridge and Energon share the real namespace)."""
        for finder in sys.meta_path:
            find_spec = getattr(finder, "find_spec", None)
            if finder is not self and find_spec is not None and find_spec("megatron", None):
                return None
        spec = importlib.machinery.ModuleSpec("megatron", self, is_package=True)
        spec.submodule_search_locations = []
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        if spec.name == "megatron":
            return types.ModuleType("megatron")
        return AliasModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        name = module.__name__
        if name != "megatron" and name not in MODULES:
            raise ModuleNotFoundError(missing_message(name, None), name=name)
        module.__doc__ = f"{name}, served by stoker (see stoker.energon_alias)."
