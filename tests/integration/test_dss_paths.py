"""dss://NAME@VERSION paths: datasets under NVDATASET_CACHE_DIR, opened by the storage layer the
way EPath resolves them (directly and from a metadataset), loaded with worker processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from stoker import WorkerConfig, get_loader, get_train_dataset
from stoker.errors import ConfigError
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.prepare import prepare_dataset
from stoker.storage import open_store
from tests.conftest import write_shard


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """NVDATASET_CACHE_DIR holding the prepared dataset ``charts`` version ``v2``."""
    dataset = tmp_path / "cache" / "charts" / "v2"
    for s in range(2):
        samples = [(f"c{s}_{i:03d}", {"txt": f"chart {s}-{i}".encode()}) for i in range(6)]
        write_shard(dataset / f"part_{s}.tar", samples)
    prepare_dataset(
        str(dataset),
        split_parts=[("train", ".*")],
        dataset_yaml=make_dataset_yaml("TextSample", {"text": "txt"}),
    )
    monkeypatch.setenv("NVDATASET_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _texts(path: str) -> list[str]:
    config = WorkerConfig(rank=0, world_size=1, num_workers=2)
    dataset = get_train_dataset(
        path, batch_size=4, worker_config=config, shuffle_buffer_size=None,
        max_samples_per_sequence=None, repeat=False,
    )  # fmt: skip
    with get_loader(dataset) as loader:
        return sorted(text for batch in loader for text in batch.text)


def test_store_opens_the_versioned_folder(cache: Path) -> None:
    store = open_store("dss://charts@v2")
    assert store.exists(".nv-meta/.info.json")
    assert open_store("dss://charts@v2/part_0.tar").exists("")


def test_dataset_and_metadataset_load_from_dss(cache: Path, tmp_path: Path) -> None:
    expected = sorted(f"chart {s}-{i}" for s in range(2) for i in range(6))
    assert _texts("dss://charts@v2") == expected
    yaml = tmp_path / "mds.yaml"
    yaml.write_text(
        "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n"
        "  train:\n    path: dss://charts@v2\n"
    )
    assert _texts(str(yaml)) == expected


def test_malformed_or_unconfigured_dss_is_a_config_error(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigError, match="version"):
        open_store("dss://charts")
    monkeypatch.delenv("NVDATASET_CACHE_DIR")
    monkeypatch.setattr("stoker.storage.epath.NVDATASET_CACHE_DIR", None)
    with pytest.raises(ConfigError, match="NVDATASET_CACHE_DIR"):
        open_store("dss://charts@v2")
