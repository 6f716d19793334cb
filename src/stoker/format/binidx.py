"""Megatron-LM token datasets: ``name.bin`` (the tokens) plus ``name.idx`` (the MMIDIDX index).

megatron-core's ``IndexedDatasetBuilder`` writes them. The index, all little-endian:

========================  ==============================================================
``MMIDIDX\\0\\0``          9 bytes of magic
version                   uint64, 1
dtype code                uint8: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64,
                          7 float32, 8 uint16 (the dtype of the tokens in ``.bin``)
sequence count S          uint64
document count D          uint64 (the document indices below: D - 1 documents)
sequence lengths          int32[S], tokens per sequence
sequence pointers         int64[S], byte offset of each sequence in ``.bin``
document indices          int64[D], the first sequence of each document, then S
sequence modes            int8[S], only in multimodal indexes
========================  ==============================================================

A sample of such a dataset is one sequence (megatron-core's ``IndexedDataset[i]``; a document of
several sequences is several samples), as Energon gives it: ``tokens``, the array, keyed ``i``.

Example:
    >>> import numpy as np
    >>> index = TokenIndex.parse(encode_index(np.dtype(np.uint16), [3, 2], [0, 1, 2]), "a.idx")
    >>> index.dtype, index.lengths.tolist(), index.pointers.tolist(), index.documents.tolist()
    (dtype('uint16'), [3, 2], [0, 6], [0, 1, 2])
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from stoker.errors import FormatError
from stoker.storage import open_store, split_location

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
#: Magic, version, dtype code, sequence count, document count.
HEADER = struct.Struct("<9sQBQQ")
#: The dtypes megatron-core's ``DType`` codes name.
DTYPES: dict[int, np.dtype[Any]] = {
    code: np.dtype(t)
    for code, t in {
        1: np.uint8,
        2: np.int8,
        3: np.int16,
        4: np.int32,
        5: np.int64,
        6: np.float64,
        7: np.float32,
        8: np.uint16,
    }.items()
}
BIN_SUFFIX, IDX_SUFFIX = ".bin", ".idx"
#: Index names of other formats: ``x.tar.idx`` / ``x.jsonl.idx`` are no token index.
_OTHER_INDEXES = (".tar.idx", ".jsonl.idx")
_HINT = "Write the index again with megatron-core's IndexedDatasetBuilder (or preprocess_data.py)."


def idx_name(bin_name: str) -> str:
    """The index beside a ``.bin`` file.

    Example:
        >>> idx_name("corpus_text_document.bin")
        'corpus_text_document.idx'
    """
    return bin_name.removesuffix(BIN_SUFFIX) + IDX_SUFFIX


def bin_location(path: str, exists: Any = None) -> str | None:
    """The ``.bin`` file of a token dataset named by ``path`` (the ``.bin``, its ``.idx``, or
    the bare prefix as Megatron passes it), else None. ``exists(name)`` is asked only for a
    bare prefix: whether ``prefix.bin`` and ``prefix.idx`` both exist.

    Example:
        >>> bin_location("/d/corpus.bin"), bin_location("/d/corpus.idx")
        ('/d/corpus.bin', '/d/corpus.bin')
        >>> bin_location("/d/shard.tar.idx") is None, bin_location("/d/corpus") is None
        (True, True)
    """
    if path.endswith(BIN_SUFFIX):
        return path
    if path.endswith(IDX_SUFFIX):
        return None if path.endswith(_OTHER_INDEXES) else path[: -len(IDX_SUFFIX)] + BIN_SUFFIX
    if exists is None or path.endswith("/"):
        return None
    if exists(path + BIN_SUFFIX) and exists(path + IDX_SUFFIX):
        return path + BIN_SUFFIX
    return None


def token_dataset(path: str, *, prefix: bool = True) -> str | None:
    """The ``.bin`` of the token dataset ``path`` names (the ``.bin``, the ``.idx`` or, with
    ``prefix``, their prefix: the store is asked whether both files exist), else None (another
    kind of dataset). Callers that may be given a dataset folder ask with ``prefix=False``
    first, and for the prefix only where the folder is not one: a folder costs no request."""

    def exists(name: str) -> bool:
        parent, base = split_location(name)
        return open_store(parent).exists(base)

    if path.endswith(("/", ".jsonl")):
        return None
    return bin_location(path, exists if prefix else None)


@dataclass(frozen=True)
class TokenIndex:
    """The arrays of a ``.idx`` file (views of its bytes: of its memory map where mapped)."""

    dtype: np.dtype[Any]
    lengths: npt.NDArray[np.int32]
    pointers: npt.NDArray[np.int64]
    documents: npt.NDArray[np.int64]
    #: The sequence modes of a multimodal index, else None.
    modes: npt.NDArray[np.int8] | None = None

    def __len__(self) -> int:
        return len(self.lengths)

    @staticmethod
    def header(data: bytes | memoryview | mmap.mmap, where: str) -> tuple[np.dtype[Any], int, int]:
        """(dtype, sequences, document indices) of an index's first bytes, checked."""
        if len(data) < HEADER.size:
            raise FormatError(
                f"the index is {len(data)} bytes, shorter than its {HEADER.size}-byte header.",
                path=where,
                offset=0,
                hint=_HINT,
            )
        magic, version, code, sequences, documents = HEADER.unpack_from(data, 0)
        if magic != MAGIC:
            raise FormatError(
                f"not a Megatron MMIDIDX index (magic {magic!r}).", path=where, offset=0, hint=_HINT
            )
        if version != VERSION:
            raise FormatError(
                f"index version {version} is not supported (only {VERSION}).",
                path=where,
                offset=9,
                hint=_HINT,
            )
        if code not in DTYPES:
            raise FormatError(
                f"unknown dtype code {code} (known: {sorted(DTYPES)}).",
                path=where,
                offset=17,
                hint=_HINT,
            )
        return DTYPES[code], sequences, documents

    @classmethod
    def parse(cls, data: bytes | memoryview | mmap.mmap, where: str) -> TokenIndex:
        """The index held in ``data`` (arrays are views of it), its size checked against its
        header."""
        dtype, count, docs = cls.header(data, where)
        plain = HEADER.size + count * 12 + docs * 8
        size = len(data)
        if size not in (plain, plain + count):
            raise FormatError(
                f"the index is {size} bytes; its header ({count} sequences, {docs} document "
                f"indices) needs {plain} (or {plain + count} with sequence modes).",
                path=where,
                offset=min(size, plain),
                hint=_HINT,
            )
        at = HEADER.size
        lengths = np.frombuffer(data, "<i4", count, at)
        pointers = np.frombuffer(data, "<i8", count, at + count * 4)
        documents = np.frombuffer(data, "<i8", docs, at + count * 12)
        modes = np.frombuffer(data, np.int8, count, plain) if size > plain else None
        return cls(dtype, lengths, pointers, documents, modes)

    @classmethod
    def load(cls, local: str, where: str | None = None) -> TokenIndex:
        """The index of the local file ``local``, memory-mapped (read in full if tiny)."""
        with open(local, "rb") as f:
            size = f.seek(0, 2)
            if size < mmap.PAGESIZE:
                f.seek(0)
                return cls.parse(f.read(), where or local)
            return cls.parse(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ), where or local)

    def byte_ranges(
        self, indices: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(start, end) byte offsets in ``.bin`` of sequences ``indices``."""
        starts = self.pointers[indices].astype(np.int64)
        return starts, starts + self.lengths[indices].astype(np.int64) * self.dtype.itemsize

    def check(self, bin_size: int, where: str) -> list[FormatError]:
        """What is wrong with this index against a ``.bin`` of ``bin_size`` bytes (each named
        with the offset in the index of the first bad entry): empty when it is sound."""
        problems: list[FormatError] = []
        count, at = len(self), HEADER.size

        def bad(what: str, first: npt.NDArray[np.intp], base: int, width: int) -> None:
            if len(first):
                i = int(first[0])
                problems.append(
                    FormatError(
                        f"{what} (first at entry {i}, {len(first)} in all).",
                        path=where,
                        offset=base + i * width,
                        hint=_HINT,
                    )
                )

        lengths, starts = self.lengths.astype(np.int64), self.pointers.astype(np.int64)
        bad("a sequence length is negative", np.flatnonzero(lengths < 0), at, 4)
        ends = starts + lengths * self.dtype.itemsize
        outside = np.flatnonzero((starts < 0) | (ends > bin_size))
        bad(f"a sequence lies outside the {bin_size}-byte .bin", outside, at + count * 4, 8)
        docs = self.documents
        doc_at = at + count * 12
        steps = np.flatnonzero((docs < 0) | (docs > count))
        bad(f"a document index is outside [0, {count}]", steps, doc_at, 8)
        bad("document indices decrease", np.flatnonzero(np.diff(docs) < 0) + 1, doc_at, 8)
        return problems


def encode_index(dtype: np.dtype[Any], lengths: Sequence[int], documents: Sequence[int]) -> bytes:
    """An index for sequences of ``lengths`` tokens stored one after another (for tests and
    examples; datasets are written by megatron-core)."""
    code = next(c for c, d in DTYPES.items() if d == dtype)
    size = np.asarray(lengths, np.int64)
    pointers = np.concatenate(([0], np.cumsum(size * dtype.itemsize)[:-1])) if len(size) else size
    return b"".join(
        [
            HEADER.pack(MAGIC, VERSION, code, len(size), len(documents)),
            size.astype("<i4").tobytes(),
            np.asarray(pointers, "<i8").tobytes(),
            np.asarray(documents, "<i8").tobytes(),
        ]
    )
