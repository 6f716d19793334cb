"""Datasets on S3-compatible object storage, against a real server (SeaweedFS on 127.0.0.1).

A dataset loads through ``s3://`` with exactly the samples it has on local disk; ``stoker
prepare`` works in place on a bucket; metadatasets on S3 blend S3 datasets; and the faults a
remote store has (a server killed and restarted, a server gone, responses cut short or slow) are
retried, resumed, or reported as one clear error within the retry budget.
"""

from __future__ import annotations

import collections
import contextlib
import json
import mmap
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stoker import get_loader, get_val_dataset
from stoker.errors import ConfigError, StorageError
from stoker.format.jsonl import prepare_jsonl
from stoker.pipeline import read as read_module
from stoker.sources.load import load_source
from stoker.storage import open_store
from stoker.storage.s3 import STATS
from tests.integration._remote import (
    config,
    epoch_keys,
    make_shards,
    prepare_local,
    stoker_cli,
    train_dataset,
)
from tests.s3server import WeedMini

BUCKET = "stoker-test"
HEADER = "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n"


def upload(client: Any, folder: Path, prefix: str) -> str:
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            key = f"{prefix}/{path.relative_to(folder).as_posix()}"
            client.put_object(Bucket=BUCKET, Key=key, Body=path.read_bytes())
    return f"s3://{BUCKET}/{prefix}"


@pytest.fixture(scope="module")
def bucket(weed: WeedMini) -> Any:
    client = weed.client()
    with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
        client.create_bucket(Bucket=BUCKET)
    return client


@pytest.fixture(autouse=True)
def s3_env(weed: WeedMini, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The standard AWS chain pointing at the test server; a private metadata cache."""
    for name in ("AWS_PROFILE", "STOKER_STORAGE_CONFIG", "AWS_ENDPOINT_URL_S3", "MSC_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", weed.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("STOKER_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def uploaded(bucket: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A dataset prepared on local disk and the same files uploaded: (local folder, URL)."""
    local = prepare_local(tmp_path_factory.mktemp("local"), "coco", shards=4, per_shard=30)
    return local, upload(bucket, local, "uploaded/coco")


def storage_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, endpoint: str, **retry: float
) -> None:
    text = f"endpoint_url: {endpoint}\naccess_key_id: test\nsecret_access_key: test\nretry:\n"
    text += "".join(f"  {k}: {v}\n" for k, v in retry.items())
    (tmp_path / "storage.yaml").write_text(text)
    monkeypatch.setenv("STOKER_STORAGE_CONFIG", str(tmp_path / "storage.yaml"))


# -- loading --------------------------------------------------------------------------------


