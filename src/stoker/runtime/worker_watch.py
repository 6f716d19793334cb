"""A dataloader worker stuck on a sample, or dead (the OOM killer's ``SIGKILL``): noticed, its
stack logged, and with ``on_worker_failure="replace"``, replaced.

Each worker writes, in a table shared with the main process, when it began the batch it is
making (0 while it waits) and which sample (dataset, shard, index) it is on. While the main
process waits for a batch it looks at the table every :data:`POLL` seconds:

- a worker busy for longer than ``watchdog_timeout_seconds`` (Energon's meaning;
  ``watchdog_initial_timeout_seconds`` for its first batch) is *stuck*: the main process has it
  write its stack (``faulthandler`` on ``SIGUSR1``, after a ``SIGCONT`` should it be stopped) and
  logs it on the ``stoker`` logger with the sample. Then, by ``on_worker_failure``:
  ``"raise"`` (the default) keeps waiting, as Energon does, or stops with a
  :class:`~stoker.StokerError` under ``fail_on_timeout=True``; ``"replace"`` ends the workers and
  starts new ones at the positions of the batches handed out so far: the stuck sample is skipped
  (counted under :data:`STUCK` in ``loader.skipped()`` and ``stats().skipped``), and nothing else
  is lost or repeated.
- a worker that has exited is *dead*: ``"raise"`` stops with an error, ``"replace"`` does as for
  a stuck worker (the sample it was on, if any, is skipped the same way).

The other workers restart too (torch's ``DataLoader`` cannot replace one of its workers): they
redo the batches they had made ahead and the main process had not handed out (at most
``prefetch_factor`` each). Torch's ``SIGCHLD`` handler, which would raise in any line of the
training loop when a worker dies, is told to forget this loader's workers under ``"replace"``
(one private torch function: :func:`_forget_worker_pids`).
"""

from __future__ import annotations

import faulthandler
import logging
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from stoker.errors import ConfigError, StokerError

logger = logging.getLogger("stoker")

T = TypeVar("T")

#: Seconds between two looks at the table while the main process waits for a batch.
POLL = 0.2
#: The skip reason of a sample a stuck (or dead) worker was on.
STUCK = "worker stuck or died: sample skipped"
#: The values of ``on_worker_failure=``.
POLICIES = ("raise", "replace")
#: Per worker: busy since (``time.monotonic``, 0 while waiting), batches made, pid, then the
#: sample it is on: dataset, shard, index (-1: none yet).
_BUSY, _MADE, _PID, _D, _SHARD, _INDEX = range(6)
_FIELDS = 6

# In a worker: the table, where its row starts, and the samples to skip (dataset, shard, index).
_table: Any = None
_base = 0
skipped: frozenset[tuple[int, int, int]] = frozenset()


def at(d: int, shard_id: int, index: int) -> None:
    """Note the sample this worker starts on (nothing outside a watched worker)."""
    table = _table
    if table is not None:
        table[_base + _D], table[_base + _SHARD], table[_base + _INDEX] = d, shard_id, index


class WorkerReplaced(Exception):
    """Raised to the loader: the workers were ended; start new ones (``sample`` is skipped)."""

    def __init__(self, worker: int, sample: tuple[int, int, int] | None, why: str) -> None:
        super().__init__(f"worker {worker} {why}")
        self.worker, self.sample, self.why = worker, sample, why


@dataclass
class WatchSettings:
    """The loader's watch: Energon's watchdog arguments and what to do on a failure."""

    timeout: float | None = 60.0
    initial_timeout: float | None = None
    fail_on_timeout: bool = False
    on_worker_failure: str = "raise"
    #: Called (with these settings) when a worker is found stuck: Energon's hook.
    trigger: Callable[[Any], None] | None = None

    def __post_init__(self) -> None:
        if self.on_worker_failure not in POLICIES:
            raise ConfigError(
                f"on_worker_failure={self.on_worker_failure!r} is not a policy.",
                hint=f"Use one of {', '.join(map(repr, POLICIES))}.",
            )
        if self.on_worker_failure == "replace" and self.timeout is None:
            raise ConfigError(
                "on_worker_failure='replace' needs a watchdog_timeout_seconds.",
                hint="Pass watchdog_timeout_seconds=60 (say): how long a batch may take.",
            )

    # Energon's WatchdogDataset attribute names, for its trigger hook.
    @property
    def timeout_seconds(self) -> float | None:
        return self.timeout


