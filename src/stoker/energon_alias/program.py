"""The module a program started by ``python -m stoker.energon_alias`` runs in (see ``launch``).

multiprocessing's spawned children re-run it by name (as ``__mp_main__``), so they install the
alias before they run the program's top level and unpickle its objects.
"""

from stoker.energon_alias.launch import run_program

run_program(globals())
