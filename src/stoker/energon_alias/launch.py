"""``python -m stoker.energon_alias SCRIPT [ARGS]`` / ``-m MODULE [ARGS]``: run a program with
``megatron.energon`` served by stoker, in its main process and in every process it spawns.

The program runs inside :mod:`stoker.energon_alias.program`, a real module: multiprocessing's
"spawn" and "forkserver" children re-run the main module by its name before they unpickle
anything, so each child runs ``program`` again, which installs the alias before the user's code.
Forked children inherit the installed alias; other processes that import stoker inherit
``STOKER_ENERGON_ALIAS=1`` and install it when stoker is imported.

Example (also under ``torchrun --nproc-per-node 2 -m stoker.energon_alias train.py``)::

    python -m stoker.energon_alias train.py --lr 1e-4
"""

from __future__ import annotations

import importlib.util
import os
import runpy
import sys
import types
from typing import Any

from stoker.energon_alias import install

#: Names the program to run in this process and its spawned children: a script path, or
#: ``-m MODULE``.
MAIN_VAR = "STOKER_ENERGON_ALIAS_MAIN"
USAGE = (
    "usage: python -m stoker.energon_alias SCRIPT [ARGS...]\n"
    "       python -m stoker.energon_alias -m MODULE [ARGS...]\n"
    "Runs a program with `import megatron.energon...` served by stoker (main process and workers)."
)


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``python -m stoker.energon_alias``."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if args else sys.stderr)
        raise SystemExit(0 if args else 2)
    if args[0] == "-m":
        if len(args) < 2:
            print(USAGE, file=sys.stderr)
            raise SystemExit(2)
        program, rest = f"-m {args[1]}", args[2:]
        sys.path[0] = os.getcwd()  # as `python -m MODULE` does
    else:
        script = os.path.abspath(args[0])
        if not os.path.isfile(script):
            print(f"python -m stoker.energon_alias: can't open file {args[0]!r}", file=sys.stderr)
            raise SystemExit(2)
        program, rest = script, args[1:]
        sys.path[0] = os.path.dirname(script)  # as `python SCRIPT` does
    os.environ[MAIN_VAR] = program
    install()
    sys.argv = [program, *rest]  # argv[0] is set to the real file when the program starts
    runpy.run_module("stoker.energon_alias.program", run_name="__main__", alter_sys=True)


def load_program(program: str) -> tuple[types.CodeType, dict[str, Any]]:
    """The code of a script path or ``-m MODULE``, and the module globals it expects."""
    if program.startswith("-m "):
        name = program[3:]
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations is not None:
            name = f"{name}.__main__"
            spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "get_code"):
            raise SystemExit(f"python -m stoker.energon_alias: no module named {name!r}")
        code = spec.loader.get_code(name)
        if code is None:
            raise SystemExit(f"python -m stoker.energon_alias: {name!r} has no code to run")
        path = spec.origin or name
        return code, {"__file__": path, "__package__": spec.parent, "__cached__": spec.cached}
    with open(program, "rb") as f:
        source = f.read()
    code = compile(source, program, "exec", dont_inherit=True)
    return code, {"__file__": program, "__package__": None, "__cached__": None}


def run_program(namespace: dict[str, Any]) -> None:
    """Run the program named by :data:`MAIN_VAR` in ``namespace`` (the ``program`` module's)."""
    install()
    program = os.environ.get(MAIN_VAR)
    if not program:
        raise SystemExit(f"stoker.energon_alias.program: {MAIN_VAR} is not set")
    code, names = load_program(program)
    for own in [k for k in namespace if not k.startswith("__")]:
        del namespace[own]  # the program starts from a clean module namespace
    namespace.update(names, __doc__=None)
    if sys.argv:
        sys.argv[0] = names["__file__"]
    exec(code, namespace)
