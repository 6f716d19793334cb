"""The fsspec-backed store over ``memory://``: the Store contract, errors, prepare and load."""

from __future__ import annotations

import os
from pathlib import Path

import fsspec
import pytest

from stoker import WorkerConfig, get_loader, get_val_dataset
from stoker.errors import ConfigError, StorageError
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.prepare import prepare_dataset
from stoker.storage import open_store
from stoker.storage.fsspec_store import FsspecStore, filesystem_for
from tests.conftest import text_samples, write_shard


def test_open_store_reads_writes_and_lists_through_fsspec(memory_root: str) -> None:
    store = open_store(f"{memory_root}/ds/")
    assert isinstance(store, FsspecStore) and store.root == f"{memory_root}/ds"
    store.write_bytes("a/b.bin", bytes(range(100)))
    store.write_bytes("c.txt", b"hello")
    assert store.list_files() == ["a/b.bin", "c.txt"]
    assert store.list_files("a") == ["a/b.bin"]
    assert store.exists("c.txt") and not store.exists("a") and not store.exists("zz")
    assert store.is_dir("a") and not store.is_dir("c.txt")
    assert store.size("a/b.bin") == 100
    assert store.read_range("a/b.bin", 10, 5) == bytes(range(10, 15))
    assert store.read_range("a/b.bin", 95, 50) == bytes(range(95, 100))  # short at the end
    assert store.read_bytes("c.txt") == b"hello"
    with store.open("a/b.bin") as f:
        f.seek(50)
        assert f.read(3) == bytes([50, 51, 52]) and f.read() == bytes(range(53, 100))
    assert store.local_path("c.txt") is None
    assert store.url("c.txt") == f"{memory_root}/ds/c.txt"


def test_publish_replaces_and_remove_forgets(memory_root: str) -> None:
    store = open_store(memory_root)
    store.write_bytes("x.json", b"old")
    store.write_bytes("x.json.stoker-tmp", b"new")
    store.publish("x.json.stoker-tmp", "x.json")
    assert store.read_bytes("x.json") == b"new" and store.list_files() == ["x.json"]
    store.remove("x.json")
    store.remove("x.json")  # removing what is gone is fine
    assert store.list_files() == []


def test_missing_file_is_a_storage_error_naming_the_url(memory_root: str) -> None:
    store = open_store(memory_root)
    with pytest.raises(StorageError, match=r"/nope.bin: file not found"):
        store.read_range("nope.bin", 0, 10)
    with pytest.raises(StorageError, match=r"/nope.bin: file not found"):
        store.size("nope.bin")
    assert store.cached_local_path("nope.bin") is None


def test_cached_local_path_is_a_local_copy(memory_root: str, tmp_path: Path) -> None:
    store = open_store(memory_root)
    store.write_bytes(".nv-meta/index.sqlite", b"SQLite format 3\x00...")
    local = store.cached_local_path(".nv-meta/index.sqlite")
    assert local is not None and Path(local).read_bytes() == b"SQLite format 3\x00..."


def test_unknown_protocol_lists_what_works() -> None:
    with pytest.raises(
        ConfigError, match=r"nosuch://x/y: URL scheme 'nosuch' is not supported.*gs://"
    ):
        open_store("nosuch://x/y")


def test_protocol_without_its_package_says_what_to_install() -> None:
    fsspec.register_implementation(
        "stokertest", "stoker_no_such_module.FS", clobber=True, errtxt="Install stokertest-fs"
    )
    with pytest.raises(ConfigError, match=r"stokertest://b/p: .*Install stokertest-fs"):
        open_store("stokertest://b/p")


def test_http_is_read_only_and_unlistable_with_a_hint() -> None:
    store = open_store("http://127.0.0.1:9/ds")  # no request is made for these
    for call in (
        lambda: store.list_files(),
        lambda: store.write_bytes("a", b"1"),
        lambda: store.publish("a.tmp", "a"),
        lambda: store.remove("a"),
    ):
        with pytest.raises(StorageError, match=r"http://127.0.0.1:9/ds.*serve the prepared"):
            call()


def test_each_process_makes_its_own_filesystem(memory_root: str) -> None:
    store = FsspecStore(memory_root)
    mine = filesystem_for(store.protocol, store.settings)
    assert filesystem_for(store.protocol, store.settings) is mine  # made once per process
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a new filesystem, never the parent's
        os.close(read)
        child = filesystem_for(store.protocol, store.settings)
        os.write(write, b"1" if child is not mine else b"0")
        os._exit(0)
    os.close(write)
    assert os.read(read, 1) == b"1"
    os.close(read)
    assert os.waitpid(pid, 0)[1] == 0


@pytest.mark.parametrize("workers", [0, 2])
def test_prepare_in_place_then_load(memory_root: str, tmp_path: Path, workers: int) -> None:
    fs = fsspec.filesystem("memory")
    for s in range(2):
        shard = write_shard(tmp_path / f"part_{s}.tar", text_samples(f"s{s}_", 6))
        fs.pipe_file(f"{memory_root}/ds/part_{s}.tar", shard.read_bytes())
    url = f"{memory_root}/ds"
    prepare_dataset(url, dataset_yaml=make_dataset_yaml("TextSample", {"text": "txt"}),
                    split_parts=[("val", "part_")])  # fmt: skip
    files = open_store(url).list_files()
    assert {".nv-meta/.info.json", "part_0.tar.idx", "part_1.tar.idx"} <= set(files)
    assert not [name for name in files if "stoker-tmp" in name]
    config = WorkerConfig(rank=0, world_size=1, num_workers=workers)
    with get_loader(get_val_dataset(url, worker_config=config, batch_size=4)) as loader:
        keys = [key for batch in loader for key in batch.__key__]
    assert sorted(keys) == [f"s{s}_{i:05d}" for s in range(2) for i in range(6)]
