"""``pack``: turn a folder of loose files, or a JSONL file, into WebDataset tar shards.

Files are grouped into samples by Energon's rule (:func:`stoker.format.tar.split_name`): the key is
the relative path up to the first dot of the base name, the part is the rest. The shard cuts are
planned first from exact member sizes (a pure function of integers, :func:`plan_shards`), then each
shard is written under a temporary name and all are renamed into place only when every one
succeeded, so a failed or interrupted run leaves ``out`` as it was. Same input, same bytes.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import stat
import tarfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import BinaryIO

from tqdm import tqdm

from stoker.errors import ConfigError, FormatError, StorageError
from stoker.format.meta import META_DIR
from stoker.format.prepare import SHARD_SUFFIXES, TMP_MARK
from stoker.format.tar import SKIP_META_RE, split_name
from stoker.format.tar_index import tar_index_name

DEFAULT_SAMPLES_PER_SHARD = 1000
#: Minimum width of the zero-padded line-number keys of JSONL samples (``00000042``).
JSONL_KEY_WIDTH = 8
_ENCODING = "utf-8"
_END_OF_ARCHIVE = 2 * tarfile.BLOCKSIZE


@dataclass(frozen=True)
class SkippedFile:
    """A file (or hidden folder) of the source that is not in any sample, and why."""

    path: str
    reason: str


@dataclass
class PackReport:
    """What ``pack`` did, for the CLI to print (or ``--json``)."""

    out: str
    #: Shard file names, relative to ``out``, in order.
    shards: list[str]
    samples: int
    bytes: int
    seconds: float
    part_names: list[str] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Part:
    """One member to write: ``size`` bytes of the file ``path`` from ``offset``."""

    name: str
    path: str
    offset: int
    size: int


@dataclass(frozen=True, slots=True)
class Sample:
    """A sample key and its parts; its members are named ``<key>.<part>``."""

    key: str
    parts: tuple[Part, ...]


def _tar_info(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, 0, 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def sample_tar_bytes(sample: Sample) -> int:
    """Exact bytes the sample's members take in a tar (headers plus data padded to 512)."""
    total = 0
    for part in sample.parts:
        header = _tar_info(f"{sample.key}.{part.name}", part.size).tobuf(
            tarfile.PAX_FORMAT, _ENCODING
        )
        total += len(header) + _round_up(part.size, tarfile.BLOCKSIZE)
    return total


def shard_file_bytes(member_bytes: int) -> int:
    """Size of a tar holding ``member_bytes`` of members (end marker, padding to a record)."""
    return _round_up(member_bytes + _END_OF_ARCHIVE, tarfile.RECORDSIZE)


