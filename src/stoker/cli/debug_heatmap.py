"""``analyze-debug --heatmap-path``: which sample was loaded at which step, as a picture.

One row per sample key (in the order keys were first loaded), one column per step; a pixel is
brighter the more often its key was loaded in its step. Larger logs are binned down to at most
:data:`MAX_SIDE` pixels a side, so a shuffle that is not random shows as a pattern.

Example:
    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "heatmap.png"
    >>> write_heatmap([["a", "b"], ["b", "c"]], out)
    (3, 2)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click
import numpy as np

#: The most pixels of either side of the picture.
MAX_SIDE = 1000


def write_heatmap(steps: Sequence[Sequence[str]], path: Path) -> tuple[int, int]:
    """Draw ``steps`` (each step's keys) to a PNG at ``path``; returns (rows, columns) drawn."""
    try:
        from PIL import Image
    except ImportError:
        raise click.ClickException(
            "--heatmap-path needs Pillow: pip install 'stoker[image]' (or leave out the option)."
        ) from None
    index: dict[str, int] = {}
    rows, columns = [], []
    for step, keys in enumerate(steps):
        for key in keys:
            rows.append(index.setdefault(key, len(index)))
            columns.append(step)
    height, width = max(len(index), 1), max(len(steps), 1)
    side_rows, side_columns = min(height, MAX_SIDE), min(width, MAX_SIDE)
    counts = np.zeros((side_rows, side_columns), dtype=np.int64)
    np.add.at(
        counts,
        (
            np.asarray(rows, dtype=np.int64) * side_rows // height,
            np.asarray(columns, dtype=np.int64) * side_columns // width,
        ),
        1,
    )
    peak = max(int(counts.max()), 1)
    pixels = (counts * 255 // peak).astype(np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).save(path, format="PNG")
    return side_rows, side_columns
