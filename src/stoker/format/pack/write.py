"""Write planned shards: the members of each sample, copied from their source files into a tar.

Headers are deterministic (:func:`~stoker.format.pack.plan.tar_info`), so the same input gives
the same bytes; an unreadable or vanished source file is a :class:`~stoker.errors.StorageError`
naming the file and the sample.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable, Sequence
from typing import BinaryIO

from stoker.errors import StorageError
from stoker.format.pack.plan import tar_info
from stoker.format.pack.samples import ENCODING, Part, Sample


class Sources:
    """Opens source files for reading; keeps the last one open, since JSONL parts share a file."""

    def __init__(self) -> None:
        self._path = ""
        self._file: BinaryIO | None = None

    def at(self, part: Part) -> BinaryIO:
        if part.data is not None:
            return io.BytesIO(part.data)
        if self._file is None or part.path != self._path:
            self.close()
            self._file = open(part.path, "rb")  # noqa: SIM115 - closed by close()
            self._path = part.path
        self._file.seek(part.offset)
        return self._file

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def write_shard(
    path: str, samples: Sequence[Sample], sources: Sources, advance: Callable[[], object]
) -> None:
    """Write ``samples`` to the tar ``path`` (deterministic headers); ``advance`` per sample."""
    with (
        open(path, "wb") as f,
        tarfile.open(fileobj=f, mode="w", format=tarfile.PAX_FORMAT, encoding=ENCODING) as tar,
    ):
        for sample in samples:
            for part in sample.parts:
                try:
                    tar.addfile(tar_info(f"{sample.key}.{part.name}", part.size), sources.at(part))
                except OSError as e:
                    raise StorageError(
                        f"cannot pack this file ({e}).",
                        path=part.path,
                        key=sample.key,
                        hint="Check that it is readable and did not change while packing, and "
                        "that the output disk has space.",
                    ) from e
            advance()
