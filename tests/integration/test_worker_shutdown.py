"""Stopping the loader's worker processes through public APIs (``runtime/worker_procs.py``):
the loader knows its workers, a worker it terminates exits quietly (status 0, so torch's
SIGCHLD handler reports nothing: torch's workers do so on their parent's SIGTERM, and this test
fails if torch changes that; a worker that dies otherwise is reported: test_loader.py), and
pinning on its own thread keeps the batches and their order and passes errors on."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from stoker import (
    DefaultTaskEncoder,
    WorkerConfig,
    get_loader,
    get_train_dataset,
)
from stoker.runtime import process_producers
from stoker.runtime.loader import Loader
from tests.integration._images import make_image_dataset

#: Seconds torch's data loader waits on a worker's queue before it looks again.
STATUS_CHECK_S = float(torch.utils.data._utils.MP_STATUS_CHECK_INTERVAL)

SPLITS = {"train": {"train_a": 8, "train_b": 8}}
ARGS: dict[str, Any] = {
    "repeat": False,
    "batch_size": 2,
    "shuffle_buffer_size": 5,
    "max_samples_per_sequence": 3,
}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("shutdown") / "ds"
    make_image_dataset(path, SPLITS)
    return path


def loader_of(root: Path, repeat: bool = False, **kwargs: Any) -> Loader:
    config = WorkerConfig(rank=0, world_size=1, num_workers=2)
    args = {**ARGS, "repeat": repeat}
    return get_loader(get_train_dataset(str(root), worker_config=config, **args), **kwargs)


def test_a_worker_terminated_by_its_loader_exits_quietly(root: Path) -> None:
    loader = loader_of(root)
    batches = iter(loader)
    next(batches)
    live = loader._live
    assert live is not None
    workers = live._workers.processes
    assert len(workers) == 2 and all(w.is_alive() for w in workers)
    assert {w.pid for w in workers} <= {int(p) for p in _children()}
    loader._stop(wait=False)  # as when the loader is collected in a cycle
    for worker in workers:
        worker.join(60)  # returns as soon as it ended
    assert [w.exitcode for w in workers] == [0, 0]  # not killed by a signal: nothing reported
    # Their SIGCHLD came before join() saw them end, and Python runs a signal's handler at the
    # next bytecode of this thread: a SIGCHLD error would have been raised by now.
    loader.close()


def test_closing_stops_the_workers_while_something_still_holds_torchs_iterator(
    root: Path,
) -> None:
    loader = loader_of(root)
    batches = iter(loader)
    next(batches)
    live = loader._live
    assert live is not None
    held = live._torch_iter  # as a traceback through torch's frames would hold it
    workers = live._workers.processes
    start = time.monotonic()
    loader.close()
    for worker in workers:
        worker.join(60)  # returns as soon as it ended
    assert not any(w.is_alive() for w in workers)
    # not torch's 5 s status-check timeout per worker
    assert time.monotonic() - start < STATUS_CHECK_S * len(workers)
    assert [w.exitcode for w in workers] == [0, 0]
    del held


def test_pinning_on_its_own_thread_keeps_the_batches_and_their_order(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = [list(batch.__key__) for batch in loader_of(root)]
    pinned_on: list[str] = []

    def fake_pin(value: Any) -> Any:  # no GPU here: record where pinning runs
        pinned_on.append(threading.current_thread().name)
        return value

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(process_producers, "pin_memory", fake_pin)
    loader = loader_of(root, pin_memory=True)
    assert [list(batch.__key__) for batch in loader] == plain
    assert pinned_on and set(pinned_on) == {"stoker-pin-memory"}
    # the position bookkeeping is exact: a state saved mid-way restores into the same rest
    first_loader = loader_of(root, pin_memory=True)
    first = [list(b.__key__) for _, b in zip(range(3), first_loader, strict=False)]
    state = first_loader.state_dict()
    first_loader.close()
    rest = loader_of(root, pin_memory=True)
    rest.load_state_dict(state)
    assert first + [list(b.__key__) for b in rest] == plain


@pytest.mark.skipif(not torch.cuda.is_available(), reason="page-locked memory needs a CUDA device")
def test_pinned_batches_are_page_locked_equal_and_copy_to_the_device(root: Path) -> None:
    plain = list(loader_of(root))
    pinned = list(loader_of(root, pin_memory=True))
    assert [list(b.__key__) for b in pinned] == [list(b.__key__) for b in plain]
    for a, b in zip(plain, pinned, strict=True):
        assert not a.image.is_pinned() and b.image.is_pinned()
        assert torch.equal(a.image, b.image)
        on_device = b.image.to("cuda", non_blocking=True)
        torch.cuda.synchronize()
        assert torch.equal(on_device.cpu(), a.image)


class FailsOn(DefaultTaskEncoder[Any, Any, Any, Any]):
    def encode_sample(self, sample: Any) -> Any:
        if sample.__key__ == "train_b_03":
            raise NotImplementedError("this hook is not written yet")
        return sample


def test_an_error_reaches_the_loop_through_the_pin_thread_and_stops_the_workers(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(process_producers, "pin_memory", lambda value: value)
    config = WorkerConfig(rank=0, world_size=1, num_workers=2)
    dataset = get_train_dataset(str(root), worker_config=config, task_encoder=FailsOn(), **ARGS)
    loader = get_loader(dataset, pin_memory=True)
    batches = iter(loader)
    next(batches)
    live = loader._live
    assert live is not None and live._pinner is not None
    pinner, workers = live._pinner, live._workers.processes
    with pytest.raises(NotImplementedError, match="not written yet"):
        list(batches)
    assert not pinner.alive
    for worker in workers:
        worker.join(60)  # returns as soon as it ended
    assert not any(w.is_alive() for w in workers)


def _children() -> list[str]:
    out: list[str] = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            out += (task / "children").read_text().split()
        except FileNotFoundError:
            continue
    return out


def test_a_stop_does_not_wait_on_the_done_event_a_terminated_worker_held(root: Path) -> None:
    # A worker terminated in the middle of checking torch's shared "workers done" event leaves
    # that event's lock taken: a process that takes the lock and is killed stands for it.
    import multiprocessing

    loader = loader_of(root, repeat=True)
    batches = iter(loader)
    next(batches)
    live = loader._live
    assert live is not None and live._torch_iter is not None
    lock = live._torch_iter._workers_done_event._cond
    holder = multiprocessing.get_context("fork").Process(target=_hold_forever, args=(lock,))
    holder.start()
    deadline = time.monotonic() + 10
    while lock.acquire(timeout=0.01):  # until the holder has it
        lock.release()
        assert time.monotonic() < deadline
    holder.kill()
    holder.join()
    stopper = threading.Thread(target=loader._stop, kwargs={"wait": False}, daemon=True)
    stopper.start()
    stopper.join(20)
    assert not stopper.is_alive()  # (before: it waited for the lock forever)


def _hold_forever(lock: Any) -> None:
    lock.acquire()
    time.sleep(3600)
