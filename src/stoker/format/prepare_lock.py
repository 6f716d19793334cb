"""One ``prepare`` at a time per dataset: a lock file in the work folder.

``prepare`` keeps its per-shard results and chunk files in ``.nv-meta/.stoker-work/``; two runs
at once would remove each other's temporary files and publish a mix. So a run takes
``.nv-meta/.stoker-work/prepare.lock`` first and keeps it until it has published or given up.

The lock is an ``flock`` on that file, and the file holds who took it (pid, host, start). The
kernel drops an ``flock`` when its holder dies however it dies (``kill -9``, a crash, a reboot),
so a crashed run never leaves a lock that blocks the next one, and no pid check can be fooled by
a reused pid. Only one case needs a pid check: forked indexing workers inherit the lock's file
description, so for the moment between their parent's death and their own (they watch it) the
lock is still held; a lock held while the pid named in the file is dead on this host is taken
over (the old file unlinked and a new one locked), with a log line. Either way a run that found
a left-over file says so in the log.

Datasets on object stores have no local work folder to lock: their prepare is not locked.

Example:
    >>> from stoker.format.pack import pack
    >>> from stoker.storage import open_store
    >>> _ = pack("raw", "locked-wds", samples_per_shard=30)
    >>> with PrepareLock(open_store("locked-wds")):
    ...     pass  # index and publish
"""

from __future__ import annotations

import datetime
import errno
import fcntl
import json
import logging
import os
import socket
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from stoker.errors import PrepareLockedError, StokerError
from stoker.format.prepare_work import LOCK_NAME
from stoker.storage import Store

_LOG = logging.getLogger("stoker")
#: Locks this process holds: lock file path -> [pid of the holder, fd, times taken, whether
#: taking it made the ``.nv-meta`` folder (1) or not (0)].
_HELD: dict[str, list[int]] = {}


@dataclass(frozen=True)
class Holder:
    """Who holds (or held) a lock, as written in its file."""

    pid: int
    host: str
    since: float

    def describe(self) -> str:
        start = datetime.datetime.fromtimestamp(self.since, datetime.timezone.utc)
        minutes = max(0, int(time.time() - self.since)) // 60
        since = f"{start:%Y-%m-%d %H:%M:%S} UTC"
        return f"pid {self.pid} on host {self.host}, since {since} ({minutes} min)"

    def is_dead_here(self) -> bool:
        """Whether the holder was on this host and its process is gone."""
        if self.host != socket.gethostname():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False  # a process of another user
        return False


class PrepareLock:
    """The prepare lock of the dataset in ``store``; a context manager, re-entrant in a process
    (the distributed prepare takes it on rank 0 for the scan, then again to publish)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.path = store.local_path(LOCK_NAME)
        self._taken = 0

    def acquire(self) -> PrepareLock:
        """Take the lock, or raise :class:`PrepareLockedError` naming the running prepare."""
        root = self.store.local_path("")
        if self.path is None or root is None or not os.path.isdir(root):
            return self  # remote, or no dataset there (prepare then says so)
        held = _HELD.get(self.path)
        if held is not None and held[0] == os.getpid():
            held[2] += 1
        else:
            meta_dir = os.path.dirname(os.path.dirname(self.path))
            made_meta = not os.path.isdir(meta_dir)
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            try:
                fd = _lock(self.path, self.store.url(""))
            except BaseException:
                _remove_empty(self.path, meta_dir if made_meta else None)
                raise
            _HELD[self.path] = [os.getpid(), fd, 1, int(made_meta)]
        self._taken += 1
        return self

    def release(self) -> None:
        """Give back what :meth:`acquire` took (nothing if it took nothing)."""
        if self.path is None or not self._taken:
            return
        self._taken -= 1
        held = _HELD[self.path]
        held[2] -= 1
        if held[2]:
            return
        del _HELD[self.path]
        fd = held[1]
        try:
            if _same_file(fd, self.path):
                os.remove(self.path)  # while still locked: no one can lock this file any more
            meta_dir = os.path.dirname(os.path.dirname(self.path))
            _remove_empty(self.path, meta_dir if held[3] else None)  # as it was before
        finally:
            os.close(fd)

    def close(self) -> None:
        """Give back every time this object took the lock."""
        while self._taken:
            self.release()

    def __enter__(self) -> PrepareLock:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def read_holder(path: str) -> Holder | None:
    """Who the lock file at ``path`` names (None: no file, or not one of ours)."""
    try:
        with open(path, "rb") as f:
            return _parse(f.read())
    except OSError:
        return None


def _lock(path: str, dataset: str) -> int:
    """Open and ``flock`` the lock file; its fd. Retries while the file is replaced under it."""
    for _ in range(100):
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _parse(os.pread(fd, 4096, 0))
            if holder is not None and holder.is_dead_here():
                _LOG.warning(
                    "stoker prepare: taking over the lock of %s from a prepare that is gone "
                    "(%s; its worker processes still held it).",
                    dataset,
                    holder.describe(),
                )
                if _same_file(fd, path):
                    os.remove(path)
                os.close(fd)
                continue
            os.close(fd)
            raise _locked_error(path, dataset, holder) from None
        except OSError as e:
            os.close(fd)
            if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                raise
            _LOG.warning(
                "stoker prepare: the file system of %s cannot lock files (%s); nothing stops "
                "a second prepare of this dataset from running at the same time.",
                path,
                e.strerror,
            )
            return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        if not _same_file(fd, path):
            os.close(fd)  # unlinked by its holder between open and flock: take the new one
            continue
        previous = _parse(os.pread(fd, 4096, 0))
        if previous is not None:
            _LOG.warning(
                "stoker prepare: taking over the lock of %s left by a prepare that ended "
                "without releasing it (%s).",
                dataset,
                previous.describe(),
            )
        mine = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(mine).encode(), 0)
        return fd
    raise StokerError(f"internal: the lock file {path} kept being replaced.")


def _locked_error(path: str, dataset: str, holder: Holder | None) -> PrepareLockedError:
    who = holder.describe() if holder is not None else "its pid is not written yet"
    return PrepareLockedError(
        f"another `stoker prepare` of this dataset is running ({who}); two at once would "
        "remove each other's work files.",
        path=dataset,
        hint=f"Wait for it to finish, or, if that process is gone, remove {path} and run again.",
    )


def _parse(raw: bytes) -> Holder | None:
    try:
        data: Any = json.loads(raw)
        return Holder(int(data["pid"]), str(data["host"]), float(data["since"]))
    except (ValueError, KeyError, TypeError):
        return None


def _same_file(fd: int, path: str) -> bool:
    try:
        now = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino)


def _remove_empty(lock_path: str, meta_dir: str | None) -> None:
    """Remove the work folder (and the ``.nv-meta`` folder made for it) if nothing is left."""
    for folder in (os.path.dirname(lock_path), meta_dir):
        if folder is None:
            continue
        try:
            os.rmdir(folder)
        except OSError:
            return  # not empty (results of an unfinished run, or another run's lock)