@pytest.mark.parametrize("workers", [0, 2])
def test_s3_dataset_loads_the_samples_it_has_on_local_disk(
    uploaded: tuple[Path, str], workers: int
) -> None:
    local, url = uploaded
    for split in ("train", "val"):
        on_disk = epoch_keys(str(local), workers, split)
        remote = epoch_keys(url, workers, split)
        assert remote == on_disk  # same samples, same order: the plan does not see the store
        assert len(set(remote)) == len(remote) == (90 if split == "train" else 30)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_jsonl_file_on_s3_loads_the_lines_it_has_on_local_disk(
    bucket: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    # Its index is kept once in the local metadata cache and mapped (here from 8 bytes on).
    monkeypatch.setattr(read_module, "_MAP_BYTES", 8)
    (tmp_path / "j").mkdir()
    path = tmp_path / "j" / "texts.jsonl"
    path.write_text("".join(json.dumps({"i": i, "t": "x" * i}) + "\n" for i in range(40)))
    prepare_jsonl(str(path))
    url = upload(bucket, tmp_path / "j", f"jsonl{workers}") + "/texts.jsonl"

    def lines(where: str) -> list[int]:
        dataset = get_val_dataset(
            where, split_part="train", worker_config=config(workers), batch_size=8
        )
        with get_loader(dataset) as loader:
            return [i for batch in loader for i in batch["json"]["i"]]

    assert lines(url) == lines(str(path)) and sorted(lines(url)) == list(range(40))
    offsets = load_source(url).reader().offsets(0)
    assert isinstance(getattr(offsets.base, "obj", None), mmap.mmap)
    assert offsets.tolist() == load_source(str(path)).reader().offsets(0).tolist()


def test_prepare_in_place_on_s3_then_load_info_and_lint(bucket: Any, tmp_path: Path) -> None:
    url = upload(bucket, make_shards(tmp_path, "raw", shards=3, per_shard=20), "inplace/raw")
    result = stoker_cli(
        "prepare", url, "--non-interactive", "--split-parts", "train:train_",
        "--split-parts", "val:val_", "--sample-type", "TextSample", "--field-map",
        '{"text": "txt"}', "--no-progress",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    files = open_store(url).list_files()
    assert {".nv-meta/.info.json", ".nv-meta/index.sqlite", ".nv-meta/split.yaml"} <= set(files)
    assert {"train_1.tar.idx", "train_2.tar.idx", "val_0.tar.idx"} <= set(files)
    assert not [name for name in files if "stoker-tmp" in name]  # temporaries published
    keys = epoch_keys(url, 0)
    assert sorted(keys) == sorted(f"raw_{s}_{i:04d}" for s in (1, 2) for i in range(20))

    info = stoker_cli("info", url)
    assert info.returncode == 0, info.stderr
    assert "60" in info.stdout  # 3 shards of 20 samples
    lint = stoker_cli("lint", url)
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_metadataset_on_s3_blends_two_s3_datasets(bucket: Any, tmp_path: Path) -> None:
    for name, per_shard in (("coco", 10), ("coyo", 7)):
        upload(bucket, prepare_local(tmp_path, name, 3, per_shard), f"mds/{name}")
    body = "  val:\n    blend:\n" + "".join(
        f"      - weight: 1\n        path: ../{name}\n" for name in ("coco", "coyo")
    )
    bucket.put_object(Bucket=BUCKET, Key="mds/cfg/blend.yaml", Body=(HEADER + body).encode())
    keys = epoch_keys(f"s3://{BUCKET}/mds/cfg/blend.yaml", 0, "val")
    expected = [f"coco_0_{i:04d}" for i in range(10)] + [f"coyo_0_{i:04d}" for i in range(7)]
    assert sorted(keys) == sorted(expected)


def test_missing_object_and_bucket_are_clear_errors(uploaded: tuple[Path, str]) -> None:
    with pytest.raises(StorageError, match=r"uploaded/coco/nope.tar: object not found"):
        open_store(uploaded[1]).read_range("nope.tar", 0, 10)
    with pytest.raises(StorageError, match=r"s3://no-such-bucket/x/a.tar: object not found"):
        open_store("s3://no-such-bucket/x").read_range("a.tar", 0, 10)


def test_metadata_files_are_cached_by_version(
    uploaded: tuple[Path, str], bucket: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(uploaded[1])
    first = store.read_bytes("train_1.tar.idx")
    STATS.reset()
    assert store.read_bytes("train_1.tar.idx") == first
    assert STATS.total_requests == 0  # checked moments ago: trusted without a request
    monkeypatch.setenv("STOKER_CACHE_FRESH_SECONDS", "0")
    assert store.read_bytes("train_1.tar.idx") == first
    assert STATS.requests["GET"] == 1 and STATS.bytes_received == 0  # 304 Not Modified
    key = "uploaded/coco/changed.tar.idx"
    bucket.put_object(Bucket=BUCKET, Key=key, Body=b"1" * 16)
    assert store.read_bytes("changed.tar.idx") == b"1" * 16
    bucket.put_object(Bucket=BUCKET, Key=key, Body=b"2" * 16)
    assert store.read_bytes("changed.tar.idx") == b"2" * 16  # a new version is fetched
    local = store.cached_local_path(".nv-meta/index.sqlite")
    assert local is not None and local.startswith(str(tmp_path / "cache"))
    assert Path(local).read_bytes() == (uploaded[0] / ".nv-meta/index.sqlite").read_bytes()


def test_loading_a_dataset_asks_for_each_metadata_file_once_then_not_again(
    uploaded: tuple[Path, str], bucket: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    STATS.reset()
    train_dataset(uploaded[1], 0)
    # dataset.yaml, .info.json and split.yaml: each one HEAD (whether it exists, its size) and
    # one GET, though the loading asks for existence, size and content in turn
    assert (STATS.requests["HEAD"], STATS.requests["GET"]) == (3, 3)
    STATS.reset()
    train_dataset(uploaded[1], 0)  # again moments later (another rank, a new epoch's dataset)
    assert STATS.total_requests == 0
    monkeypatch.setenv("STOKER_CACHE_FRESH_SECONDS", "0")  # always ask
    store = open_store(uploaded[1])
    assert not store.exists(".nv-meta/gone.yaml")
    bucket.put_object(Bucket=BUCKET, Key="uploaded/coco/.nv-meta/gone.yaml", Body=b"a: 1\n")
    assert store.exists(".nv-meta/gone.yaml") and store.size(".nv-meta/gone.yaml") == 5
    store.remove(".nv-meta/gone.yaml")
    assert not store.exists(".nv-meta/gone.yaml")
    STATS.reset()
    train_dataset(uploaded[1], 0)
    assert STATS.requests["HEAD"] >= 3


# -- faults -----------------------------------------------------------------------------------


def test_server_gone_for_good_is_a_clear_error_within_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as s:  # a port nobody listens on: the server is gone
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    storage_config(tmp_path, monkeypatch, f"http://127.0.0.1:{port}",
                   max_attempts=4, max_seconds=60, base_delay=0.05, max_delay=0.2)  # fmt: skip
    store = open_store(f"s3://{BUCKET}/uploaded/coco")
    start = time.monotonic()
    with pytest.raises(StorageError) as caught:
        store.read_range("train_1.tar", 0, 100)
    # Counted, not timed: it gave up after its 4 attempts, long before the 60 s budget.
    assert time.monotonic() - start < 60
    message = str(caught.value)
    assert f"s3://{BUCKET}/uploaded/coco/train_1.tar" in message
    assert "after 4 attempt(s)" in message and "GET" in message and "max_attempts=4" in message


class Proxy:
    """A TCP proxy on 127.0.0.1 that spoils the first ``bad`` connections' responses: cut after
    ``cut`` bytes, or held back ``delay`` seconds. It records what clients sent."""

    def __init__(self, upstream: int, bad: int, cut: int = 0, delay: float = 0.0) -> None:
        self.upstream, self.bad, self.cut, self.delay = upstream, bad, cut, delay
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sent: list[bytes] = []
        self.sockets: list[socket.socket] = []
        self.connections = 0
        self.refused = threading.Event()  # a connection came while the server was down
        self.hold = threading.Event()  # set: delayed responses go on at once
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            spoil = self.connections <= self.bad
            try:
                server = socket.create_connection(("127.0.0.1", self.upstream))
            except OSError:  # the server is down: the client sees its connection closed
                self.refused.set()
                client.close()
                continue
            self.sockets += [client, server]
            for args in ((client, server, False, False), (server, client, True, spoil)):
                thread = threading.Thread(target=self._pump, args=args, daemon=True)
                thread.start()
                self.threads.append(thread)

    def _pump(self, src: socket.socket, dst: socket.socket, response: bool, spoil: bool) -> None:
        passed = 0
        try:
            while data := src.recv(65536):
                if not response:
                    self.sent.append(data)
                elif spoil and self.delay:
                    self.hold.wait(self.delay)  # until the delay ends or the proxy closes
                elif spoil and passed + len(data) > self.cut:
                    dst.sendall(data[: self.cut - passed])
                    break
                dst.sendall(data)
                passed += len(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()

    def gets(self) -> int:
        """The GET requests that clients sent so far."""
        return sum(chunk.startswith(b"GET ") for chunk in list(self.sent))

    def close(self) -> None:
        self.hold.set()
        for s in [self.listener, *self.sockets]:  # wakes accept() and recv() (Linux)
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        for thread in self.threads:
            thread.join(5)


@pytest.fixture
def blob(weed: WeedMini, bucket: Any) -> bytes:
    data = os.urandom(1 << 20)
    # After the restart test, weed may take seconds to take a first PUT (S3_SERVER.md 6.1.5):
    # the test client is patient (tests/s3server.py).
    weed.client().put_object(Bucket=BUCKET, Key="proxy/blob.bin", Body=data)
    return data


def proxied(
    weed: WeedMini, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **spoil: Any
) -> Iterator[Proxy]:
    proxy = Proxy(weed.ports["s3"], **spoil)
    storage_config(tmp_path, monkeypatch, f"http://127.0.0.1:{proxy.port}",
                   max_attempts=6, max_seconds=20, base_delay=0.05, max_delay=0.2,
                   read_timeout=0.5, connect_timeout=0.5)  # fmt: skip
    yield proxy
    proxy.close()


def test_server_killed_mid_epoch_and_restarted_completes_the_epoch(
    weed: WeedMini, bucket: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Samples are read when needed (no read-ahead), through a proxy that counts the GETs: the
    server is killed at step 5 and started again once a read has found it down. The epoch
    completes, every sample once, and GETs were answered after the restart: without the restart
    the reads fail when the 60 s retry budget runs out."""
    url = upload(bucket, prepare_local(tmp_path, "big", shards=5, per_shard=120), "fault/big")
    monkeypatch.setenv("STOKER_PREFETCH_BYTES", "0")
    proxy = Proxy(weed.ports["s3"], bad=0)
    storage_config(tmp_path, monkeypatch, f"http://127.0.0.1:{proxy.port}",
                   max_seconds=60, base_delay=0.05, max_delay=0.5)  # fmt: skip
    gets_at_restart: list[int] = []

    def restart() -> None:
        if proxy.refused.wait(120):  # a read found the server down: the outage was felt
            weed.start()
            gets_at_restart.append(proxy.gets())

    restarter = threading.Thread(target=restart, daemon=True)
    seen: list[str] = []
    try:
        with get_loader(train_dataset(url, 2)) as loader:
            for step, batch in enumerate(loader):
                seen += batch.__key__
                if step == 5:
                    weed.kill9()
                    restarter.start()
    finally:
        proxy.refused.set()  # a restarter still waiting goes on
        if restarter.ident is not None:
            restarter.join(120)
        proxy.close()
        if weed.proc is None or weed.proc.poll() is not None:
            weed.start()  # for the tests after this one
    assert gets_at_restart, "the server was not started again"
    assert proxy.gets() > gets_at_restart[0]  # samples were read from the restarted server
    counts = collections.Counter(seen)
    expected = {f"big_{s}_{i:04d}" for s in range(1, 5) for i in range(120)}
    assert set(counts) == expected
    assert set(counts.values()) == {1}


def test_truncated_response_is_resumed_at_the_offset_reached(
    weed: WeedMini, blob: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for proxy in proxied(weed, tmp_path, monkeypatch, bad=2, cut=300_000):
        STATS.reset()
        data = open_store(f"s3://{BUCKET}/proxy").read_range("blob.bin", 100_000, 800_000)
        assert data == blob[100_000:900_000]
        assert STATS.requests["GET"] >= 2  # cut short, then resumed
        ranges = [
            line.split(b"=", 1)[1]  # "Range: bytes=START-END" -> START-END
            for chunk in proxy.sent
            for line in chunk.split(b"\r\n")
            if line.lower().startswith(b"range:")
        ]
        assert ranges[0] == b"100000-899999"
        resumed_from = int(ranges[1].split(b"-")[0])
        assert 100_000 < resumed_from < 900_000  # not from the start again


def test_slow_server_times_out_and_is_retried(
    weed: WeedMini, blob: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    delay = 120.0  # the first connection's answer is held that long (or until the proxy closes)
    for proxy in proxied(weed, tmp_path, monkeypatch, bad=1, delay=delay):
        store = open_store(f"s3://{BUCKET}/proxy")
        STATS.reset()
        start = time.monotonic()
        data = store.read_range("blob.bin", 0, 4096)
        assert time.monotonic() - start < delay  # did not wait for the held answer
        assert data == blob[:4096]
        assert STATS.requests["GET"] >= 2  # the first timed out (read_timeout 0.5 s), retried
        assert proxy.connections >= 2 and proxy.gets() == STATS.requests["GET"]


def test_msc_profile_reads_the_same_dataset(
    weed: WeedMini, uploaded: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)  # everything comes from the profile
    (tmp_path / "msc.yaml").write_text(
        "profiles:\n  lake:\n    storage_provider:\n      type: s3\n      options:\n"
        f"        base_path: {BUCKET}/uploaded\n        endpoint_url: {weed.endpoint}\n"
        "    credentials_provider:\n      type: S3Credentials\n"
        "      options: {access_key: test, secret_key: test}\n"
    )
    monkeypatch.setenv("MSC_CONFIG", str(tmp_path / "msc.yaml"))
    assert epoch_keys("msc://lake/coco", 0, "val") == epoch_keys(str(uploaded[0]), 0, "val")
    with pytest.raises(ConfigError, match=r"no MSC profile .sea.\. Profiles defined: lake"):
        open_store("msc://sea/coco")
