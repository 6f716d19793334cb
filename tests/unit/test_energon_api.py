"""The dataset entry points take Energon 7.4.1's parameters: same names, kinds and defaults.

Energon's signatures are read from the installed package's source (parsed, not imported, so an
installed Energon alias cannot stand in for it).
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
from pathlib import Path
from typing import Any

import pytest

import stoker

pytestmark = pytest.mark.energon

FUNCTIONS = ("get_train_dataset", "get_val_dataset", "get_val_datasets")


def energon_loader_source() -> Path:
    spec = importlib.util.find_spec("megatron")
    for root in spec.submodule_search_locations or [] if spec else []:
        path = Path(root) / "energon" / "task_encoder" / "loader.py"
        if path.is_file():
            return path
    pytest.skip("megatron-energon is not installed (pip install stoker[interop])")


def energon_signatures() -> dict[str, list[tuple[str, str, str | None]]]:
    """Per function: (name, kind, default source) of each parameter, from Energon's code."""
    tree = ast.parse(energon_loader_source().read_text())
    out: dict[str, list[tuple[str, str, str | None]]] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in FUNCTIONS:
            args = node.args
            params = [(a.arg, "POSITIONAL_OR_KEYWORD", None) for a in args.args]
            defaults = [None] * (len(args.args) - len(args.defaults)) + args.defaults
            params = [(n, k, _src(d)) for (n, k, _), d in zip(params, defaults, strict=True)]
            for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True):
                params.append((a.arg, "KEYWORD_ONLY", _src(d)))
            if args.kwarg is not None:
                params.append((args.kwarg.arg, "VAR_KEYWORD", None))
            out[node.name] = params
    return out


def _src(node: ast.expr | None) -> str | None:
    return None if node is None else ast.unparse(node)


def stoker_signature(name: str) -> list[tuple[str, str, str | None]]:
    out = []
    for p in inspect.signature(getattr(stoker, name)).parameters.values():
        default: Any = p.default
        if default is inspect.Parameter.empty:
            shown = None
        elif isinstance(default, stoker.DefaultTaskEncoder):
            shown = "DefaultTaskEncoder()"
        else:
            shown = repr(default)
        out.append((p.name, p.kind.name, shown))
    return out


#: Parameters that Energon requires and stoker gives a default (so the quick-start examples run
#: as written; docs/energon.md): code written for Energon passes them and sees no difference.
DEFAULTS_WHERE_ENERGON_HAS_NONE = {
    "worker_config": "None",
    "shuffle_buffer_size": "100",
    "max_samples_per_sequence": "100",
}


@pytest.mark.parametrize("name", FUNCTIONS)
def test_entry_points_have_energons_parameters(name: str) -> None:
    theirs = energon_signatures()[name]
    ours = stoker_signature(name)
    # stoker may add its own keyword-only options, never drop or change Energon's.
    ours_by_name = {n: (k, d) for n, k, d in ours}
    for param, kind, default in theirs:
        assert param in ours_by_name, f"{name} lacks Energon's parameter {param!r}"
        default = (
            DEFAULTS_WHERE_ENERGON_HAS_NONE.get(param, default) if default is None else default
        )
        assert ours_by_name[param] == (kind, default), (name, param)
    positional = [(n, d) for n, k, d in theirs if k == "POSITIONAL_OR_KEYWORD"]
    assert [(n, d) for n, k, d in ours if k == "POSITIONAL_OR_KEYWORD"] == positional
    assert ours[-1][1] == "VAR_KEYWORD"  # Energon's pass-through keywords
