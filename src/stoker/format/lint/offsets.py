"""Check an offsets index (``.tar.idx``, JSONL ``.idx``): pure functions of integer arrays.

:func:`index_structure_problem` finds an index that cannot belong to its shard at all (wrong
length, not increasing, off a tar block, past the end); :func:`index_scan_problem` finds the
first entry that disagrees with the offsets a fresh scan found. Each returns an
:data:`IndexProblem` or None.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from stoker.format.tar import BLOCK

#: (entry number or None, what is wrong, byte offset in the shard or None)
IndexProblem = tuple[int | None, str, int | None]


def index_structure_problem(
    offsets: npt.NDArray[np.uint64], expected: int, size: int
) -> IndexProblem | None:
    """The first way ``offsets`` cannot be the index of a shard of ``size`` bytes and
    ``expected`` samples: wrong length, not increasing, off a tar block, past the end."""
    if len(offsets) != expected + 1:
        return (
            None,
            (
                f"has {len(offsets)} entries but .info.json says {expected} samples "
                f"(expected {expected + 1} entries)."
            ),
            None,
        )
    values = offsets.astype(np.int64)
    checks = (
        (np.flatnonzero(np.diff(values) <= 0) + 1, "is not greater than the entry before it"),
        (np.flatnonzero(values % BLOCK), f"is not on a {BLOCK}-byte tar block boundary"),
        (np.flatnonzero((values > size) | (values < 0)), f"is past the end ({size} bytes)"),
    )
    for bad, text in checks:
        if len(bad):
            entry = int(bad[0])
            return entry, f"entry {entry} ({int(offsets[entry])}) {text}.", int(offsets[entry])
    return None


def index_scan_problem(
    offsets: npt.NDArray[np.uint64], real: npt.NDArray[np.uint64]
) -> IndexProblem | None:
    """The first entry where a shard's index disagrees with the offsets a scan found."""
    common = min(len(offsets), len(real))
    differ = np.flatnonzero(offsets[:common] != real[:common])
    if len(differ):
        entry = int(differ[0])
        what = "the file ends" if entry == len(real) - 1 else f"sample {entry} starts"
        text = f"entry {entry} is {int(offsets[entry])} but {what} at {int(real[entry])}."
        return entry, text, int(real[entry])
    if len(offsets) != len(real):
        entry = common - 1
        text = f"lists {len(offsets) - 1} samples but the file has {len(real) - 1}."
        return entry, text, int(real[entry])
    return None