class WorkerWatch:
    """The table the workers of one loader iterator write and the main process reads."""

    def __init__(
        self, context: Any, workers: int, settings: WatchSettings, skip: frozenset[Any]
    ) -> None:
        self.table = context.RawArray("d", workers * _FIELDS)
        self.settings, self.skip, self.workers = settings, skip, workers
        self.stacks = tempfile.mkdtemp(prefix="stoker-stacks-")
        self._reported: set[tuple[int, float]] = set()
        #: Stuck workers the monitor thread found: (worker, sample, why), for the main thread.
        self.stuck: list[tuple[int, tuple[int, int, int] | None, str]] = []
        self._stop: threading.Event | None = None

    # -- in the worker --

    def start_worker(self, worker: int) -> None:
        """In worker ``worker``: write its stack to a file on ``SIGUSR1``; share its row."""
        global _table, _base, skipped
        _table, _base, skipped = self.table, worker * _FIELDS, self.skip
        self.table[_base + _PID], self.table[_base + _D] = os.getpid(), -1
        stack_file = open(self._stack_path(worker), "w")  # noqa: SIM115 (open for the process)
        faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=True)

    def timed(self, items: Iterator[T], worker: int) -> Iterator[T]:
        """``items``, with the time each takes to make noted in the worker's row."""
        table, busy, made = self.table, worker * _FIELDS + _BUSY, worker * _FIELDS + _MADE
        while True:
            table[busy] = time.monotonic()
            try:
                item = next(items)
            except StopIteration:
                table[busy] = 0
                return
            table[busy] = 0
            table[made] += 1
            yield item

    # -- in the main process --

    def receive(self, receive: Callable[[], T], processes: dict[Any, Any], timeout: float) -> T:
        """``receive()`` (a batch from torch's iterator, made with ``timeout=POLL``), looking
        at the workers whenever nothing arrives for :data:`POLL` seconds; ``timeout`` is the
        user's ``DataLoader`` timeout (0: none)."""
        began = time.monotonic()
        while True:
            try:
                return receive()
            except RuntimeError as e:  # torch's "timed out" or "exited unexpectedly"
                text = str(e)
                if "timed out" not in text and "exited unexpectedly" not in text:
                    raise
            except (ConnectionError, EOFError):  # a batch whose sender died as it arrived
                if self.settings.on_worker_failure != "replace":
                    raise
                self._find_dead(processes)
                raise
            self.check(processes)
            if timeout and time.monotonic() - began > timeout:
                raise RuntimeError(f"DataLoader timed out after {timeout} seconds")

    def start_monitor(self) -> None:
        """Look for stuck workers on a thread of the main process too, every twentieth of the
        timeout (at least :data:`POLL` seconds): a stopped worker also stops the thread that
        hands over the file descriptors of the batches it sent, and the main process may wait
        on it while it unpickles one."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._monitor, name="stoker-worker-watch",
                                        daemon=True)  # fmt: skip
        self._thread.start()

    def _monitor(self) -> None:
        stop = self._stop
        assert stop is not None
        # A twentieth of the shortest timeout (3 s for the default 60 s): a thread woken five
        # times a second costs the loader's processes CPU on every batch.
        limits = [t for t in (self.settings.timeout, self.settings.initial_timeout) if t]
        period = max(POLL, min(limits, default=60.0) / 20)
        while not stop.wait(period):
            now = time.monotonic()
            for worker in range(self.workers):
                row = self.table[worker * _FIELDS : (worker + 1) * _FIELDS]
                limit = self._limit(row)
                if not row[_BUSY] or limit is None or now - row[_BUSY] <= limit:
                    continue
                if (worker, row[_BUSY]) in self._reported:
                    continue
                self._reported.add((worker, row[_BUSY]))
                why = f"stuck for {now - row[_BUSY]:.1f} s on one batch (timeout {limit} s)"
                self._log_stack(worker, int(row[_PID]), why, _sample(row))
                self.stuck.append((worker, _sample(row), why))

    def _limit(self, row: list[float]) -> float | None:
        settings = self.settings
        limit = settings.timeout if row[_MADE] else settings.initial_timeout
        return settings.timeout if limit is None else limit

    def _find_dead(self, processes: dict[Any, Any]) -> None:
        """Wait (up to 5 s) for the dead worker to be reaped, then act on it (:meth:`check`)."""
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            self.check(processes)
            time.sleep(0.05)

    def check(self, processes: dict[Any, Any]) -> None:
        """Act on a dead or stuck worker (see module); nothing if all are well."""
        settings = self.settings
        for worker in range(self.workers):
            row = self.table[worker * _FIELDS : (worker + 1) * _FIELDS]
            process = processes.get(int(row[_PID]))
            sample = _sample(row)
            # (0: it finished its streams, and torch let it go; or ended by this process)
            if process is not None and process.exitcode not in (None, 0):
                why = f"(pid {process.pid}) exited unexpectedly (exit code {process.exitcode})"
                if settings.on_worker_failure == "replace":
                    logger.warning("stoker: dataloader worker %s %s; replacing it.", worker, why)
                    raise WorkerReplaced(worker, sample if row[_BUSY] else None, why)
                raise StokerError(
                    f"dataloader worker {worker} {why}.",
                    hint="A worker was killed (out of memory? see `dmesg`) or crashed; restart "
                    "from the last saved state, or pass on_worker_failure='replace'.",
                )
        while self.stuck:  # found (and its stack logged) by the monitor thread
            worker, sample, why = self.stuck.pop(0)
            if settings.trigger is not None and settings.on_worker_failure != "replace":
                settings.trigger(settings)
            if settings.on_worker_failure == "replace":
                raise WorkerReplaced(worker, sample, why)
            if settings.fail_on_timeout:
                raise StokerError(
                    f"dataloader worker {worker} {why}.",
                    hint="Find the slow sample or storage (its stack is logged), raise the "
                    "timeout, or pass on_worker_failure='replace'.",
                )

    def _log_stack(self, worker: int, pid: int, why: str, sample: Any) -> None:
        """Have the worker write its stack (woken first if it was stopped); log it."""
        path = self._stack_path(worker)
        try:
            os.kill(pid, signal.SIGUSR1)
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
        deadline, text = time.monotonic() + 5.0, ""
        while time.monotonic() < deadline:  # written once it stops growing
            time.sleep(0.05)
            now = path.read_text() if path.exists() else ""
            if now and now == text:
                break
            text = now
        logger.warning(
            "stoker: dataloader worker %s (pid %s) %s, at sample %s. Its stack:\n%s",
            worker, pid, why, sample, text or "(not written)",
        )  # fmt: skip

    def _stack_path(self, worker: int) -> Path:
        return Path(self.stacks, f"worker{worker}.txt")

    def close(self) -> None:
        if self._stop is not None:
            self._stop.set()
        shutil.rmtree(self.stacks, ignore_errors=True)


def _sample(row: list[float]) -> tuple[int, int, int] | None:
    """The sample (dataset, shard, index) a worker's row says it is on (None: none yet)."""
    return None if row[_D] < 0 else (int(row[_D]), int(row[_SHARD]), int(row[_INDEX]))


