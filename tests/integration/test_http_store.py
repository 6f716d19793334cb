"""Prepared datasets served over plain HTTP (fsspec's HTTPFileSystem), against a real server.

The server (:mod:`tests.httpserver`) runs as its own process on 127.0.0.1, answers Range
requests and lists no folders: a prepared dataset loads from it because ``.nv-meta`` names the
shards. Workers fork and make their own HTTP sessions; a server that dies mid-read is retried,
or reported as one clear error within the retry budget.
"""

from __future__ import annotations

import collections
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stoker import get_loader
from stoker.errors import StorageError
from stoker.storage import open_store
from tests.httpserver import RangeServer
from tests.integration._remote import (
    epoch_keys,
    make_shards,
    prepare_local,
    stoker_cli,
    train_dataset,
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, RangeServer]]:
    """A folder with a prepared dataset ``coco`` and unprepared shards ``raw``, served."""
    root = tmp_path_factory.mktemp("www")
    prepare_local(root, "coco", shards=4, per_shard=30)
    prepare_local(root, "big", shards=5, per_shard=120)
    make_shards(root, "raw", shards=2, per_shard=5)
    server = RangeServer(str(root))
    try:
        yield root, server.start()
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def http_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A private metadata cache; the default retry budget."""
    monkeypatch.delenv("STOKER_STORAGE_CONFIG", raising=False)
    monkeypatch.setenv("STOKER_CACHE_DIR", str(tmp_path / "cache"))


def retry_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **retry: float) -> None:
    text = "retry:\n" + "".join(f"  {k}: {v}\n" for k, v in retry.items())
    (tmp_path / "storage.yaml").write_text(text)
    monkeypatch.setenv("STOKER_STORAGE_CONFIG", str(tmp_path / "storage.yaml"))


@pytest.mark.parametrize("workers", [0, 2])
def test_http_dataset_loads_the_samples_it_has_on_local_disk(
    served: tuple[Path, RangeServer], workers: int
) -> None:
    root, server = served
    url = f"{server.url}/coco"
    for split in ("train", "val"):
        on_disk = epoch_keys(str(root / "coco"), workers, split)
        remote = epoch_keys(url, workers, split)
        assert remote == on_disk  # same samples, same order: the plan does not see the store
        assert len(set(remote)) == len(remote) == (90 if split == "train" else 30)
    paths = {path for _, path, _ in server.log()}
    assert "/coco/train_1.tar" in paths  # the shards were read over HTTP
    folders = [p for p in paths if (root / p.lstrip("/")).is_dir() or p.endswith("/")]
    assert folders == []  # nothing asked the server to list a folder


def test_stoker_info_and_preview_on_an_http_url(served: tuple[Path, RangeServer]) -> None:
    url = f"{served[1].url}/coco"
    info = stoker_cli("info", url)
    assert info.returncode == 0, info.stderr
    assert "120" in info.stdout  # 4 shards of 30 samples
    preview = stoker_cli("preview", url, "--split-part", "val", "-n", "3", "--json")
    assert preview.returncode == 0, preview.stderr
    assert [s["key"] for s in json.loads(preview.stdout)["samples"]] == [
        f"coco_0_{i:04d}" for i in range(3)
    ]


def test_prepare_on_an_http_url_is_a_clear_read_only_error(
    served: tuple[Path, RangeServer],
) -> None:
    url = f"{served[1].url}/raw"
    result = stoker_cli(
        "prepare", url, "--non-interactive", "--split-parts", "train:train_",
        "--sample-type", "TextSample", "--field-map", '{"text": "txt"}', "--no-progress",
    )  # fmt: skip
    assert result.returncode != 0
    message = " ".join((result.stdout + result.stderr).split())
    assert url in message and "no listing" in message and "Traceback" not in message
    assert not (served[0] / "raw" / ".nv-meta").exists()


def test_metadata_files_are_cached_by_version(
    served: tuple[Path, RangeServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(f"{served[1].url}/coco")
    first = store.read_bytes("train_1.tar.idx")
    assert first == (served[0] / "coco" / "train_1.tar.idx").read_bytes()
    before = len(served[1].log())
    assert store.read_bytes("train_1.tar.idx") == first
    assert served[1].log()[before:] == []  # checked moments ago: trusted without a request
    monkeypatch.setenv("STOKER_CACHE_FRESH_SECONDS", "0")
    assert store.read_bytes("train_1.tar.idx") == first
    assert [m for m, _, _ in served[1].log()[before:]] == ["HEAD"]  # the body came from disk


def test_response_cut_mid_body_is_retried(served: tuple[Path, RangeServer]) -> None:
    root, server = served
    expected = (root / "big" / "train_1.tar").read_bytes()[1000:201_000]
    server.cut(count=2, after=50_000)  # the next two bodies stop after 50 kB, then close
    before = len(server.log())
    data = open_store(f"{server.url}/big").read_range("train_1.tar", 1000, 200_000)
    assert data == expected
    gets = [r for m, p, r in server.log()[before:] if m == "GET" and p == "/big/train_1.tar"]
    assert gets == ["bytes=1000-200999"] * 3  # two cut short, the third whole


def test_a_server_that_ignores_ranges_is_a_clear_error(served: tuple[Path, RangeServer]) -> None:
    server = served[1]
    server.ranges(on=False)
    try:
        with pytest.raises(StorageError, match=r"big/train_1.tar: .*ignores ranged reads"):
            open_store(f"{server.url}/big").read_range("train_1.tar", 1000, 100)
    finally:
        server.ranges(on=True)


def test_server_killed_mid_epoch_and_restarted_completes_the_epoch(
    served: tuple[Path, RangeServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = served[1]
    monkeypatch.setenv("STOKER_PREFETCH_BYTES", "0")  # every sample read when needed
    retry_budget(tmp_path, monkeypatch, max_attempts=100, max_seconds=30, base_delay=0.05,
                 max_delay=0.5)  # fmt: skip
    dataset = train_dataset(f"{server.url}/big", 2)
    restart = threading.Timer(1.0, server.start)
    seen: list[str] = []
    try:
        with get_loader(dataset) as loader:
            for step, batch in enumerate(loader):
                seen += batch.__key__
                if step == 5:
                    server.kill9()
                    restart.start()
    finally:
        restart.join(30)
    assert restart.finished.is_set()
    assert any(p.startswith("/big/train_") for _, p, _ in server.log())  # read after restart
    counts = collections.Counter(seen)
    assert set(counts) == {f"big_{s}_{i:04d}" for s in range(1, 5) for i in range(120)}
    assert set(counts.values()) == {1}


def test_server_gone_for_good_is_a_clear_error_within_the_budget(
    served: tuple[Path, RangeServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, server = served
    monkeypatch.setenv("STOKER_PREFETCH_BYTES", "0")  # every sample read when needed
    retry_budget(tmp_path, monkeypatch, max_attempts=4, max_seconds=60, base_delay=0.05,
                 max_delay=0.2)  # fmt: skip
    dataset = train_dataset(f"{server.url}/big", 2)
    killed_at: list[float] = []

    def read_epoch() -> None:
        with get_loader(dataset) as loader:
            for step, _ in enumerate(loader):
                if step == 3:
                    server.kill9()  # and never back
                    killed_at.append(time.monotonic())

    try:
        with pytest.raises(StorageError) as caught:
            read_epoch()
        gave_up = time.monotonic()
    finally:
        server.start()  # for the tests after this one
    # Counted, not timed: it gave up after its 4 attempts (the message says so), long before the
    # 60 s budget (measured when it raised, not after the restart).
    assert killed_at and gave_up - killed_at[0] < 60
    message = str(caught.value)
    assert f"{server.url}/big/train_" in message
    assert "after 4 attempt(s)" in message and "max_attempts=4" in message
    assert os.path.isdir(root / "big")
