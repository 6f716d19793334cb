"""The ``stoker`` command: thin adapters over library functions that return reports."""