def late_items(items: Iterator[T], settings: WatchSettings) -> Iterator[T]:
    """``items`` made in this process (``num_workers=0``): one that took longer than the
    timeout is reported once it arrives (logged, the trigger called; an error under
    ``fail_on_timeout``). Nothing can end a stuck main process, so nothing is replaced."""
    first = True
    try:
        while True:
            began = time.monotonic()
            try:
                item = next(items)
            except StopIteration:
                return
            limit = settings.initial_timeout if first else None
            limit = settings.timeout if limit is None else limit
            took, first = time.monotonic() - began, False
            if limit is not None and took > limit:
                why = f"one batch took {took:.1f} s in the main process (timeout {limit} s)"
                logger.warning("stoker: %s.", why)
                if settings.trigger is not None:
                    settings.trigger(settings)
                if settings.fail_on_timeout:
                    raise StokerError(f"{why}.", hint="Find the slow sample or raise the timeout.")
            yield item
    finally:
        close = getattr(items, "close", None)
        if close is not None:  # its files, as closing the producer itself would
            close()


def forget_worker_pids(torch_iter: Any) -> None:
    """Stop torch's ``SIGCHLD`` handler from raising (anywhere in the training loop) when one
    of this iterator's workers dies: the watch handles it."""
    from torch.utils.data._utils import signal_handling

    if getattr(torch_iter, "_worker_pids_set", False):
        signal_handling._remove_worker_pids(id(torch_iter))  # type: ignore[attr-defined]
        torch_iter._worker_pids_set = False


__all__ = [
    "POLICIES",
    "POLL",
    "STUCK",
    "WatchSettings",
    "WorkerReplaced",
    "WorkerWatch",
    "at",
    "forget_worker_pids",
    "late_items",
]
