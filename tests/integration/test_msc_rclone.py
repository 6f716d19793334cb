"""``msc://`` paths configured the way Energon's users configure them, against a real S3 server.

An ``rclone.conf`` in a private ``$XDG_CONFIG_HOME`` (or an MSC config in ``$HOME``) names the
remote; nothing comes from the AWS environment. A dataset loads through ``msc://remote/bucket/..``
with exactly the samples it has on local disk (in two worker processes too), and ``EPath`` reads,
writes, lists, copies and deletes objects as it does local files.
"""

from __future__ import annotations

import contextlib
import pickle
from pathlib import Path
from typing import Any

import pytest

from stoker import EPath, get_loader, get_train_dataset
from tests.integration._remote import config, epoch_keys, prepare_local
from tests.s3server import WeedMini

BUCKET = "stoker-msc"


@pytest.fixture(scope="module")
def bucket(weed: WeedMini) -> Any:
    client = weed.client()
    with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
        client.create_bucket(Bucket=BUCKET)
    return client


@pytest.fixture(scope="module")
def dataset(bucket: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A dataset prepared on local disk, and the same files uploaded under ``rclone/coco``."""
    local = prepare_local(tmp_path_factory.mktemp("local"), "coco", shards=3, per_shard=20)
    for path in sorted(local.rglob("*")):
        if path.is_file():
            key = f"rclone/coco/{path.relative_to(local).as_posix()}"
            bucket.put_object(Bucket=BUCKET, Key=key, Body=path.read_bytes())
    return local


@pytest.fixture(autouse=True)
def rclone_home(weed: WeedMini, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """HOME and XDG_CONFIG_HOME in tmp_path, with an rclone remote ``lake``; no AWS variables."""
    home = tmp_path / "home"
    conf = home / ".config" / "rclone" / "rclone.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text(
        "[lake]\ntype = s3\nprovider = Other\nenv_auth = false\naccess_key_id = test\n"
        f"secret_access_key = test\nregion = us-east-1\nendpoint = {weed.endpoint}\n"
    )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    for name in ("AWS_ENDPOINT_URL_S3", "MSC_CONFIG", "STOKER_STORAGE_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("STOKER_CACHE_DIR", str(tmp_path / "cache"))
    return home


URL = f"msc://lake/{BUCKET}/rclone/coco"


@pytest.mark.parametrize("workers", [0, 2])
def test_dataset_through_an_rclone_remote_has_its_local_samples(
    dataset: Path, workers: int
) -> None:
    assert epoch_keys(URL, workers) == epoch_keys(str(dataset), workers)
    assert epoch_keys(URL, 0, "val") == epoch_keys(str(dataset), 0, "val")


def test_epath_to_a_remote_dataset_is_accepted_by_get_train_dataset(dataset: Path) -> None:
    train = get_train_dataset(
        EPath(URL), worker_config=config(0), batch_size=4, shuffle_buffer_size=None,
        max_samples_per_sequence=None, repeat=False,
    )  # fmt: skip
    with get_loader(train) as loader:
        keys = sorted(k for batch in loader for k in batch.__key__)
    assert keys == sorted(epoch_keys(str(dataset), 0))


def test_an_msc_config_in_home_names_the_same_bucket(
    weed: WeedMini, dataset: Path, rclone_home: Path
) -> None:
    (rclone_home / ".config" / "rclone" / "rclone.conf").unlink()
    (rclone_home / ".msc_config.yaml").write_text(
        "profiles:\n  coco:\n    storage_provider:\n      type: s3\n      options:\n"
        f"        base_path: {BUCKET}/rclone/coco\n        endpoint_url: {weed.endpoint}\n"
        "    credentials_provider:\n      type: S3Credentials\n"
        "      options: {access_key: test, secret_key: test}\n"
    )
    assert epoch_keys("msc://coco", 0, "val") == epoch_keys(str(dataset), 0, "val")
    assert (
        EPath("msc://coco/.nv-meta/.info.json").read_text()
        == (dataset / ".nv-meta" / ".info.json").read_text()
    )


def test_epath_reads_writes_lists_and_deletes_objects(dataset: Path, tmp_path: Path) -> None:
    root = EPath(f"msc://lake/{BUCKET}/epath")
    f = root / "dir" / "file.txt"
    assert not f.is_file() and not f.exists()
    f.write_text("dummy")
    assert f.is_file() and f.size() == 5 and f.read_text() == "dummy"
    assert root.is_dir() and (root / "dir").is_dir() and not root.is_local()
    stat = f.stat()
    assert stat.content_length == 5 and stat.last_modified is not None
    with (root / "dir" / "blob.bin").open("wb") as out:
        out.write(b"0123456789")
    with (root / "dir" / "blob.bin").open("rb") as src:
        src.seek(3)
        assert src.read(4) == b"3456"
    with (root / "sub" / "x.txt").open("w") as text_out:
        text_out.write("x")
    assert sorted(p.relative_to(root) for p in root.walk()) == [
        "dir/blob.bin", "dir/file.txt", "sub/x.txt",
    ]  # fmt: skip
    assert sorted(str(p) for p in root.glob("**/*.txt")) == [
        f"msc://lake/{BUCKET}/epath/dir/file.txt",
        f"msc://lake/{BUCKET}/epath/sub/x.txt",
    ]
    # Across stores: local -> remote, remote -> local, and a move on the remote.
    (tmp_path / "local.bin").write_bytes(b"from disk")
    EPath(tmp_path / "local.bin").copy(root / "copied.bin")
    assert (root / "copied.bin").read_bytes() == b"from disk"
    (root / "sub").copy(EPath(tmp_path / "down"))
    assert (tmp_path / "down" / "x.txt").read_text() == "x"
    (root / "copied.bin").move(root / "moved.bin")
    assert not (root / "copied.bin").is_file() and (root / "moved.bin").is_file()
    for p in list(root.walk()):
        p.unlink()
    assert not f.is_file() and not root.is_dir() and list(root.walk()) == []
    assert b"test" not in pickle.dumps(f)  # no credentials in a pickled path
