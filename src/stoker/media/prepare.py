"""``prepare-media``: probe every media file of a dataset's shards and store its metadata.

Shards are probed in parallel processes; the records go into a copy of ``index.sqlite`` that
replaces the original only when everything succeeded, so an interrupted run leaves the dataset
as it was. Files that cannot be probed (corrupt, unsupported) are listed in the report, not
stored. With ``stoker prepare --media-metadata-by-*`` the records go into the index being built.

Example:
    >>> from stoker.format.pack import pack
    >>> from stoker.format.prepare import prepare_dataset
    >>> _ = pack("clips", "clips-wds")
    >>> _ = prepare_dataset("clips-wds", split_ratio="1,0,0")
    >>> report = prepare_media("clips-wds", MediaFilter.parse(extension=True))
    >>> report.files
    1
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from functools import partial

from stoker.errors import ConfigError, MissingDependencyError
from stoker.format.media_metadata import MediaMetadataWriter, MediaRow
from stoker.format.meta import INDEX_SQLITE, is_prepared, read_info
from stoker.format.parallel import ordered_map
from stoker.format.pending import TMP_MARK, PendingPrepare
from stoker.format.prepare_work import PrepareWork
from stoker.format.progress import Progress
from stoker.format.tar import TarScan, split_name
from stoker.media.extract import HEADER_BYTES, MediaFilter, probe
from stoker.media.filesystem import prepare_folder_media
from stoker.media.media_report import MAX_FAILURES_LISTED as MAX_FAILURES_LISTED
from stoker.media.media_report import MediaReport
from stoker.media.metadata import serialize_media_metadata
from stoker.storage import Store, open_store


@dataclass
class ShardMedia:
    """The media records of one shard, and the files that could not be probed."""

    rows: list[MediaRow] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)


def scan_shard_media(store: Store, media: MediaFilter, shard: str) -> ShardMedia:
    """Probe the media members of ``shard``; reads only the members the filter may take."""
    out = ShardMedia()
    with store.open(shard) as f:

        def read_at(offset: int, size: int) -> bytes:
            f.seek(offset)
            return f.read(size)

        for member in TarScan(read_at, store.size(shard), store.url(shard)):
            if split_name(member.name) is None or not media.wants(member.name):
                continue
            kind = media.kind(
                member.name, read_at(member.data_offset, min(member.size, HEADER_BYTES))
            )
            if kind is None:
                continue
            try:
                meta = probe(kind, read_at(member.data_offset, member.size))
            except MissingDependencyError:
                raise  # a missing backend fails the run: it is no file's fault
            except Exception as e:  # any unreadable file is reported, not fatal
                out.failed.append((f"{shard}/{member.name}", f"{type(e).__name__}: {e}"))
                continue
            out.rows.append((member.name, *serialize_media_metadata(meta)))
    return out


def scan_media_resumable(work: PrepareWork, media: MediaFilter, shard: str) -> ShardMedia:
    """:func:`scan_shard_media`, kept in the prepare work folder: loaded from there when the
    shard is unchanged since an earlier (interrupted) run probed it."""
    chosen = f"{media.strategy}\0{','.join(media.patterns)}".encode()
    kind = f"media-{hashlib.sha256(chosen).hexdigest()[:16]}"  # a folder name, per filter
    fingerprint = work.fingerprint(shard)
    stored = work.load_json(shard, kind, fingerprint)
    if stored is not None:
        return ShardMedia(
            rows=[(str(a), str(b), str(c)) for a, b, c in stored["rows"]],
            failed=[(str(a), str(b)) for a, b in stored["failed"]],
        )
    out = scan_shard_media(work.store, media, shard)
    work.save_json(shard, kind, fingerprint, {"rows": out.rows, "failed": out.failed})
    return out


def write_media(
    db_path: str,
    store: Store,
    shards: list[str],
    media: MediaFilter,
    num_workers: int | None = None,
    progress: bool = False,
    work: PrepareWork | None = None,
) -> MediaReport:
    """Probe ``shards`` and (re)write the media tables of the index file ``db_path``; with
    ``work``, each shard's records are kept there (and reused) as the shard is done."""
    report = MediaReport(path=store.root, strategy=media.strategy, shards=len(shards))
    start = time.perf_counter()
    writer = MediaMetadataWriter(db_path)
    scan = (
        partial(scan_shard_media, store, media)
        if work is None
        else partial(scan_media_resumable, work, media)
    )
    try:
        with Progress(len(shards), "Probing media of shards", enabled=progress) as bar:
            for shard in ordered_map(scan, shards, num_workers, len(shards)):
                writer.add(shard.rows)
                report.files += len(shard.rows)
                report.failed += len(shard.failed)
                room = MAX_FAILURES_LISTED - len(report.failures)
                report.failures += shard.failed[: max(room, 0)]
                bar.update()
        writer.commit(strategy=media.strategy, patterns=",".join(media.patterns))
    except BaseException:
        writer.abort()
        raise
    report.seconds = time.perf_counter() - start
    return report