def _round_up(n: int, block: int) -> int:
    return -(-n // block) * block


def plan_shards(
    sizes: Sequence[int], samples_per_shard: int | None, max_shard_bytes: int | None
) -> list[int]:
    """The end index (exclusive) of each shard, for samples of the given tar sizes, in order.

    A shard closes when it holds ``samples_per_shard`` samples or when the next sample would make
    its file larger than ``max_shard_bytes``; a sample too large for any shard gets its own.

    Example:
        >>> plan_shards([1, 1, 1, 1, 1], 2, None)
        [2, 4, 5]
    """
    ends: list[int] = []
    count = used = 0
    for i, size in enumerate(sizes):
        full = samples_per_shard is not None and count >= samples_per_shard
        if not full and max_shard_bytes is not None and count > 0:
            full = shard_file_bytes(used + size) > max_shard_bytes
        if full:
            ends.append(i)
            count = used = 0
        count += 1
        used += size
    if count:
        ends.append(len(sizes))
    return ends


def _skip_reason(rel: str, name: str) -> str | None:
    if name.startswith("."):
        return "hidden file"
    if SKIP_META_RE.match(rel):
        return "reserved folder (__*__): readers ignore its members"
    split = split_name(rel)
    if split is None or not split[1]:
        return "no extension: the part name comes from the extension (e.g. 000001.jpg)"
    try:
        rel.encode(_ENCODING)
    except UnicodeEncodeError:
        return "the file name is not valid UTF-8"
    return None


def _walk(root: str, skipped: list[SkippedFile]) -> Iterator[tuple[str, str]]:
    """(relative path, absolute path) of every candidate file under ``root``, sorted."""
    for dirpath, dirnames, filenames in os.walk(root, onerror=_raise_walk_error):
        rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
        prefix = "" if rel_dir == "." else f"{rel_dir}/"
        keep = []
        for d in sorted(dirnames):
            if d.startswith("."):
                skipped.append(SkippedFile(f"{prefix}{d}/", "hidden folder"))
            elif os.path.islink(os.path.join(dirpath, d)):
                skipped.append(SkippedFile(f"{prefix}{d}/", "link to a folder: not followed"))
            else:
                keep.append(d)
        dirnames[:] = keep
        for name in sorted(filenames):
            yield f"{prefix}{name}", os.path.join(dirpath, name)


def _raise_walk_error(e: OSError) -> None:
    raise StorageError(f"cannot list the folder ({e.strerror or e}).", path=e.filename) from e


def _regular_file_size(path: str) -> int | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def _folder_samples(root: str) -> tuple[list[Sample], list[SkippedFile]]:
    skipped: list[SkippedFile] = []
    groups: dict[str, list[Part]] = {}
    for rel, full in _walk(root, skipped):
        reason = _skip_reason(rel, rel.rpartition("/")[2])
        size = _regular_file_size(full) if reason is None else None
        if size is None:
            skipped.append(SkippedFile(rel, reason or "not a regular file, or a broken link"))
            continue
        key, part = split_name(rel) or ("", "")
        groups.setdefault(key, []).append(Part(part, full, 0, size))
    samples = [Sample(k, tuple(sorted(groups[k], key=lambda p: p.name))) for k in sorted(groups)]
    return samples, skipped


def _jsonl_samples(path: str) -> list[Sample]:
    lines: list[tuple[int, int, int]] = []  # (line number, offset, size)
    offset = 0
    with open(path, "rb") as f:
        for number, line in enumerate(f, start=1):
            body = line.rstrip(b"\r\n")
            if body.strip():
                try:
                    json.loads(body)
                except ValueError as e:
                    raise FormatError(
                        f"line {number} is not valid JSON ({e}).",
                        path=path,
                        offset=offset,
                        hint="Fix or remove that line: each non-blank line must be one JSON value.",
                    ) from None
                lines.append((number, offset, len(body)))
            offset += len(line)
    width = max(JSONL_KEY_WIDTH, len(str(lines[-1][0]))) if lines else JSONL_KEY_WIDTH
    return [Sample(f"{n:0{width}d}", (Part("json", path, o, s),)) for n, o, s in lines]


def collect_samples(src: str) -> tuple[list[Sample], list[SkippedFile]]:
    """The samples of ``src`` (a folder or a ``.jsonl`` file) sorted by key, and skipped files.

    Raises:
        ConfigError: ``src`` is missing, of the wrong kind, or holds no samples.
        FormatError: a JSONL line is not valid JSON.
    """
    if os.path.isdir(src):
        samples, skipped = _folder_samples(src)
    elif os.path.isfile(src) and src.lower().endswith(".jsonl"):
        samples, skipped = _jsonl_samples(src), []
    elif os.path.exists(src):
        raise ConfigError(
            "the source is neither a folder nor a .jsonl file.",
            path=src,
            hint="Pass a folder of files (000001.jpg, 000001.txt, ...) or a .jsonl file.",
        )
    else:
        raise ConfigError("the source does not exist.", path=src, hint="Check the path.")
    if not samples:
        raise ConfigError(
            f"no samples found ({len(skipped)} file(s) skipped).",
            path=src,
            hint="Samples are files named <key>.<part> (e.g. 000001.jpg + 000001.txt), or "
            "non-blank lines of a .jsonl file; hidden files and files without an extension "
            "are skipped.",
        )
    return samples, skipped


class _Sources:
    """Opens source files for reading; keeps the last one open, since JSONL parts share a file."""

    def __init__(self) -> None:
        self._path = ""
        self._file: BinaryIO | None = None

    def at(self, part: Part) -> BinaryIO:
        if self._file is None or part.path != self._path:
            self.close()
            self._file = open(part.path, "rb")  # noqa: SIM115 - closed by close()
            self._path = part.path
        self._file.seek(part.offset)
        return self._file

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _write_shard(
    path: str, samples: Sequence[Sample], sources: _Sources, advance: Callable[[], object]
) -> None:
    """Write ``samples`` to the tar ``path`` (deterministic headers); ``advance`` per sample."""
    with (
        open(path, "wb") as f,
        tarfile.open(fileobj=f, mode="w", format=tarfile.PAX_FORMAT, encoding=_ENCODING) as tar,
    ):
        for sample in samples:
            for part in sample.parts:
                try:
                    tar.addfile(_tar_info(f"{sample.key}.{part.name}", part.size), sources.at(part))
                except OSError as e:
                    raise StorageError(
                        f"cannot pack this file ({e}).",
                        path=part.path,
                        key=sample.key,
                        hint="Check that it is readable and did not change while packing, and "
                        "that the output disk has space.",
                    ) from e
            advance()


class _Output:
    """Shards written into ``out`` under temporary names; published or discarded as a whole."""

    def __init__(self, out: str, prefix: str) -> None:
        self.out = out
        self.prefix = prefix
        self.created = not os.path.isdir(out)
        self.names: list[str] = []
        self._token = uuid.uuid4().hex[:12]
        os.makedirs(out, exist_ok=True)
        for name in os.listdir(out):  # left behind by a killed run
            if TMP_MARK in name and name.startswith(prefix):
                os.remove(os.path.join(out, name))

    def new_shard(self) -> str:
        """The temporary path of the next shard."""
        self.names.append(f"{self.prefix}{len(self.names):06d}.tar")
        return self._tmp(self.names[-1])

    def _tmp(self, name: str) -> str:
        return os.path.join(self.out, f"{name}{TMP_MARK}{self._token}")

    def discard(self) -> None:
        """Remove every temporary file (and ``out`` if this run created it)."""
        for name in self.names:
            if os.path.exists(self._tmp(name)):
                os.remove(self._tmp(name))
        if self.created:
            with contextlib.suppress(OSError):  # not empty: leave it
                os.rmdir(self.out)

    def publish(self, old: Sequence[str]) -> None:
        """Replace the old shards, their indexes and ``.nv-meta`` with the new shards."""
        meta = os.path.join(self.out, META_DIR)
        if os.path.isdir(meta):
            shutil.rmtree(meta)
        for name in old:
            index = os.path.join(self.out, tar_index_name(name))
            if os.path.exists(index):
                os.remove(index)
        for name in self.names:
            os.replace(self._tmp(name), os.path.join(self.out, name))
        for name in set(old) - set(self.names):
            os.remove(os.path.join(self.out, name))


def _existing_shards(out: str) -> list[str]:
    found = []
    for dirpath, dirnames, filenames in os.walk(out):
        dirnames[:] = [d for d in dirnames if d != META_DIR]
        rel = os.path.relpath(dirpath, out)
        for name in filenames:
            if name.endswith(SHARD_SUFFIXES) and TMP_MARK not in name:
                found.append(os.path.normpath(os.path.join(rel, name)))
    return sorted(found)


def _check_out(src: str, out: str, overwrite: bool) -> list[str]:
    """The shards already in ``out`` (to replace); raises unless ``out`` may be written."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise ConfigError(
            "the output exists and is not a folder.",
            path=out,
            hint="Pass a folder (it is created if missing).",
        )
    real_src, real_out = os.path.realpath(src), os.path.realpath(out)
    if os.path.isdir(src) and (real_out + os.sep).startswith(real_src + os.sep):
        raise ConfigError(
            "the output folder is the source folder or inside it.",
            path=out,
            hint="Choose an output folder outside the source, or the shards would become samples.",
        )
    old = _existing_shards(out) if os.path.isdir(out) else []
    has_meta = os.path.isdir(os.path.join(out, META_DIR))
    if (old or has_meta) and not overwrite:
        what = f"{len(old)} shard(s)" if old else f"a {META_DIR} folder"
        raise ConfigError(
            f"the output folder already holds {what}.",
            path=out,
            hint="Pass --force-overwrite (overwrite=True) to replace them, or choose another "
            "folder.",
        )
    return old


def _check_options(samples_per_shard: int | None, max_shard_bytes: int | None, prefix: str) -> None:
    for name, value in (
        ("samples_per_shard", samples_per_shard),
        ("max_shard_bytes", max_shard_bytes),
    ):
        if value is not None and value < 1:
            raise ConfigError(f"invalid {name}={value}: it must be at least 1.")
    if "/" in prefix or os.sep in prefix or prefix.startswith(".") or TMP_MARK in prefix:
        raise ConfigError(
            f"invalid shard_prefix={prefix!r}.",
            hint="Use a plain file-name prefix such as 'shard-' or 'train-' (no '/', no leading "
            "'.').",
        )


def _write_all(
    output: _Output, samples: Sequence[Sample], ends: Sequence[int], progress: bool
) -> None:
    sources = _Sources()
    bar = tqdm(total=len(samples), desc="Packing", unit="sample", disable=not progress)
    try:
        start = 0
        for end in ends:
            _write_shard(output.new_shard(), samples[start:end], sources, bar.update)
            start = end
    finally:
        sources.close()
        bar.close()


def pack(
    src: str,
    out: str,
    *,
    samples_per_shard: int | None = None,
    max_shard_bytes: int | None = None,
    shuffle: bool = False,
    seed: int = 0,
    shard_prefix: str = "shard-",
    progress: bool = False,
    overwrite: bool = False,
) -> PackReport:
    """Pack a folder of files or a ``.jsonl`` file into tar shards ``out/<prefix>000000.tar``, ...

    Without limits, shards hold 1000 samples. ``shuffle`` orders samples by ``seed``. Nothing in
    ``out`` changes unless every shard was written; ``overwrite`` replaces existing shards, their
    ``.tar.idx`` and ``.nv-meta`` (run ``prepare`` again afterwards).

    Example:
        >>> report = pack("/data/raw", "/data/shards", max_shard_bytes=10**9)  # doctest: +SKIP
        >>> report.shards[:2]  # doctest: +SKIP
        ['shard-000000.tar', 'shard-000001.tar']

    Raises:
        ConfigError: bad arguments, no samples, or ``out`` holds shards and not ``overwrite``.
        FormatError: a JSONL line is not valid JSON.
        StorageError: a source file could not be read.
    """
    start = time.perf_counter()
    if samples_per_shard is None and max_shard_bytes is None:
        samples_per_shard = DEFAULT_SAMPLES_PER_SHARD
    _check_options(samples_per_shard, max_shard_bytes, shard_prefix)
    old = _check_out(src, out, overwrite)
    samples, skipped = collect_samples(src)
    if shuffle:
        random.Random(seed).shuffle(samples)
    ends = plan_shards([sample_tar_bytes(s) for s in samples], samples_per_shard, max_shard_bytes)
    output = _Output(out, shard_prefix)
    try:
        _write_all(output, samples, ends, progress)
        output.publish(old)
    except BaseException:
        output.discard()
        raise
    return PackReport(
        out=out,
        shards=output.names,
        samples=len(samples),
        bytes=sum(os.path.getsize(os.path.join(out, name)) for name in output.names),
        seconds=time.perf_counter() - start,
        part_names=sorted({part.name for s in samples for part in s.parts}),
        skipped=skipped,
    )
