"""``gs://`` datasets against a Google Cloud Storage emulator on 127.0.0.1.

Needs ``gcsfs`` and ``gcp-storage-emulator`` (both in the ``dev`` group; skipped without them).
The emulator keeps its objects in memory; gcsfs finds it through ``STORAGE_EMULATOR_HOST``,
as a user's job would, and uses no credentials there (``NO_GCE_CHECK``: google-auth does not
look for a metadata server first).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stoker.errors import StorageError
from stoker.storage import open_store
from tests.integration._remote import emulator, epoch_keys, make_shards, prepare_local, stoker_cli

gcsfs = pytest.importorskip("gcsfs")
pytest.importorskip("gcp_storage_emulator")


@pytest.fixture(scope="module")
def gcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(``STORAGE_EMULATOR_HOST``, local copy) of a prepared dataset uploaded to ``gs://data/ds``."""

    def argv(port: int) -> list[str]:
        return [sys.executable, "-m", "gcp_storage_emulator", "start", "--host", "127.0.0.1",
                "--port", str(port), "--in-memory", "--default-bucket", "data", "-q"]  # fmt: skip

    with emulator(argv, "gcp-storage-emulator") as port:
        host = f"http://127.0.0.1:{port}"
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("STORAGE_EMULATOR_HOST", host)
            patch.setenv("NO_GCE_CHECK", "true")
            local = prepare_local(tmp_path_factory.mktemp("gs"), "gs", 3, 10)
            gcsfs.GCSFileSystem(skip_instance_cache=True).put(str(local), "data/ds", recursive=True)
        yield host, local


@pytest.fixture
def gs_env(gcs: tuple[str, Path], monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs[0])
    monkeypatch.setenv("NO_GCE_CHECK", "true")
    return gcs[1]


def test_an_epoch_from_gcs_with_two_workers_matches_the_local_one(gs_env: Path) -> None:
    keys = epoch_keys("gs://data/ds", 2)
    assert len(keys) == 20 and sorted(keys) == sorted(epoch_keys(str(gs_env), 0))
    assert epoch_keys("gs://data/ds", 0, split="val") == epoch_keys(str(gs_env), 0, split="val")


def test_ranged_reads_and_a_missing_object_on_gcs(gs_env: Path) -> None:
    store: Any = open_store("gs://data/ds")
    local = (gs_env / "train_1.tar").read_bytes()
    assert store.read_range("train_1.tar", 512, 700) == local[512:1212]
    assert store.size("train_1.tar") == len(local)
    with pytest.raises(StorageError, match=re.escape("gs://data/ds/nothing.tar")):
        store.read_range("nothing.tar", 0, 10)


def test_prepare_in_place_on_gcs_publishes_a_dataset_that_loads(
    gs_env: Path, tmp_path: Path
) -> None:
    raw = make_shards(tmp_path, "raw", shards=3, per_shard=6)
    gcsfs.GCSFileSystem(skip_instance_cache=True).put(str(raw), "data/raw", recursive=True)
    result = stoker_cli(
        "prepare", "gs://data/raw", "--non-interactive", "--split-parts", "train:train_",
        "--split-parts", "val:val_", "--sample-type", "TextSample", "--field-map",
        '{"text": "txt"}', "--no-progress",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    files = open_store("gs://data/raw").list_files()
    assert {".nv-meta/.info.json", ".nv-meta/split.yaml", "train_1.tar.idx"} <= set(files)
    assert not [name for name in files if "stoker-tmp" in name]  # temporaries published
    assert sorted(epoch_keys("gs://data/raw", 2)) == sorted(
        f"raw_{s}_{i:04d}" for s in (1, 2) for i in range(6)
    )
