"""prepare: the files it writes, its errors, and that failures leave the dataset as it was."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from stoker.errors import AlreadyPreparedError, ConfigError, FormatError, StorageError
from stoker.format import prepare as prepare_module
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.meta import read_info, read_split_config
from stoker.format.prepare import (
    TMP_MARK,
    parse_split_ratio,
    prepare_dataset,
    split_by_patterns,
    split_by_ratio,
)
from stoker.format.sqlite_index import SqliteIndexReader
from stoker.format.tar_index import decode_offsets
from tests.conftest import make_dataset, snapshot, text_samples, write_shard

TEXT_YAML = make_dataset_yaml("TextSample", {"text": "txt"})


@pytest.mark.parametrize("workers", [1, 2])
def test_prepare_writes_energon_layout(dataset_dir: Path, workers: int) -> None:
    report = prepare_dataset(
        str(dataset_dir), split_ratio="1,1,1", dataset_yaml=TEXT_YAML, num_workers=workers
    )
    assert (report.shards, report.samples) == (3, 12)
    assert report.part_names == ["json", "txt"]
    info = read_info(_store(dataset_dir))
    assert info.shard_counts == {f"shard_{i:03d}.tar": 4 for i in range(3)}
    splits = read_split_config(_store(dataset_dir))
    assert sorted(s for p in ("train", "val", "test") for s in splits.shards(p)) == list(
        info.shard_counts
    )
    for name in info.shard_counts:
        offsets = decode_offsets((dataset_dir / f"{name}.idx").read_bytes(), name)
        assert len(offsets) == 5 and offsets[0] == 0 and np.all(np.diff(offsets) > 0)
        assert (dataset_dir / f"{name}.idx").read_bytes() == offsets.astype("<u8").tobytes()
    reader = SqliteIndexReader(str(dataset_dir / ".nv-meta/index.sqlite"))
    assert reader.count() == 12
    location = reader.locate("s1_00002")
    assert location is not None and (location.shard_id, location.index) == (1, 2)
    assert [p[0] for p in reader.parts(1, 2)] == ["txt", "json"]
    reader.close()
    assert not [p for p in dataset_dir.rglob("*") if TMP_MARK in p.name]


def test_split_helpers() -> None:
    shards = [f"s{i}.tar" for i in range(10)]
    cut = split_by_ratio(shards, [("train", 8), ("val", 1), ("test", 1)], seed=None)
    assert [len(cut[k]) for k in ("train", "val", "test")] == [8, 1, 1]
    shuffled = split_by_ratio(shards, [("train", 1.0)], seed=42)
    assert sorted(shuffled["train"]) == shards and shuffled["train"] != shards
    by_pattern = split_by_patterns(["train/0.tar", "train/1.tar", "val/0.tar"], [("val", "val/")])
    assert by_pattern == {"val": ["val/0.tar"]}
    assert parse_split_ratio("train=9, val=1") == [("train", 9.0), ("val", 1.0)]
    with pytest.raises(ConfigError, match="invalid split ratio"):
        parse_split_ratio("1,2")


def test_already_prepared_needs_overwrite(dataset_dir: Path) -> None:
    prepare_dataset(str(dataset_dir), split_ratio="1,0,0")
    before = snapshot(dataset_dir)
    with pytest.raises(AlreadyPreparedError, match="--force-overwrite"):
        prepare_dataset(str(dataset_dir), split_ratio="1,0,0")
    assert snapshot(dataset_dir) == before
    report = prepare_dataset(str(dataset_dir), split_ratio="1,0,0", overwrite=True)
    assert report.samples == 12


def test_duplicate_keys_across_shards(tmp_path: Path) -> None:
    root = make_dataset(tmp_path / "ds", shards=2)
    write_shard(root / "shard_009.tar", text_samples("s0_", 2))
    with pytest.raises(FormatError, match="duplicate sample key") as info:
        prepare_dataset(str(root), split_ratio="1,0,0", num_workers=1)
    assert info.value.key == "s0_00000"
    assert "shard_000.tar" in info.value.message and "shard_009.tar" in info.value.message
    assert snapshot(root) == {k: v for k, v in snapshot(root).items() if TMP_MARK not in k}
    assert not (root / ".nv-meta" / ".info.json").exists()


def test_non_consecutive_members(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    write_shard(root / "a.tar", [("k1", {"txt": b"1"}), ("k2", {"txt": b"2"}), ("k1", {"j": b"x"})])
    with pytest.raises(FormatError, match="not consecutive") as info:
        prepare_dataset(str(root), split_ratio="1,0,0")
    assert info.value.key == "k1" and info.value.offset is not None and info.value.offset > 0


def test_gzip_shard_and_no_shards(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    path = write_shard(root / "a.tar", text_samples("a", 2))
    (root / "a.tgz").write_bytes(gzip.compress(path.read_bytes()))
    path.unlink()
    with pytest.raises(FormatError, match="gzip-compressed"):
        prepare_dataset(str(root), split_ratio="1,0,0")
    (root / "a.tgz").rename(root / "a.tar.gz")
    with pytest.raises(FormatError, match="no shards found") as info:
        prepare_dataset(str(root), split_ratio="1,0,0")
    assert "1 .tar.gz files were found" in info.value.message
    (root / "a.tar.gz").unlink()
    with pytest.raises(FormatError, match="no shards found") as info:
        prepare_dataset(str(root), split_ratio="1,0,0")
    assert "stoker pack" in info.value.message


def test_failure_midway_leaves_dataset_unchanged(
    dataset_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prepare_dataset(str(dataset_dir), split_ratio="1,0,0", dataset_yaml=TEXT_YAML)
    (dataset_dir / "shard_001.tar").write_bytes(b"garbage" * 200)  # breaks the second shard
    before = snapshot(dataset_dir)
    with pytest.raises(FormatError, match="not a tar archive"):
        prepare_dataset(str(dataset_dir), split_ratio="1,1,1", overwrite=True, num_workers=1)
    # the published dataset is as it was; the finished first shard (its result and its chunk
    # of the index) is kept for the next run
    assert published(snapshot(dataset_dir)) == before
    kept = sorted(set(snapshot(dataset_dir)) - set(before))
    assert len(kept) == 2 and all(".nv-meta/.stoker-work/" in name for name in kept)
    assert [name.split("/")[2] for name in kept] == ["chunks", "shard"]

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    (dataset_dir / "shard_001.tar").unlink()
    before = snapshot(dataset_dir)
    monkeypatch.setattr(prepare_module.PendingPrepare, "_check_dataset_yaml", interrupted)
    with pytest.raises(KeyboardInterrupt):
        prepare_dataset(
            str(dataset_dir), split_ratio="1,0,0", overwrite=True, dataset_yaml=TEXT_YAML
        )
    assert published(snapshot(dataset_dir)) == published(before)


def published(files: dict[str, bytes]) -> dict[str, bytes]:
    """The files of a snapshot outside the prepare work folder."""
    return {name: data for name, data in files.items() if ".stoker-work" not in name}


def test_field_map_must_name_existing_parts(dataset_dir: Path) -> None:
    yaml = make_dataset_yaml("TextSample", {"text": "md"})
    with pytest.raises(ConfigError, match="names part") as info:
        prepare_dataset(str(dataset_dir), split_ratio="1,0,0", dataset_yaml=yaml)
    assert "json, txt" in info.value.message
    # nothing published: only the work folder, so that the next run need not read the shards
    meta = dataset_dir / ".nv-meta"
    assert [p.name for p in meta.iterdir()] == [".stoker-work"]


def test_tar_index_only_rebuilds_indexes(dataset_dir: Path) -> None:
    prepare_dataset(str(dataset_dir), split_ratio="1,0,0")
    idx = dataset_dir / "shard_000.tar.idx"
    good = idx.read_bytes()
    idx.write_bytes(b"\0" * 8)
    info_before = (dataset_dir / ".nv-meta/.info.json").read_bytes()
    report = prepare_dataset(str(dataset_dir), tar_index_only=True)
    assert report.tar_index_only and idx.read_bytes() == good
    assert (dataset_dir / ".nv-meta/.info.json").read_bytes() == info_before
    write_shard(dataset_dir / "shard_000.tar", text_samples("s0_", 5))
    with pytest.raises(FormatError, match="now has 5 samples"):
        prepare_dataset(str(dataset_dir), tar_index_only=True)


def test_info_json_is_energon_shaped(dataset_dir: Path) -> None:
    prepare_dataset(str(dataset_dir), split_ratio="1,0,0")
    raw = json.loads((dataset_dir / ".nv-meta/.info.json").read_text())
    assert set(raw) == {"energon_version", "shard_counts"}


def _store(path: Path):  # type: ignore[no-untyped-def]
    from stoker.storage import open_store

    return open_store(str(path))


def test_unreadable_shard(dataset_dir: Path) -> None:
    (dataset_dir / "shard_005.tar").symlink_to(dataset_dir / "gone.tar")  # dangling link
    with pytest.raises(StorageError, match="file not found") as info:
        prepare_dataset(str(dataset_dir), split_ratio="1,0,0")
    assert "shard_005.tar" in info.value.message


def test_field_map_alternatives_need_one_existing_part(dataset_dir: Path) -> None:
    yaml = make_dataset_yaml("TextSample", {"text": "md,txt"})
    assert prepare_dataset(str(dataset_dir), split_ratio="1,0,0", dataset_yaml=yaml).samples == 12


def test_unbalanced_brace_pattern_is_a_config_error(dataset_dir: Path) -> None:
    prepare_dataset(str(dataset_dir), split_ratio="1,0,0")
    (dataset_dir / ".nv-meta/split.yaml").write_text("split_parts:\n  train: ['shard_{000.tar']\n")
    with pytest.raises(ConfigError, match="invalid brace pattern"):
        read_split_config(_store(dataset_dir)).shards("train")
