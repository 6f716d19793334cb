"""Batches through reused shared-memory slots, with real dataloader worker processes.

A worker builds batches with :func:`batch_pad_stack` (into its slots), exports them; the main
process rebuilds them and releases a slot when the batch's tensors are freed. Held batches must
never be overwritten, freed ones must be reused.
"""

from __future__ import annotations

import gc
import multiprocessing
import multiprocessing.util
import os
import pickle
import time
from typing import Any

import numpy as np
import torch
import torch.utils.data

from stoker.media.image import FloatImage
from stoker.pipeline.batch import batch_pad_stack
from stoker.pipeline.exported import in_ring
from stoker.pipeline.main_floats import FloatBuffers
from stoker.pipeline.transport import (
    EXTRA_BATCHES,
    MIN_SLOT_BYTES,
    Exported,
    MainTransport,
    WorkerTransport,
    activate,
    slot_budget,
)

BATCHES = 12


def batch_values(n: int) -> dict[str, Any]:
    """Batch ``n``: two large tensors (slots), a small one (torch's path) and a view."""
    side = 512 + n  # over MIN_SLOT_BYTES as uint8 (3 x 2 x side^2), and changing size
    images = [torch.full((3, side - i, side), n + i, dtype=torch.uint8) for i in range(2)]
    return {
        "images": images,
        "floats": [FloatImage(image) for image in images],
        "small": torch.full((4,), n, dtype=torch.int64),
    }


class _Exporting(torch.utils.data.IterableDataset[tuple[int, Exported]]):
    def __init__(self, queues: list[Any], floats_as_uint8: bool = False) -> None:
        super().__init__()
        self.queues, self.floats_as_uint8 = queues, floats_as_uint8

    def __iter__(self) -> Any:
        info = torch.utils.data.get_worker_info()
        assert info is not None
        transport = WorkerTransport(self.queues[info.id], floats_as_uint8=self.floats_as_uint8)
        activate(transport)
        try:
            for n in range(info.id, BATCHES, info.num_workers):
                values = batch_values(n)
                images = batch_pad_stack(values["images"])
                batch = {
                    "n": n,
                    "images": images,
                    "corner": images[:, :, :2, :2],  # a view into the same slot
                    "floats": batch_pad_stack(values["floats"]),
                    "small": values["small"],
                }
                yield info.id, transport.export(batch)
        finally:
            activate(None)


def expected_images(n: int) -> torch.Tensor:
    return batch_pad_stack(batch_values(n)["images"])


def run(hold: bool, floats_as_uint8: bool = False) -> tuple[list[dict[str, Any]], int, int]:
    """The batches (``hold``), the most slot mappings at once, the float batches sent as uint8."""
    # as the loader does: workers share this process's temporary folder, so a worker that has
    # finished (and exited) still leaves the socket its batches' file descriptors are served from
    multiprocessing.util.get_temp_dir()
    main = MainTransport(multiprocessing.get_context(), workers=2)
    dataset = _Exporting(main.queues, floats_as_uint8)
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2)
    held, mappings, scaled = [], 0, 0
    try:
        for worker, exported in loader:
            batch = main.load(worker, exported)
            assert batch["floats"].dtype == torch.float32
            scaled += batch["floats"].numel() == 0  # sent as uint8: empty until finished
            main.finish(batch)
            n = batch["n"]
            assert torch.equal(batch["images"], expected_images(n)), f"batch {n} corrupted"
            assert torch.equal(batch["corner"], batch["images"][:, :, :2, :2])
            assert torch.equal(batch["floats"], batch["images"].float() / 255)
            assert batch["small"].tolist() == [n] * 4
            if hold:
                held.append(batch)
            del batch
            gc.collect()
            mappings = max(mappings, len(main.storages))
    finally:
        main.close()
    assert floats_as_uint8 or scaled == 0
    return held, mappings, scaled


def test_held_batches_are_never_overwritten() -> None:
    held, _, _ = run(hold=True)
    assert [b["n"] for b in held] == list(range(BATCHES))
    for batch in held:  # every batch still holds its own values after all the others
        assert torch.equal(batch["images"], expected_images(batch["n"]))
        assert torch.equal(batch["floats"], batch["images"].float() / 255)


def test_freed_slots_are_reused() -> None:
    _, mappings, _ = run(hold=False)
    # 2 workers x 2 slot tensors per batch x (batches in flight): far fewer than one per batch
    assert 0 < mappings <= 2 * 2 * 4 < 2 * BATCHES


