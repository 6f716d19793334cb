"""The payload ring: payloads read back as written, in order, never overwritten before they are
read; a payload that does not fit goes in its message (``put`` returns None)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from stoker.pipeline.batch_pickler import BatchPickler
from stoker.pipeline.payload_ring import (
    MAX_SHARE,
    MIN_PAYLOAD,
    PayloadRing,
    RingReader,
    ring_capacity,
)


def payload(n: int, size: int) -> bytes:
    return np.random.default_rng(n).integers(0, 256, size, dtype=np.uint8).tobytes()


def test_payloads_read_back_in_order_across_wraps_and_wait_for_the_reader() -> None:
    ring = PayloadRing()
    sizes = [MIN_PAYLOAD + (n * 7919) % 90_000 for n in range(400)]  # ~18 MB through 4 MB
    first = ring.put(payload(0, sizes[0]))
    assert first is not None and first.storage is not None
    reader = RingReader(first.storage)
    pending = [(0, first.span)]
    capacity = ring_capacity(sizes[0])
    starts, refused = [first.span[0]], 0
    n = 1
    while n < len(sizes):
        placed = ring.put(payload(n, sizes[n]))
        if placed is None:  # full: the reader catches up (in order), then it fits
            refused += 1
            assert pending, "refused with nothing unread"
            for m, span in pending[: len(pending) // 2 + 1]:
                assert bytes(reader.view(span)) == payload(m, sizes[m])
                reader.done(span)
            pending = pending[len(pending) // 2 + 1 :]
            continue
        assert placed.storage is None  # the storage goes with the first payload only
        start, size, _ = placed.span
        assert size == sizes[n] and start + size <= capacity
        starts.append(start)
        pending.append((n, placed.span))
        n += 1
    for m, span in pending:  # nothing unread was overwritten
        assert bytes(reader.view(span)) == payload(m, sizes[m])
        reader.done(span)
    assert refused > 0 and starts.count(0) > 2  # it filled up and wrapped around


def test_small_and_oversized_payloads_go_in_the_message() -> None:
    ring = PayloadRing()
    assert ring.put(b"x" * (MIN_PAYLOAD - 1)) is None
    placed = ring.put(b"x" * MIN_PAYLOAD)
    assert placed is not None
    capacity = ring_capacity(MIN_PAYLOAD)
    assert ring.put(b"x" * (int(capacity * MAX_SHARE) + 1)) is None


def test_batch_pickler_notes_shared_resources() -> None:
    def dump(obj: object) -> bool:
        import io

        pickler = BatchPickler(io.BytesIO())
        pickler.dump(obj)
        return pickler.shares

    assert not dump({"text": ["a"] * 10, "ids": list(range(10)), "nested": ({"x": 1.5},)})
    assert dump({"text": ["a"], "ids": torch.arange(3)})  # torch shares its storage
    assert dump([{"deep": [torch.zeros(2)]}])
    assert not dump({"text": ["a"]})  # reset for the next batch
    # numpy's copyreg reducer (for the np.dtype class each array's pickle names) shares nothing
    assert not dump({"tokens": [np.arange(5, dtype=np.uint16)] * 8, "f": np.zeros(3)})
    assert dump({"tokens": [np.arange(5)], "ids": torch.arange(2)})


@pytest.mark.parametrize("obj", [{"a": [1, "b", (2.0, None)]}, list(range(100))])
def test_batch_pickler_pickles_like_pickle(obj: object) -> None:
    import io

    out = io.BytesIO()
    BatchPickler(out).dump(obj)
    assert pickle.loads(out.getvalue()) == obj
