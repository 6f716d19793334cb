"""The file tree ``stoker mount`` shows: a prepared dataset's sample parts as read-only files.

Energon's layout: by default one folder holding every part as ``<key>.<part>``
(``000001.jpg``, ``000001.txt``, ...); with ``sample_folders`` one folder per sample holding its
parts by name (``000001/jpg``, ``000001/txt``). A ``/`` in a key makes sub-folders
(``indoor/000001.jpg``). Sizes and locations come from ``.nv-meta/index.sqlite``; a read is one
ranged read of the shard, local or remote. :class:`MountOperations` answers the filesystem calls
(``getattr``, ``readdir``, ``open``, ``read``, ``release``, ``statfs``) with Python values and
``OSError``\\ s, so the FUSE binding only forwards to it.

Example:
    >>> tree = DatasetTree("coco-wds", sample_folders=True)
    >>> tree.listdir("")[:2], tree.listdir("000001")
    (['000000', '000001'], ['jpg', 'txt'])
    >>> tree.read("000001/txt", 0, 100)
    b'a red square'
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from typing import Any

from stoker.errors import MissingSampleIndexError
from stoker.format.meta import INDEX_SQLITE, read_info
from stoker.format.sqlite_index import SqliteIndexReader
from stoker.storage import open_store


@dataclass(frozen=True, slots=True)
class FileEntry:
    """Where a file's bytes are: a data range of a shard."""

    shard: str
    offset: int
    size: int


class DatasetTree:
    """The read-only tree of a prepared dataset's sample parts (see the module doc)."""

    def __init__(self, path: str, *, sample_folders: bool = False) -> None:
        self.store = open_store(path)
        shards = list(read_info(self.store).shard_counts)
        local = self.store.cached_local_path(INDEX_SQLITE)
        if local is None:
            raise MissingSampleIndexError.for_dataset(path, "the files to show (mount)")
        #: folder path ("" for the top) -> {name: FileEntry, or None for a sub-folder}
        self._dirs: dict[str, dict[str, FileEntry | None]] = {"": {}}
        self.files = 0
        self.bytes = 0
        reader = SqliteIndexReader(local)
        try:
            for key, part, shard_id, offset, size in reader.iter_parts():
                name = f"{key}/{part}" if sample_folders else f"{key}.{part}"
                self._add(name, FileEntry(shards[shard_id], offset, size))
        finally:
            reader.close()

    def _add(self, name: str, entry: FileEntry) -> None:
        folder, _, base = name.rpartition("/")
        children = self._folder(folder)
        if children is None or base in children or not base:
            return  # clashes with a file of that name: the first one stays
        children[base] = entry
        self.files += 1
        self.bytes += entry.size

    def _folder(self, folder: str) -> dict[str, FileEntry | None] | None:
        if folder in self._dirs:
            return self._dirs[folder]
        parent, _, base = folder.rpartition("/")
        parent_children = self._folder(parent)
        if parent_children is None or not base or parent_children.get(base, None) is not None:
            return None
        parent_children[base] = None
        self._dirs[folder] = {}
        return self._dirs[folder]

    def lookup(self, path: str) -> FileEntry | None:
        """The file at ``path`` ("a/b", no leading "/"), or None for a folder.

        Raises:
            FileNotFoundError: nothing is at ``path``.
        """
        if path in self._dirs:
            return None
        folder, _, base = path.rpartition("/")
        entry = self._dirs.get(folder, {}).get(base)
        if entry is None:
            raise FileNotFoundError(errno.ENOENT, "no such file in the mounted dataset", path)
        return entry

    def listdir(self, path: str) -> list[str]:
        """The names in the folder ``path`` ("" for the top), in index order."""
        if path not in self._dirs:
            self.lookup(path)  # FileNotFoundError where nothing is
            raise NotADirectoryError(errno.ENOTDIR, "not a folder", path)
        return list(self._dirs[path])

    def read(self, path: str, offset: int, size: int) -> bytes:
        """Up to ``size`` bytes of the file ``path`` from ``offset``."""
        entry = self.lookup(path)
        if entry is None:
            raise IsADirectoryError(errno.EISDIR, "is a folder", path)
        size = max(0, min(size, entry.size - offset))
        if size == 0:
            return b""
        return self.store.read_range(entry.shard, entry.offset + offset, size)


class MountOperations:
    """The filesystem calls of a read-only mount of a :class:`DatasetTree` (FUSE's names)."""

    def __init__(self, tree: DatasetTree, mtime: float = 0.0) -> None:
        self.tree = tree
        self._stat = {"st_uid": os.getuid(), "st_gid": os.getgid(), "st_nlink": 1}
        self._stat.update(st_ctime=int(mtime), st_mtime=int(mtime), st_atime=int(mtime))

    def getattr(self, path: str, fh: Any = None) -> dict[str, int]:
        entry = self.tree.lookup(_relative(path))
        if entry is None:
            return {**self._stat, "st_mode": stat.S_IFDIR | 0o555, "st_nlink": 2, "st_size": 0}
        return {**self._stat, "st_mode": stat.S_IFREG | 0o444, "st_size": entry.size}

    def readdir(self, path: str, fh: Any = None) -> list[str]:
        return [".", "..", *self.tree.listdir(_relative(path))]

    def open(self, path: str, flags: int) -> int:
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_TRUNC | os.O_CREAT):
            raise OSError(errno.EROFS, "the mounted dataset is read-only", path)
        if self.tree.lookup(_relative(path)) is None:
            raise IsADirectoryError(errno.EISDIR, "is a folder", path)
        return 0

    def read(self, path: str, size: int, offset: int, fh: Any = None) -> bytes:
        return self.tree.read(_relative(path), offset, size)

    def release(self, path: str, fh: Any = None) -> int:
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        blocks = (self.tree.bytes + 511) // 512
        return {"f_bsize": 512, "f_frsize": 512, "f_blocks": blocks, "f_bfree": 0}


def _relative(path: str) -> str:
    return path.strip("/")
