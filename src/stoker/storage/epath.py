"""``EPath``: Energon's path class, over stoker's stores.

Local paths (relative ones are made absolute) and ``msc://profile/path`` URLs behave alike:
join with ``/``, read, write, list, glob. Any other URL stoker's storage reaches (``s3://``,
``gs://``, ...) works too. An ``EPath`` is a value: hashable, comparable, and picklable without
credentials (the profile is resolved again where it is used). ``rclone://`` is Energon's
deprecated spelling of ``msc://``; ``dss://name@version/path`` lies under ``NVDATASET_CACHE_DIR``.

Example:
    >>> p = EPath("/data/coco") / "parts" / ".." / "train-0.tar"
    >>> str(p), p.name, str(p.parent), p.with_suffix(".idx").name
    ('/data/coco/train-0.tar', 'train-0.tar', '/data/coco', 'train-0.idx')
    >>> EPath("msc://lake/coco/a.tar").relative_to(EPath("msc://lake/coco"))
    'a.tar'
"""

from __future__ import annotations

import io
import os
import re
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import IO, Any, BinaryIO, Literal, TextIO, overload

from stoker.storage import open_store
from stoker.storage.base import Store
from stoker.storage.epath_ops import PathStat, glob_files, local_glob, local_stat, remote_stat
from stoker.storage.msc import DEFAULT_PROFILE_NAME, resolve_profile

__all__ = ["DEFAULT_PROFILE_NAME", "EPath"]

_URL = re.compile(r"^(?P<protocol>[a-z][a-z0-9+.-]*)://(?P<profile>[^/]*)(?:/(?P<path>.*))?$")
_DSS = "dss"


