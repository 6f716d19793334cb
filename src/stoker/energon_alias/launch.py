"""``python -m stoker.energon_alias SCRIPT [ARGS]`` / ``-m MODULE [ARGS]``: run a program with
``megatron.energon`` served by stoker, in its main process and in every process it starts.

The program runs as ``__main__``, exactly as ``python SCRIPT`` / ``python -m MODULE`` would run it.
Forked children inherit the alias; spawned ones install it before they re-run the main module
(see :mod:`stoker.energon_alias.hook`); other Python processes inherit
``STOKER_ENERGON_ALIAS=1`` and install it when they import stoker.

Example (also under ``torchrun --nproc-per-node 2 -m stoker.energon_alias train.py``)::

    python -m stoker.energon_alias train.py --lr 1e-4
"""

from __future__ import annotations

import os
import runpy
import sys

from stoker.energon_alias import install

USAGE = (
    "usage: python -m stoker.energon_alias SCRIPT [ARGS...]\n"
    "       python -m stoker.energon_alias -m MODULE [ARGS...]\n"
    "Runs a program with `import megatron.energon...` served by stoker (main process and workers)."
)


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``python -m stoker.energon_alias``."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] in (["-h"], ["--help"]):
        print(USAGE)
        raise SystemExit(0)
    if not args or args == ["-m"]:
        print(USAGE, file=sys.stderr)
        raise SystemExit(2)
    if args[0] == "-m":
        install()
        sys.argv = [args[1], *args[2:]]  # runpy sets argv[0] to the module's file
        sys.path[0] = os.getcwd()  # as `python -m MODULE` does
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        return
    script = os.path.abspath(args[0])
    if not os.path.isfile(script):
        print(f"python -m stoker.energon_alias: can't open file {args[0]!r}", file=sys.stderr)
        raise SystemExit(2)
    install()
    sys.argv = [script, *args[1:]]
    sys.path[0] = os.path.dirname(script)  # as `python SCRIPT` does
    runpy.run_path(script, run_name="__main__")
