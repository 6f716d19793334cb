"""``python -m stoker.cli``: the ``stoker`` command (e.g. under ``torchrun -m stoker.cli``)."""

from stoker.cli.main import main

if __name__ == "__main__":
    main()
