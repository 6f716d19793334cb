"""Token sequences for vision-language training: layout, packing and fixed-length batches.

A sequence is ``[image] * n + prompt + answer + [eos]``, where ``image`` is a placeholder id the
model replaces by image embeddings. Only the answer is trained: ``labels[i]`` is the token at
``i + 1`` where that token belongs to the answer, else ``ignore_index``. Packed sequences are
concatenations of such sequences; their ``position_ids`` restart at 0 for every member, and
``segment_ids`` (1, 2, ... per member, 0 for padding) tell attention kernels where each one ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from stoker.errors import ConfigError
from stoker.pipeline.bins import first_fit_decreasing as first_fit_decreasing


@dataclass
class MultiModalSample:
    """One encoded sequence (or a pack of them), not yet padded.

    ``images`` are ``(num_images, C, H, W)``; ``tokens``, ``labels``, ``loss_mask`` and
    ``position_ids`` have the sequence's length; ``seq_lengths`` are its members' lengths.
    """

    __key__: str
    images: torch.Tensor
    tokens: torch.Tensor
    labels: torch.Tensor
    loss_mask: torch.Tensor
    position_ids: torch.Tensor
    seq_lengths: list[int] = field(default_factory=list)


@dataclass
class MultiModalBatch:
    """A micro-batch of fixed-length sequences: every ``(B, seq_length)`` tensor is padded.

    ``images`` holds the images of all sequences in order, ``num_images[b]`` of them for row
    ``b``; ``__key__[b]`` is the key of row ``b`` (a pack's keys joined by commas).
    """

    __key__: list[str]
    images: torch.Tensor
    num_images: torch.Tensor
    tokens: torch.Tensor
    labels: torch.Tensor
    loss_mask: torch.Tensor
    position_ids: torch.Tensor
    segment_ids: torch.Tensor


def layout(
    key: str,
    images: torch.Tensor,
    prompt: list[int],
    answer: list[int],
    *,
    image_token_id: int,
    image_tokens: int,
    ignore_index: int,
    max_length: int,
) -> MultiModalSample:
    """One sample's sequence, cut to ``max_length`` tokens (the images' placeholders stay)."""
    placeholders = [image_token_id] * (image_tokens * len(images))
    if len(placeholders) >= max_length:
        raise ConfigError(
            f"{len(images)} image(s) x {image_tokens} placeholder token(s) leave no room in "
            f"seq_length={max_length} (sample {key!r}).",
            hint="Raise seq_length or lower image_tokens_per_image.",
        )
    tokens = torch.tensor(placeholders + prompt + answer, dtype=torch.long)[:max_length]
    trained = torch.zeros(len(tokens), dtype=torch.bool)
    trained[len(placeholders) + len(prompt) :] = True
    labels = torch.full_like(tokens, ignore_index)
    labels[:-1] = torch.where(trained[1:], tokens[1:], ignore_index)
    n = len(tokens)
    return MultiModalSample(
        __key__=key,
        images=images,
        tokens=tokens,
        labels=labels,
        loss_mask=(labels != ignore_index).float(),
        position_ids=torch.arange(n),
        seq_lengths=[n],
    )


def pack(members: list[MultiModalSample]) -> MultiModalSample:
    """Concatenate sequences into one; positions restart at 0 for each member."""
    return MultiModalSample(
        __key__=",".join(m.__key__ for m in members),
        images=torch.cat([m.images for m in members]),
        tokens=torch.cat([m.tokens for m in members]),
        labels=torch.cat([m.labels for m in members]),
        loss_mask=torch.cat([m.loss_mask for m in members]),
        position_ids=torch.cat([m.position_ids for m in members]),
        seq_lengths=[n for m in members for n in m.seq_lengths],
    )


def pad_batch(
    samples: list[MultiModalSample], *, seq_length: int, pad_token_id: int, ignore_index: int
) -> MultiModalBatch:
    """Pad every sequence to ``seq_length`` and stack them into a :class:`MultiModalBatch`."""
    rows = len(samples)
    tokens = torch.full((rows, seq_length), pad_token_id, dtype=torch.long)
    labels = torch.full((rows, seq_length), ignore_index, dtype=torch.long)
    loss_mask = torch.zeros((rows, seq_length))
    position_ids = torch.zeros((rows, seq_length), dtype=torch.long)
    segment_ids = torch.zeros((rows, seq_length), dtype=torch.long)
    for row, s in enumerate(samples):
        n = len(s.tokens)
        if n > seq_length:
            raise ConfigError(f"sequence {s.__key__!r} has {n} tokens, more than {seq_length=}.")
        tokens[row, :n], labels[row, :n] = s.tokens, s.labels
        loss_mask[row, :n], position_ids[row, :n] = s.loss_mask, s.position_ids
        segment_ids[row, :n] = torch.repeat_interleave(
            torch.arange(1, len(s.seq_lengths) + 1), torch.tensor(s.seq_lengths)
        )
    images = [s.images for s in samples if len(s.images)]
    return MultiModalBatch(
        __key__=[s.__key__ for s in samples],
        images=torch.cat(images) if images else torch.zeros(0),
        num_images=torch.tensor([len(s.images) for s in samples]),
        tokens=tokens,
        labels=labels,
        loss_mask=loss_mask,
        position_ids=position_ids,
        segment_ids=segment_ids,
    )
