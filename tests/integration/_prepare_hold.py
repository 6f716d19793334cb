"""``stoker prepare``, held once a process of it has stored N shard results, to be killed there.

Run as a script by ``test_prepare_resume.py``::

    python _prepare_hold.py N MARKER prepare DATASET [prepare options]

The first process (the prepare itself, or one of its indexing workers) that has stored N shard
results in the work folder creates ``MARKER`` and waits there for ever; any other process goes
on. The prepare can then never finish, so a test kills it at that point whatever the machine's
speed: exactly N results are on disk when the only indexing process holds.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from stoker.cli.main import main
from stoker.format.prepare_work import PrepareWork


def hold_after(count: int, marker: str) -> None:
    """Make the ``count``-th result a process stores the point where the first such process
    holds."""
    save = PrepareWork.save_shard
    stored = 0

    def save_then_hold(self: PrepareWork, shard: Any, fingerprint: dict[str, Any]) -> None:
        nonlocal stored
        save(self, shard, fingerprint)
        stored += 1
        if stored != count:
            return
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return  # another process holds already
        while True:
            time.sleep(3600)

    PrepareWork.save_shard = save_then_hold  # type: ignore[method-assign]


if __name__ == "__main__":
    hold_after(int(sys.argv[1]), sys.argv[2])
    sys.argv = ["stoker", *sys.argv[3:]]
    main()
