"""One list of public names: ``_EXPORTS`` in ``stoker/__init__.py``.

``__all__`` is derived from it; ``__init__.pyi`` (what type checkers read) must name the same
names from the same modules; ``stoker.flavors`` and the Energon alias table must agree with it.
A failure says which line to add where.
"""

from __future__ import annotations

import ast
import importlib
import pathlib

import pytest

import stoker
import stoker.flavors
from stoker.energon_alias.hints import HINTS
from stoker.energon_alias.table import MODULES

SRC = pathlib.Path(stoker.__file__).parent


def _stub_names(path: pathlib.Path) -> dict[str, str]:
    """``{public name: module}`` of a stub's ``from m import x as x`` lines and aliases."""
    names: dict[str, str] = {}
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                assert alias.asname == alias.name, (
                    f"{path.name}: write `{alias.name} as {alias.name}`"
                )
                names[alias.name] = str(node.module)
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name):
            target = node.targets[0]
            assert isinstance(target, ast.Name)
            names[target.id] = names[node.value.id]
    return names


def test_all_is_the_export_table() -> None:
    assert stoker.__all__ == sorted([*stoker._EXPORTS, *stoker._ALIASES, "__version__"])
    assert len(set(stoker.__all__)) == len(stoker.__all__)


def test_stub_names_what_the_export_table_names() -> None:
    wanted = dict(stoker._EXPORTS)
    wanted |= {alias: stoker._EXPORTS[name] for alias, name in stoker._ALIASES.items()}
    stub = _stub_names(SRC / "__init__.pyi")
    missing = [f"from {m} import {n} as {n}" for n, m in wanted.items() if stub.get(n) != m]
    assert not missing, "add to src/stoker/__init__.pyi:\n" + "\n".join(sorted(missing))
    extra = sorted(set(stub) - set(wanted))
    assert not extra, f"__init__.pyi names what _EXPORTS does not: {extra}"


def test_flavors_stub_and_table_agree() -> None:
    modules = stoker.flavors._MODULES
    assert stoker.flavors.__all__ == sorted(modules)
    stub = _stub_names(SRC / "flavors" / "__init__.pyi")
    assert stub == {name: f"stoker.flavors.{m}" for name, m in modules.items()}


@pytest.mark.parametrize("name", sorted(stoker._EXPORTS))
def test_every_export_resolves_where_it_says(name: str) -> None:
    module = importlib.import_module(stoker._EXPORTS[name])
    assert getattr(stoker, name) is getattr(module, name)
    if stoker._EXPORTS[name] == "stoker.flavors":
        assert name in stoker.flavors.__all__


def test_alias_table_serves_stoker_names() -> None:
    """Each name the Energon alias table serves resolves: the first of its targets that is a
    public name of ``stoker`` / ``stoker.flavors`` or an attribute of the module it names; a
    name stoker does not serve has a hint instead."""
    public = {"stoker": set(stoker.__all__), "stoker.flavors": set(stoker.flavors.__all__)}

    def resolves(alternative: str) -> bool:
        module, _, name = alternative.partition(":")
        if module in public:
            return name in public[module]
        return hasattr(importlib.import_module(module), name)

    unserved = sorted(
        f"{module}.{name} -> {target}"
        for module, names in MODULES.items()
        for name, target in names.items()
        if target != "-"
        and name not in HINTS
        and not any(resolves(alternative) for alternative in target.split("|"))
    )
    assert not unserved, "alias table targets that do not resolve:\n" + "\n".join(unserved)