class EPath:
    """A local path or an object-store URL, with the part of ``pathlib.Path`` datasets need.

    Args:
        initial_path: A path (``str`` or ``pathlib.Path``; relative to the working directory),
            a URL (``msc://profile/...``, ``file://...``, ``s3://bucket/...``), or an ``EPath``.
    """

    __slots__ = ("internal_path", "profile")

    #: The absolute path inside the profile (or protocol); never has ``.`` or ``..`` parts.
    internal_path: PurePosixPath
    #: The MSC profile (:data:`DEFAULT_PROFILE_NAME` for local paths), ``dss``, or ``s3://``-style.
    profile: str

    def __init__(self, initial_path: str | EPath | os.PathLike[str]) -> None:
        if isinstance(initial_path, EPath):
            self.internal_path, self.profile = initial_path.internal_path, initial_path.profile
            return
        if isinstance(initial_path, os.PathLike):
            initial_path = os.fspath(initial_path)
        if not isinstance(initial_path, str):
            raise TypeError(f"EPath takes a str, a pathlib.Path or an EPath, not {initial_path!r}.")
        match = _URL.match(initial_path)
        if match is None:
            self.profile = DEFAULT_PROFILE_NAME
            self.internal_path = _resolve(os.path.abspath(initial_path))  # "" is the cwd
            return
        protocol, profile, rest = match["protocol"], match["profile"], match["path"] or ""
        if protocol == "file":
            self.profile = DEFAULT_PROFILE_NAME
            self.internal_path = _resolve(os.path.abspath(f"{profile}/{rest}"))
            return
        if protocol == "rclone":
            warnings.warn(
                "rclone:// protocol is deprecated. Use msc:// instead.",
                DeprecationWarning,
                stacklevel=2,
            )
            protocol = "msc"
        if protocol == _DSS:
            _split_dss(profile)
            self.profile, self.internal_path = _DSS, _resolve(f"/{profile}/{rest}")
        elif protocol == "msc":
            if not profile:
                raise ValueError(f"{initial_path!r} names no profile: use msc://PROFILE/path.")
            self.profile, self.internal_path = profile, _resolve("/" + rest)
        else:  # any other protocol stoker's storage reaches: the host/bucket is part of the path
            self.profile, self.internal_path = f"{protocol}://", _resolve(f"/{profile}/{rest}")

    # -- value behaviour --------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        return {"internal_path": self.internal_path, "profile": self.profile}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.internal_path, self.profile = state["internal_path"], state["profile"]

    def _with(self, internal_path: PurePosixPath) -> EPath:
        new = EPath.__new__(EPath)
        new.internal_path, new.profile = internal_path, self.profile
        return new

    def __truediv__(self, other: str | EPath | os.PathLike[str]) -> EPath:
        if isinstance(other, EPath):
            return other
        other = os.fspath(other)
        if other.startswith("/") or "://" in other:
            return EPath(other)
        return self._with(_resolve(self.internal_path / other))

    def __lt__(self, other: EPath) -> bool:
        if self.profile != other.profile:
            raise ValueError(f"cannot order {self} and {other}: they use different profiles.")
        return self.internal_path < other.internal_path

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, EPath)
            and self.internal_path == other.internal_path
            and self.profile == other.profile
        )

    def __hash__(self) -> int:
        return hash((self.internal_path, self.profile))

    def __str__(self) -> str:
        return self.url

    def __repr__(self) -> str:
        return f"EPath({self.url!r})"

    # -- names ------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """The path as a string: a local path, ``msc://profile/...``, ``dss://...``, ``s3://...``."""
        if self.profile == DEFAULT_PROFILE_NAME:
            return str(self.internal_path)
        if self.profile == _DSS:
            return f"dss://{str(self.internal_path)[1:]}"
        if self.profile.endswith("://"):
            return self.profile + str(self.internal_path)[1:]
        return f"msc://{self.profile}{self.internal_path}"

    @property
    def name(self) -> str:
        return self.internal_path.name

    @property
    def suffix(self) -> str:
        return self.internal_path.suffix

    @property
    def stem(self) -> str:
        return self.internal_path.stem

    @property
    def parent(self) -> EPath:
        return self._with(self.internal_path.parent)

    @property
    def display_name(self) -> str:
        """A short name for logs: the dataset (``name@version``) for DSS paths, else the name."""
        if self.profile == _DSS and len(self.internal_path.parts) > 1:
            return self.internal_path.parts[1]
        return self.name

    def with_suffix(self, suffix: str) -> EPath:
        return self._with(self.internal_path.with_suffix(suffix))

    def relative_to(self, other: EPath) -> str:
        """This path relative to ``other`` (same profile), as a ``/``-separated string."""
        if self.profile != other.profile:
            raise ValueError(f"{self} is not under {other}: they use different profiles.")
        return str(self.internal_path.relative_to(other.internal_path))

    # -- where the bytes are ----------------------------------------------------------------
    def _local(self) -> str | None:
        """The local filesystem path, or None for a remote path."""
        if self.profile == DEFAULT_PROFILE_NAME:
            return str(self.internal_path)
        if self.profile == _DSS:
            return _dss_local(self.internal_path)
        if self.profile.endswith("://"):
            return None
        profile = resolve_profile(self.profile)
        if profile.kind != "file":
            return None
        return os.path.join(profile.base_path, str(self.internal_path).lstrip("/"))

    def _store(self) -> Store:
        """A store rooted at this path (files are read as its path ``""``)."""
        return open_store(self.url)

    def is_local(self) -> bool:
        return self._local() is not None

    def local_path(self) -> Path:
        """The local ``pathlib.Path``; ValueError for a remote path."""
        local = self._local()
        if local is None:
            raise ValueError(f"Path {self} is not local.")
        return Path(local)

    def is_file(self) -> bool:
        local = self._local()
        return os.path.isfile(local) if local is not None else self._store().exists("")

    def is_dir(self) -> bool:
        local = self._local()
        if local is not None:
            return os.path.isdir(local)
        try:
            return self._store().is_dir("")
        except Exception:  # a missing bucket is no folder
            return False

    def exists(self) -> bool:
        return self.is_file() or self.is_dir()

    def size(self) -> int:
        local = self._local()
        return os.path.getsize(local) if local is not None else self._store().size("")

    def stat(self) -> PathStat:
        """Size, modification time and kind (``content_length``, ``last_modified``, ``type``)."""
        local = self._local()
        return local_stat(local) if local is not None else remote_stat(self._store(), self.url)

    def mkdir(self, exist_ok: bool = True, parents: bool = False) -> None:
        """Create the folder (local paths; object stores have no folders)."""
        local = self._local()
        if local is None:
            return
        if parents:
            os.makedirs(local, exist_ok=exist_ok)
        elif not (exist_ok and os.path.isdir(local)):
            os.mkdir(local)

    # -- reading and writing ----------------------------------------------------------------
    @overload
    def open(
        self,
        mode: Literal["r", "w"] = "r",
        block_size: int | None = None,
        prefetch_file: bool = False,
    ) -> TextIO: ...

    @overload
    def open(
        self,
        mode: Literal["rb", "wb"],
        block_size: int | None = None,
        prefetch_file: bool = False,
    ) -> BinaryIO: ...

    def open(
        self,
        mode: Literal["r", "rb", "w", "wb"] = "r",
        block_size: int | None = None,
        prefetch_file: bool = False,
    ) -> IO[Any]:
        """Open for reading or writing (``r``, ``rb``, ``w``, ``wb``); writing creates parents."""
        if mode not in ("r", "rb", "w", "wb"):
            raise ValueError(f"EPath.open: mode must be r, rb, w or wb, not {mode!r}.")
        local = self._local()
        if local is not None:
            if mode[0] == "w":
                os.makedirs(os.path.dirname(local), exist_ok=True)
            return open(local, mode, encoding=None if "b" in mode else "utf-8")
        binary: BinaryIO
        if mode[0] == "w":
            binary = _Upload(self._store())
        elif prefetch_file:
            binary = io.BytesIO(self._store().read_bytes(""))
        else:
            binary = self._store().open("")
        return binary if "b" in mode else io.TextIOWrapper(binary, encoding="utf-8")

    def read_bytes(self) -> bytes:
        with self.open("rb", prefetch_file=True) as f:
            return f.read()

    def read_text(self) -> str:
        return self.read_bytes().decode("utf-8")

    def write_bytes(self, data: bytes) -> None:
        with self.open("wb") as f:
            f.write(data)

    def write_text(self, text: str) -> None:
        self.write_bytes(text.encode("utf-8"))

    def unlink(self) -> None:
        local = self._local()
        if local is not None:
            os.remove(local)
        else:
            self._store().remove("")

    def copy(self, target: EPath) -> None:
        """Copy this file (or every file under this folder) to ``target``, across stores."""
        if not self.is_file():
            for path in self.walk():
                path.copy(target / path.relative_to(self))
            return
        mine, theirs = self._local(), target._local()
        if mine is not None and theirs is not None:
            os.makedirs(os.path.dirname(theirs), exist_ok=True)
            shutil.copyfile(mine, theirs)
        else:
            target.write_bytes(self.read_bytes())

    def move(self, target: EPath) -> None:
        mine, theirs = self._local(), target._local()
        if mine is not None and theirs is not None:
            os.makedirs(os.path.dirname(theirs), exist_ok=True)
            shutil.move(mine, theirs)
            return
        self.copy(target)
        self.unlink()

    # -- listing ----------------------------------------------------------------------------
    def walk(self) -> Iterator[EPath]:
        """Every file under this folder, recursively (local symlinks followed)."""
        return self.glob("**/*")

    def glob(self, pattern: str) -> Iterator[EPath]:
        """The files under this folder matching ``pattern`` (``*``, ``?``, ``[..]``, ``**``)."""
        local = self._local()
        parts = [p for p in PurePosixPath(pattern).parts if p not in ("", ".")]
        if local is not None:
            names = local_glob(local, parts)
        else:
            store = self._store()
            names = glob_files(store.list_files(""), parts)
        for name in names:
            yield self._with(_resolve(self.internal_path / name))


