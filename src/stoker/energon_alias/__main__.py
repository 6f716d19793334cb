"""``python -m stoker.energon_alias SCRIPT [ARGS]``: see :mod:`stoker.energon_alias.launch`."""

from stoker.energon_alias.launch import main

main()
