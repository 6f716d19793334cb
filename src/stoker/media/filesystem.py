"""``prepare-media`` for a plain folder of files (a ``filesystem://`` aux source).

As Energon's ``prepare-media`` does for such a folder, the metadata of every media file goes
into ``FOLDER/.nv-meta/index.sqlite`` (media tables only, Energon's schema), keyed by the file's
path relative to the folder (``clips/a.mp4``). Aux stores over the folder answer
``get_media_metadata(name)`` from it, and Energon reads the same file. The index is built under
a temporary name and swapped in at the end, so an interrupted run changes nothing.

Example:
    >>> media = MediaFilter.parse(extension=True)
    >>> report = prepare_folder_media("clips", media)
    >>> report.files
    1
"""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from functools import partial

from stoker.errors import ConfigError, MissingDependencyError
from stoker.format.media_metadata import MediaMetadataWriter
from stoker.format.meta import INDEX_SQLITE, META_DIR
from stoker.format.parallel import ordered_map
from stoker.format.pending import TMP_MARK
from stoker.format.progress import Progress
from stoker.media.extract import HEADER_BYTES, MediaFilter, probe
from stoker.media.media_report import MAX_FAILURES_LISTED, MediaReport
from stoker.media.metadata import serialize_media_metadata
from stoker.storage import Store, open_store


def media_files(store: Store, media: MediaFilter) -> list[str]:
    """The folder's files the filter may take (by base name), outside ``.nv-meta``, sorted."""
    return [
        name
        for name in store.list_files("")
        if not (name + "/").startswith(META_DIR + "/")
        and f"/{META_DIR}/" not in f"/{name}"
        and media.wants(name.rpartition("/")[2])
    ]


def probe_file(store: Store, media: MediaFilter, name: str) -> tuple[str, str, str] | str | None:
    """``(name, type, json)`` of a media file, None if not media, or why it failed (a str)."""
    with store.open(name) as f:
        head = f.read(HEADER_BYTES)
        kind = media.kind(name.rpartition("/")[2], head)
        if kind is None:
            return None
        data = head + f.read()
    try:
        return (name, *serialize_media_metadata(probe(kind, data)))
    except MissingDependencyError:
        raise  # a missing backend fails the run: it is no file's fault
    except Exception as e:  # an unreadable file is reported, not fatal
        return f"{type(e).__name__}: {e}"


def prepare_folder_media(
    path: str, media: MediaFilter, *, num_workers: int | None = None, progress: bool = False
) -> MediaReport:
    """Probe every media file under the folder ``path``; write ``.nv-meta/index.sqlite``."""
    store = open_store(path)
    if not store.is_dir(""):
        raise ConfigError("no such folder.", path=path, hint="Pass a folder of media files.")
    names = media_files(store, media)
    if not names and any(n.endswith((".tar", ".tgz")) for n in store.list_files("")):
        raise ConfigError(
            "the dataset is not prepared, and the folder holds no media files of its own.",
            path=path,
            hint=f"Prepare the shards first (`stoker prepare {path} "
            "--media-metadata-by-extension ...` does both in one go).",
        )
    if not names:
        raise ConfigError(
            "no media files found to process.",
            path=path,
            hint="Check the folder, or choose another --media-metadata-by-* filter.",
        )
    report = MediaReport(path=store.root, strategy=media.strategy, shards=0)
    start = time.perf_counter()
    tmp = f"{INDEX_SQLITE}{TMP_MARK}{uuid.uuid4().hex[:12]}"
    local = store.local_path(tmp)
    if local is not None:
        os.makedirs(os.path.dirname(local), exist_ok=True)
    else:
        fd, local = tempfile.mkstemp(prefix="stoker-media-", suffix=".sqlite")
        os.close(fd)
    writer = MediaMetadataWriter(local)
    try:
        probes = ordered_map(partial(probe_file, store, media), names, num_workers, len(names))
        with Progress(len(names), "Probing media", unit="file", enabled=progress) as bar:
            for name, result in zip(names, probes, strict=True):
                if isinstance(result, tuple):
                    writer.add([result])
                    report.files += 1
                elif isinstance(result, str):
                    report.failed += 1
                    if len(report.failures) < MAX_FAILURES_LISTED:
                        report.failures.append((name, result))
                bar.update()
        writer.commit(strategy=media.strategy, patterns=",".join(media.patterns))
        if store.local_path(tmp) is None:
            with open(local, "rb") as f:
                store.write_bytes(tmp, f.read())
        store.publish(tmp, INDEX_SQLITE)
    except BaseException:
        writer.abort()
        raise
    finally:
        for leftover in {local, tmp}:
            if os.path.isabs(leftover):
                if os.path.exists(leftover):
                    os.remove(leftover)
            elif store.exists(leftover):
                store.remove(leftover)
    report.seconds = time.perf_counter() - start
    return report