def _resolve(path: str | PurePosixPath) -> PurePosixPath:
    """``path`` without ``.`` and ``..`` parts; ValueError if it climbs above the root."""
    path = PurePosixPath(path)
    if not path.parts or path.parts[0] != "/":
        raise ValueError(f"only absolute paths are supported, not {str(path)!r}.")
    parts: list[str] = []
    for part in path.parts[1:]:
        if part == "..":
            if not parts:
                raise ValueError(f"Path above root: {path}")
            parts.pop()
        elif part != ".":
            parts.append(part)
    return PurePosixPath("/", *parts)


def _split_dss(dataset: str) -> tuple[str, str]:
    name, at, version = dataset.rpartition("@")
    if not at or not name or not version:
        raise _DssError(
            f"DSS paths must include a dataset version separated by '@' (got {dataset!r})."
        )
    return name, version


def _dss_local(internal_path: PurePosixPath) -> str:
    cache = os.environ.get("NVDATASET_CACHE_DIR") or NVDATASET_CACHE_DIR
    if cache is None:
        raise ValueError("dss:// paths need the environment variable NVDATASET_CACHE_DIR.")
    if len(internal_path.parts) < 2:
        return str(EPath(cache).local_path())
    name, version = _split_dss(internal_path.parts[1])
    return os.path.join(str(EPath(cache).local_path()), name, version, *internal_path.parts[2:])


class _DssError(ValueError, AssertionError):
    """A malformed ``dss://`` path (an AssertionError too, as Energon raises one)."""


class _Upload(io.BytesIO):
    """Bytes written to an object, stored when the file is closed."""

    def __init__(self, store: Store) -> None:
        super().__init__()
        self._target: Store | None = store

    def close(self) -> None:
        if self._target is not None and not self.closed:
            target, self._target = self._target, None
            target.write_bytes("", self.getvalue())
        super().close()


#: Energon's module-level DSS cache folder, read at import; the environment variable, read at
#: each use, wins (so that a changed variable counts, as Energon's tests expect).
NVDATASET_CACHE_DIR: EPath | None = (
    EPath(os.environ["NVDATASET_CACHE_DIR"]) if "NVDATASET_CACHE_DIR" in os.environ else None
)
