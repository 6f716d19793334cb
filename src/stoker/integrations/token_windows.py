"""Fixed-length training sequences from Megatron token datasets, as megatron-core's GPTDataset
cuts them: windows of ``seq_length + 1`` tokens over the concatenation of the sequences, across
document boundaries, on stoker's packing (so a loader with it saves and restores exactly).

The stream of a ``.bin`` is its sequences in index order, each document followed by ``eod``
when one is given (leave it None for data that has it already, as ``preprocess_data.py
--append-eod`` writes). Window ``j`` is the stream's tokens ``[j * seq_length, (j + 1) *
seq_length + 1)``: consecutive windows share one token (the last input's label), and a last
partial window is dropped, as GPTDataset does with ``add_extra_token_to_sequence``.

Each sequence's place in the stream is a pure function of the index (its pointer, and the
documents ended before it), so :meth:`TokenWindowEncoder.preencode_sample` cuts each sequence
into the pieces of the windows it meets, and the packer joins a window's pieces once all are in
its buffer. Read the dataset in order (``get_val_dataset``, or ``get_train_dataset`` with
``shuffle_buffer_size=None`` and ``max_samples_per_sequence=None``) with a packing buffer larger
than the pieces of one window; each dataloader worker reads its own range of sequences, and a
window that straddles two workers' ranges is left in the buffer (with workers, a pass yields all
windows but those).

Example:
    >>> from stoker import get_loader, get_val_dataset
    >>> encoder = TokenWindowEncoder(seq_length=128, eod=0)
    >>> dataset = get_val_dataset(
    ...     "corpus_text_document", split_part="train", worker_config=wc, batch_size=8,
    ...     task_encoder=encoder, packing_buffer_size=64,
    ... )
    >>> next(iter(get_loader(dataset))).tokens.shape
    torch.Size([8, 129])
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from stoker.errors import ConfigError, FormatError
from stoker.format.binidx import TokenIndex
from stoker.model.dataclass_helpers import edataclass
from stoker.model.samples import Sample
from stoker.model.task import TaskEncoder
from stoker.pipeline.batch import batch_stack
from stoker.pipeline.read_binidx import BinIdxReader
from stoker.storage import open_store, split_location


@edataclass
class TokenWindow(Sample):
    """``seq_length + 1`` tokens (int64) of window ``window`` of the dataset's stream; a batch
    holds ``(B, seq_length + 1)`` tokens and a list of windows."""

    tokens: torch.Tensor
    window: Any


@dataclass(frozen=True)
class _Piece:
    """The tokens of one sequence that fall in window ``window`` of dataset ``path``."""

    path: str
    window: int
    tokens: npt.NDArray[Any]
    key: str
    restore_key: Any


class _Stream:
    """Where each sequence of a ``.bin`` starts in its stream (with ``eod`` after documents)."""

    def __init__(self, path: str, eod: int | None) -> None:
        parent, name = split_location(path)
        reader = BinIdxReader(open_store(parent), [name])
        try:
            index: TokenIndex = reader.index(0)
            lengths = index.lengths.astype(np.int64)
            starts = index.pointers.astype(np.int64)
        finally:
            reader.close()
        size = index.dtype.itemsize
        if len(starts) and (
            starts[0] != 0 or np.any(starts[1:] != starts[:-1] + lengths[:-1] * size)
        ):
            raise FormatError(
                "the sequences of the .bin are not stored one after another.",
                path=path,
                hint="Token windows need a .bin written by megatron-core's builder (or merged "
                "with add_index), whose sequences are contiguous.",
            )
        self.pointers, self.lengths, self.size = index.pointers, index.lengths, size
        self.documents = np.asarray(index.documents, dtype=np.int64)
        self.eod = eod
        total = int(lengths.sum())
        if eod is not None:
            total += max(len(self.documents) - 1, 0)
        self.total = total

    def span(self, i: int) -> tuple[int, int, bool]:
        """(start, end) of sequence ``i`` in the stream (its ``eod`` included) and whether a
        document ends with it."""
        start = int(self.pointers[i]) // self.size
        end = start + int(self.lengths[i])
        ends_document = False
        if self.eod is not None:
            ended = int(np.searchsorted(self.documents, i, side="right")) - 1  # documents before
            start, end = start + ended, end + ended
            at = int(np.searchsorted(self.documents, i + 1))
            ends_document = at < len(self.documents) and int(self.documents[at]) == i + 1
            end += ends_document
        return start, end, ends_document


class TokenWindowEncoder(TaskEncoder[Any, Any, Any, Any]):
    """Turns the crude samples of ``.bin``/``.idx`` datasets into :class:`TokenWindow` s of
    ``seq_length + 1`` tokens (see the module); use it with ``packing_buffer_size``.

    Args:
        seq_length: Tokens per training sequence (each window holds one more).
        eod: The end-of-document token appended to each document; None: none appended.
    """

    def __init__(self, seq_length: int, eod: int | None = None) -> None:
        super().__init__()
        if seq_length < 1:
            raise ConfigError(f"{seq_length=} must be at least 1.")
        self.seq_length, self.eod = seq_length, eod
        self._streams: dict[tuple[str, int | None], _Stream] = {}

    def _stream(self, path: str) -> _Stream:
        stream = self._streams.get((path, self.eod))
        if stream is None:
            stream = self._streams[(path, self.eod)] = _Stream(path, self.eod)
        return stream

    def preencode_sample(self, sample: Any) -> Iterator[_Piece]:
        """The pieces of the windows sequence ``sample`` meets."""
        path = str(sample["__sources__"][0].dataset_path)
        stream, step = self._stream(path), self.seq_length
        tokens = np.asarray(sample["tokens"])
        start, end, ends_document = stream.span(int(sample["__key__"]))
        if ends_document and self.eod is not None:
            tokens = np.append(tokens.astype(np.int64), np.int64(self.eod))
        windows = (stream.total - 1) // step  # whole windows only
        first = max((start - 1) // step, 0)
        last = min((end - 1) // step, windows - 1)
        for j in range(first, last + 1):
            lo, hi = max(start, j * step), min(end, (j + 1) * step + 1)
            if hi > lo:
                part = tokens[lo - start : hi - start]
                yield _Piece(path, j, part, sample["__key__"], sample["__restore_key__"])

    def select_samples_to_pack(self, samples: list[Any]) -> list[list[Any]]:
        """The windows all of whose pieces are in the buffer, in window order."""
        by_window: dict[tuple[str, int], list[_Piece]] = {}
        for piece in samples:
            by_window.setdefault((piece.path, piece.window), []).append(piece)
        full = self.seq_length + 1
        return [
            group
            for _, group in sorted(by_window.items())
            if sum(len(p.tokens) for p in group) == full
        ]

    def pack_selected_samples(self, samples: list[Any]) -> TokenWindow:
        tokens = np.concatenate([p.tokens.astype(np.int64) for p in samples])
        first = samples[0]
        return TokenWindow(
            __key__=f"{first.path.rsplit('/', 1)[-1]}#{first.window}",
            __restore_key__=first.restore_key,
            tokens=torch.from_numpy(tokens),
            window=first.window,
        )

    def batch(self, samples: list[Any]) -> TokenWindow:
        return TokenWindow(
            __key__=[s.__key__ for s in samples],  # type: ignore[arg-type]  # a batch: a list
            __restore_key__=tuple(s.__restore_key__ for s in samples),
            tokens=batch_stack([s.tokens for s in samples]),
            window=[s.window for s in samples],
        )