def test_float_batches_travel_as_uint8_and_are_scaled_in_the_main_process() -> None:
    held, _, scaled = run(hold=True, floats_as_uint8=True)  # same values (checked in run)
    assert [b["n"] for b in held] == list(range(BATCHES))
    assert scaled >= 2  # the first batches of each worker; then its slot budget is spent
    for batch in held:  # the float buffers are the main process's, never reused while held
        assert torch.equal(batch["floats"], batch["images"].float() / 255)
    _, mappings, scaled = run(hold=False, floats_as_uint8=True)
    # most travel as uint8 (the rest: a release came late, a fresh float segment)
    assert scaled >= BATCHES // 2 and 0 < mappings <= 2 * 2 * 4


def test_the_main_process_reuses_float_buffers_of_freed_batches() -> None:
    buffers = FloatBuffers(keep=1)
    pixels = np.full((3, 4, 5), 51, dtype=np.uint8)
    first = buffers.scaled(pixels)
    pointer = first.data_ptr()
    assert torch.equal(first, torch.full((3, 4, 5), 0.2))
    del first
    assert buffers.free_bytes >= pixels.size * 4
    second = buffers.scaled(np.zeros((3, 4, 4), dtype=np.uint8))  # a bit smaller: fits
    assert second.data_ptr() == pointer and second.shape == (3, 4, 4)
    assert buffers.free_bytes == 0
    third = buffers.scaled(pixels)  # the only buffer is held: a new one
    assert third.data_ptr() != pointer
    del second, third
    assert buffers.free_bytes == (3 * 4 * 5 * 17 // 16) * 4  # keep=1: one stays


def test_small_tensors_and_foreign_tensors_take_torchs_path() -> None:
    queue: Any = multiprocessing.get_context().Queue()
    transport = WorkerTransport(queue)
    assert transport.buffer((4,), torch.uint8) is None
    big = transport.buffer((MIN_SLOT_BYTES,), torch.uint8)
    assert big is not None and len(transport.slots) == 1
    transport.export({"other": torch.zeros(3)})  # the slot was not sent: never reused
    assert transport.slots == {}
    queue.close()


def held_slots(transport: WorkerTransport, batches: int, nbytes: int) -> int:
    """Build and export ``batches`` batches of ``nbytes`` that the main process never frees;
    the number that got a slot (the others take fresh segments)."""
    pooled = 0
    for _ in range(batches):
        buffer = transport.buffer((nbytes,), torch.uint8)
        pooled += buffer is not None
        transport.export({"images": buffer})  # a worker exports every batch it builds
    return pooled


def test_the_slot_budget_is_sized_from_the_batches_and_prefetch_factor() -> None:
    queue: Any = multiprocessing.get_context().Queue()
    nbytes = 2 * MIN_SLOT_BYTES
    try:
        for prefetch in (1, 2, 4):  # one slot per batch in flight: prefetched + 2
            auto = WorkerTransport(queue, None, prefetch_factor=prefetch)
            assert held_slots(auto, 10, nbytes) == prefetch + EXTRA_BATCHES
            assert slot_budget(nbytes, prefetch) >= (prefetch + EXTRA_BATCHES) * nbytes
        fixed = WorkerTransport(queue, 3 * nbytes / 2**20, prefetch_factor=4)  # the override
        assert held_slots(fixed, 10, nbytes) == 2
        assert held_slots(WorkerTransport(queue, 0), 3, nbytes) == 0  # 0: no reuse at all
    finally:
        queue.close()


PLAIN_BATCHES = 120


def plain_batch(n: int) -> dict[str, Any]:
    """Batch ``n`` of plain data, 60-120 kB pickled (the ring of 4 MB wraps several times)."""
    rng = np.random.default_rng(n)
    size = 60 + n % 61
    return {"n": n, "text": [rng.bytes(1000).hex()[: 1000 - i] for i in range(size)]}


class _PlainExporting(torch.utils.data.IterableDataset[tuple[int, Exported]]):
    def __init__(self, queues: list[Any]) -> None:
        super().__init__()
        self.queues = queues

    def __iter__(self) -> Any:
        info = torch.utils.data.get_worker_info()
        assert info is not None
        transport = WorkerTransport(self.queues[info.id])
        for n in range(info.id, PLAIN_BATCHES, info.num_workers):
            batch: Any = plain_batch(n)
            if n % 10 == 9:  # now and then a small tensor: shared by torch, not detached
                batch = {**batch, "ids": torch.full((3,), n)}
            yield info.id, transport.export(batch)


def test_plain_batches_cross_in_the_ring_and_load_late_in_order() -> None:
    """Detached exports may be loaded long after they arrived (here: all of them after the
    workers exited), each worker's in the order it made them; the ring is never written over
    an unread batch (the workers fall back to the message when it is full)."""
    multiprocessing.util.get_temp_dir()
    main = MainTransport(multiprocessing.get_context(), workers=2)
    loader = torch.utils.data.DataLoader(
        _PlainExporting(main.queues), batch_size=None, num_workers=2, prefetch_factor=4
    )
    try:
        waiting: dict[int, list[Exported]] = {0: [], 1: []}
        got: list[dict[str, Any]] = []
        for worker, exported in loader:
            if not exported.detached:  # shares a tensor: loaded at once, in its turn
                waiting[worker].append(exported)
                while waiting[worker]:
                    got.append(main.load(worker, waiting[worker].pop(0)))
            else:
                waiting[worker].append(exported)
        spans = [e.span for batches in waiting.values() for e in batches]
        for worker, batches in waiting.items():  # after the workers are gone
            got.extend(main.load(worker, e) for e in batches)
    finally:
        main.close()
    assert sorted(b["n"] for b in got) == list(range(PLAIN_BATCHES))
    for batch in got:
        assert batch["text"] == plain_batch(batch["n"])["text"]
        if batch["n"] % 10 == 9:
            assert batch["ids"].tolist() == [batch["n"]] * 3
    assert any(span is not None for span in spans)  # most went through the ring
    assert any(span is None for span in spans)  # the main process held it full at times


def _has_exited(pid: int) -> bool:
    """Whether process ``pid`` (not a child of the caller) has exited: gone, or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in "ZX"
    except FileNotFoundError:
        return True


class _TensorAheadOfItsTurn(_PlainExporting):
    """Worker 1's batch (sharing a tensor) and its end arrive while worker 0 still works: worker
    0 waits until worker 1 has exited (stopped by the data loader on its end), then yields,
    with whether it saw that exit."""

    def __init__(self, queues: list[Any], pid: Any) -> None:
        super().__init__(queues)
        self.pid = pid  # worker 1's, written by worker 1

    def __iter__(self) -> Any:
        info = torch.utils.data.get_worker_info()
        assert info is not None
        transport = WorkerTransport(self.queues[info.id])
        exited = False
        if info.id == 1:
            self.pid.value = os.getpid()
        else:
            deadline = time.monotonic() + 60
            while not exited and time.monotonic() < deadline:
                exited = self.pid.value != 0 and _has_exited(self.pid.value)
                time.sleep(0.01)
        yield info.id, transport.export({"ids": torch.full((3,), info.id)}), exited


def test_a_batch_sharing_a_tensor_is_taken_over_while_its_worker_lives() -> None:
    """The data loader stops a worker as soon as its end arrives, even where its last batch
    waits for an earlier one of another worker: the tensor must not be left to the worker."""
    multiprocessing.util.get_temp_dir()
    main = MainTransport(multiprocessing.get_context(), workers=2)
    pid = multiprocessing.get_context("fork").Value("l", 0)
    loader = torch.utils.data.DataLoader(
        _TensorAheadOfItsTurn(main.queues, pid),
        batch_size=None, num_workers=2, multiprocessing_context="fork",
    )  # fmt: skip
    try:
        got, exited = {}, {}
        for worker, exported, seen in loader:
            got[worker] = main.load(worker, exported)["ids"].tolist()
            exited[worker] = seen
    finally:
        main.close()
    assert exited[0]  # worker 0 yielded only after worker 1 had exited: the order was arranged
    assert got == {0: [0, 0, 0], 1: [1, 1, 1]}


def test_an_export_pickles_to_its_span_alone_only_when_nothing_else_is_set() -> None:
    ringed = Exported(b"", (), True, True, (64, 300, 364))
    assert in_ring((64, 300, 364)) == ringed
    assert len(pickle.dumps(ringed)) < len(pickle.dumps(Exported(b"", (7,), True, True, (1, 2, 3))))
    others = [
        ringed,
        Exported(b"", (7,), True, True, (64, 300, 364)),  # a dropped slot travels too
        Exported(b"", (), True, True, (0, 300, 300), ring="the storage"),  # the ring, once
        Exported(b"pickle", (), True, True),  # in the message
        Exported(b"pickle", (1, 2), False, storages=(), side=()),
    ]
    for exported in others:
        back = pickle.loads(pickle.dumps(exported))
        assert back == exported and type(back) is Exported
