"""Batch buffers the main process reuses (:mod:`stoker.pipeline.main_buffers`): a batch that
anything still refers to is never written into; a freed one serves the next batch, whose
padding is zeroed all the same."""

from __future__ import annotations

import gc

import numpy as np
import torch

from stoker.pipeline.batch import batch_pad_stack
from stoker.pipeline.main_buffers import MIN_BYTES, MainBuffers

SHAPE = (4, MIN_BYTES // 4)


def test_a_held_batch_is_never_handed_out_again() -> None:
    buffers = MainBuffers()
    first, _ = buffers.tensor(SHAPE, torch.uint8)
    view = first[1:].numpy()  # the training loop keeps only a numpy view of a part
    del first
    gc.collect()
    second, zeroed = buffers.tensor(SHAPE, torch.uint8)
    assert zeroed
    second.fill_(5)
    assert not view.any()  # the kept view still reads its own (zero) memory
    pointer = view.__array_interface__["data"][0]
    del view
    gc.collect()
    third, zeroed = buffers.tensor(SHAPE, torch.uint8)
    assert not zeroed and third.data_ptr() + SHAPE[1] == pointer


def test_only_buffers_of_about_the_size_asked_serve() -> None:
    buffers = MainBuffers()
    big, _ = buffers.tensor((3 * SHAPE[0], SHAPE[1]), torch.uint8)
    del big
    small, zeroed = buffers.tensor(SHAPE, torch.uint8)  # a third of it: not reused
    assert zeroed
    floats, zeroed = buffers.tensor((SHAPE[0] * 2, SHAPE[1] // 4), torch.float32)
    assert not zeroed and floats.dtype == torch.float32  # 2 MB of 3: reused as float32
    assert floats.shape == (SHAPE[0] * 2, SHAPE[1] // 4) and floats.is_contiguous()
    del small


def test_at_most_keep_free_buffers_are_kept() -> None:
    buffers = MainBuffers(keep=1)
    a, _ = buffers.tensor(SHAPE, torch.uint8)
    b, _ = buffers.tensor(SHAPE, torch.uint8)
    newest = b.data_ptr()
    del a, b
    c, zeroed = buffers.tensor(SHAPE, torch.uint8)
    d, zeroed_too = buffers.tensor(SHAPE, torch.uint8)
    assert (zeroed, zeroed_too) == (False, True) and c.data_ptr() == newest
    del c, d


def test_a_pad_stacked_batch_in_reused_memory_has_zero_padding() -> None:
    rows = MIN_BYTES // 64
    full = [torch.full((rows, 64), 9, dtype=torch.uint8) for _ in range(2)]
    first = batch_pad_stack(full)
    pointer = first.data_ptr()
    del first
    parts = [
        torch.full((rows - 5, 60), 3, dtype=torch.uint8),
        torch.ones((rows, 64), dtype=torch.uint8),
    ]
    second = batch_pad_stack(parts)
    assert second.data_ptr() == pointer  # the freed batch's memory, old values and all
    want = np.zeros((2, rows, 64), dtype=np.uint8)
    want[0, : rows - 5, :60] = 3
    want[1] = 1
    assert np.array_equal(second.numpy(), want)
