"""Stored media metadata by member name, so task encoders can plan without decoding.

Records come from ``stoker prepare-media`` (or ``prepare --media-metadata-by-*``). Readers
open once per process and dataset (never shared across a fork).

Example:
    >>> meta = get_media_metadata("clips", "clip_007.mp4")  # prepared by prepare-media
    >>> meta.video_duration, meta.video_fps, meta.video_num_frames
    (10.0, 30.0, 300)

In a task encoder's ``encode_sample``, ``sample.get_media_metadata("mp4")`` reads the record of
the sample's own ``mp4`` part the same way.
"""

from __future__ import annotations

import os
from typing import Any

from stoker.errors import ConfigError, MissingSampleIndexError, SampleError
from stoker.format.media_metadata import MediaMetadataReader
from stoker.format.meta import INDEX_SQLITE
from stoker.media.metadata import MediaMetadata, deserialize_media_metadata
from stoker.storage import open_store

_READERS: dict[tuple[int, str], MediaMetadataReader] = {}
_HINT = "Run `stoker prepare-media PATH --media-metadata-by-extension` to store it."


def get_media_metadata(dataset_path: str, entry_key: str) -> MediaMetadata:
    """The metadata of the member ``entry_key`` (``key.part``) of the dataset at ``dataset_path``.

    Raises:
        ConfigError: the dataset has no media metadata at all.
        SampleError: this member has none (not media, or it could not be probed).
    """
    row = _reader(dataset_path).get(entry_key)
    if row is None:
        raise SampleError(
            f"no media metadata for {entry_key!r} in {dataset_path!r}.",
            hint="The file is not media under the filter used, or could not be probed; "
            "check the prepare-media report.",
        )
    return deserialize_media_metadata(*row)


def media_metadata_of(sample: Any, part: str) -> MediaMetadata:
    """The metadata of ``sample``'s part ``part`` (e.g. ``"mp4"``), found through its sources."""
    key = getattr(sample, "__key__", None)
    for source in getattr(sample, "__sources__", None) or ():
        for name in source.file_names:
            base = name.rpartition("/")[2]
            if name == f"{key}.{part}" or base.endswith(f".{part}"):
                return get_media_metadata(source.dataset_path, name)
    raise SampleError(
        f"the sample has no part {part!r} in its sources.",
        key=key,
        hint="Pass the part name as stored in the shard, e.g. 'mp4'.",
    )


def _reader(dataset_path: str) -> MediaMetadataReader:
    cache_key = (os.getpid(), dataset_path)
    reader = _READERS.get(cache_key)
    if reader is None:
        local = open_store(dataset_path).cached_local_path(INDEX_SQLITE)
        if local is None:
            raise MissingSampleIndexError.for_dataset(dataset_path, "media metadata lookups")
        reader = MediaMetadataReader(local)
        if not reader.has_table():
            reader.close()
            raise ConfigError("the dataset has no media metadata.", path=dataset_path, hint=_HINT)
        _READERS[cache_key] = reader
    return reader
