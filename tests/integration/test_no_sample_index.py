"""``--no-sample-index``: no ``index.sqlite``; loading works, what needs key lookup says so."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from stoker import WorkerConfig, get_loader, get_val_dataset
from stoker.cli.main import cli
from stoker.errors import ConfigError, StokerError, StorageError
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.join_index import read_key_table
from stoker.format.prepare import prepare_dataset
from stoker.storage import open_store
from tests.conftest import make_dataset

YAML = make_dataset_yaml("TextSample", {"text": "txt"})


def test_dataset_without_sample_index_loads_and_joins_name_the_flag(tmp_path: Path) -> None:
    root = make_dataset(tmp_path / "ds", shards=3, per_shard=4)
    prepare_dataset(str(root), split_ratio="1,0,0", dataset_yaml=YAML)
    assert (root / ".nv-meta" / "index.sqlite").exists()
    report = prepare_dataset(
        str(root), split_ratio="1,0,0", dataset_yaml=YAML, overwrite=True, sample_index=False
    )
    assert report.samples == 12
    assert not (root / ".nv-meta" / "index.sqlite").exists()  # the old one is gone too
    assert len(list(root.glob("*.tar.idx"))) == 3

    wc = WorkerConfig(rank=0, world_size=1, num_workers=2)
    dataset = get_val_dataset(str(root), split_part="train", worker_config=wc, batch_size=4)
    keys = [key for batch in get_loader(dataset) for key in batch.__key__]
    assert sorted(keys) == sorted(f"s{s}_{i:05d}" for s in range(3) for i in range(4))

    other = make_dataset(tmp_path / "other", shards=1, per_shard=2)
    prepare_dataset(str(other), split_ratio="1,0,0", dataset_yaml=YAML)
    mds = tmp_path / "joined.yaml"
    mds.write_text(
        "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n"
        "    join:\n      - path: ds\n      - path: other\n        nonmatch: skip\n"
        "    joiner:\n      __module__: tests.integration.join_types\n"
        "      __class__: JoinedSample\n"
    )
    joined = CliRunner().invoke(cli, ["prepare", str(mds), "--no-progress"])
    assert joined.exit_code != 0
    assert "--no-sample-index" in joined.output
    with pytest.raises(StorageError, match="--no-sample-index"):
        read_key_table(open_store(str(root)), ["shard_000.tar"], np.array([4]), np.zeros(0, int))


def test_cli_flag_and_media_metadata_conflict(tmp_path: Path) -> None:
    root = make_dataset(tmp_path / "ds", shards=2, per_shard=2)
    args = ["prepare", str(root), "--non-interactive", "--split-ratio", "1,0,0", "--no-progress"]
    both = CliRunner().invoke(cli, [*args, "--no-sample-index", "--media-metadata-by-extension"])
    assert both.exit_code != 0
    assert "--no-sample-index" in both.output
    assert not (root / ".nv-meta").exists()
    done = CliRunner().invoke(cli, [*args, "--no-sample-index"])
    assert done.exit_code == 0, done.output
    assert (root / ".nv-meta" / ".info.json").exists()
    assert not (root / ".nv-meta" / "index.sqlite").exists()


def test_media_into_pending_without_index_is_a_config_error(tmp_path: Path) -> None:
    from stoker.format.prepare import index_shards

    root = make_dataset(tmp_path / "ds", shards=1, per_shard=2)
    with index_shards(str(root), sample_index=False) as pending, pytest.raises(ConfigError):
        pending.index_db_path()


def test_pack_prepare_without_index_restores_samples_and_aux_mount_name_the_flag(
    tmp_path: Path,
) -> None:
    from stoker.format.mount import DatasetTree
    from stoker.sources.aux import WebdatasetFileStore

    source = tmp_path / "texts"
    source.mkdir()
    for i in range(6):
        (source / f"{i:03d}.txt").write_text(f"text {i}")
    out = tmp_path / "packed"
    lonely = CliRunner().invoke(cli, ["pack", str(source), str(out), "--no-sample-index"])
    assert lonely.exit_code != 0 and "--prepare" in lonely.output
    args = ["pack", str(source), str(out), "--samples-per-shard", "2", "--no-progress"]
    typed = ["--sample-type", "TextSample", "--field-map", '{"text": "txt"}']
    packed = CliRunner().invoke(cli, [*args, *typed, "--prepare", "--no-sample-index"])
    assert packed.exit_code == 0, packed.output
    assert (out / ".nv-meta" / ".info.json").exists()
    assert not (out / ".nv-meta" / "index.sqlite").exists()
    assert len(list(out.glob("*.tar.idx"))) == 3

    # restore_sample finds samples by their position (the .tar.idx files), not by key
    wc = WorkerConfig(rank=0, world_size=1, num_workers=2)
    loader = get_loader(get_val_dataset(str(out), split_part="train", worker_config=wc,
                                        batch_size=2))  # fmt: skip
    batches = list(loader)
    assert sum(len(b.__key__) for b in batches) == 6
    restored = loader.restore_sample(batches[1].__restore_key__)
    assert restored.__key__ == batches[1].__key__

    with pytest.raises(ConfigError, match="--no-sample-index"):
        WebdatasetFileStore(str(out))
    with pytest.raises(StokerError, match="--no-sample-index"):
        DatasetTree(str(out))