def prepare_media(
    path: str, media: MediaFilter, *, num_workers: int | None = None, progress: bool = False
) -> MediaReport:
    """Add media metadata to the prepared dataset at ``path``, replacing any earlier records.

    A folder that is not a prepared dataset (no ``.nv-meta/.info.json``) is taken as a plain
    folder of files, as Energon does: see :mod:`stoker.media.filesystem`.
    """
    if path.endswith((".jsonl", ".yaml", ".yml")):
        raise ConfigError(
            "prepare-media takes a prepared dataset of tar shards or a folder of media files.",
            path=path,
            hint="JSONL files and metadatasets keep no media metadata.",
        )
    store = open_store(path)
    if not is_prepared(store):
        return prepare_folder_media(path, media, num_workers=num_workers, progress=progress)
    shards = list(read_info(store).shard_counts)
    source = store.cached_local_path(INDEX_SQLITE)
    if source is None:
        raise ConfigError(
            "the dataset has no index.sqlite.",
            path=path,
            hint="Run `stoker prepare PATH --tar-index-only` first.",
        )
    tmp = f"{INDEX_SQLITE}{TMP_MARK}{uuid.uuid4().hex[:12]}"
    local = store.local_path(tmp) or _local_tmp()
    try:
        shutil.copyfile(source, local)
        report = write_media(local, store, shards, media, num_workers, progress)
        if store.local_path(tmp) is None:  # remote: upload the new index, then swap it in
            with open(local, "rb") as f:
                store.write_bytes(tmp, f.read())
        store.publish(tmp, INDEX_SQLITE)
    finally:
        for leftover in (local, tmp):
            _remove(store, leftover)
    return report


def prepare_filesystem_dataset(
    root_path: object,
    media_filter: MediaFilter,
    *,
    progress: bool,
    workers: int = 16,
    index_sqlite_tmp_path: object = None,
) -> int:
    """Energon's call: store the media metadata of a plain folder; returns the files stored.

    ``root_path`` is a path, ``EPath`` or URL; ``index_sqlite_tmp_path`` is accepted for
    Energon compatibility (stoker builds the index in a temporary file of its own).

    Example:
        >>> media = MediaFilter.parse(extension=True)
        >>> prepare_filesystem_dataset("clips", media, progress=False)
        1
    """
    report = prepare_folder_media(
        str(root_path), media_filter, num_workers=workers, progress=progress
    )
    return report.files


def media_into_pending(
    pending: PendingPrepare,
    media: MediaFilter,
    num_workers: int | None = None,
    progress: bool = False,
) -> MediaReport:
    """Store media metadata in the index that ``stoker prepare`` is building (not yet published)."""
    return write_media(
        pending.index_db_path(),
        pending.store,
        pending.shards,
        media,
        num_workers,
        progress,
        work=pending.work,
    )


def _local_tmp() -> str:
    fd, path = tempfile.mkstemp(prefix="stoker-media-", suffix=".sqlite")
    os.close(fd)
    return path


def _remove(store: Store, path: str) -> None:
    if os.path.isabs(path):
        if os.path.exists(path):
            os.remove(path)
    elif store.exists(path):
        store.remove(path)
