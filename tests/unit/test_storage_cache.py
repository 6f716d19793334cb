"""The metadata cache: versions, the window in which a checked version is trusted, eviction."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from stoker.errors import ConfigError
from stoker.storage.cache import MetaCache, default_cache
from stoker.storage.options import LoaderOptions, activate

URL = "s3://bucket/ds/shard_0.tar.idx"


def test_a_version_checked_moments_ago_is_served_without_asking(tmp_path: Path) -> None:
    cache = MetaCache(str(tmp_path), fresh_seconds=60)
    assert cache.fresh(URL) is None and cache.latest(URL) is None
    cache.put_bytes(URL, '"etag-1"', b"offsets-1")
    cache.confirm(URL, '"etag-1"')
    assert cache.fresh(URL) == b"offsets-1"
    cache.put_bytes(URL, '"etag-2"', b"offsets-2")
    cache.confirm(URL, '"etag-2"')  # the store has a new version now
    assert cache.fresh(URL) == b"offsets-2"
    latest = cache.latest(URL)
    assert latest is not None and latest[0] == '"etag-2"' and latest[1] < 60


def test_an_old_check_or_a_lost_entry_means_asking_again(tmp_path: Path) -> None:
    cache = MetaCache(str(tmp_path), fresh_seconds=5)
    path = cache.put_bytes(URL, "v1", b"data")
    cache.confirm(URL, "v1")
    pointer = cache.entry(URL, "latest")
    old = time.time() - 10
    os.utime(pointer, (old, old))
    assert cache.fresh(URL) is None  # checked 10 s ago: too long
    cache.confirm(URL, "v1")  # checked again: the same version
    assert cache.fresh(URL) == b"data"
    os.remove(path)  # evicted
    assert cache.fresh(URL) is None
    assert MetaCache(str(tmp_path), fresh_seconds=0).fresh(URL) is None


def test_the_environment_configures_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STOKER_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("STOKER_CACHE_FRESH_SECONDS", "2.5")
    monkeypatch.setenv("STOKER_CACHE_MAX_BYTES", "1000")
    assert default_cache() == MetaCache(str(tmp_path), 1000, 2.5)
    monkeypatch.setenv("STOKER_CACHE_FRESH_SECONDS", "soon")
    with pytest.raises(ConfigError, match=r"STOKER_CACHE_FRESH_SECONDS='soon' is not a number"):
        default_cache()
    monkeypatch.setenv("STOKER_CACHE_FRESH_SECONDS", "2.5")
    monkeypatch.setenv("STOKER_CACHE_DIR", "off")
    assert default_cache() is None


def test_the_active_options_configure_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STOKER_CACHE_DIR", "off")
    options = LoaderOptions(cache_dir=str(tmp_path), cache_max_bytes=10, cache_fresh_seconds=1)
    previous = activate(options)  # as a loader's worker does
    try:
        assert default_cache() == MetaCache(str(tmp_path), 10, 1.0)
    finally:
        activate(previous)
    assert default_cache() is None  # the environment's default again
