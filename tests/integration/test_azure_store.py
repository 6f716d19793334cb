"""``az://`` datasets against Azurite, Azure's own Blob Storage emulator, on 127.0.0.1.

Needs ``adlfs`` (``pip install adlfs==2026.8.0``) and Azurite from the npm registry
(``npm install azurite@3.37.0``, which ``make install`` does into ``.venv/azurite``;
``azurite-blob`` there, on PATH, or its path in ``STOKER_AZURITE``);
skipped otherwise. Credentials are Azurite's published development account, handed to adlfs
through ``AZURE_STORAGE_CONNECTION_STRING``, as a user would.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stoker.errors import StorageError
from stoker.storage import open_store
from tests.integration._remote import emulator, epoch_keys, prepare_local

adlfs = pytest.importorskip("adlfs")
_IN_VENV = Path(__file__).resolve().parents[2] / ".venv/azurite/node_modules/.bin/azurite-blob"
AZURITE = (
    os.environ.get("STOKER_AZURITE")
    or shutil.which("azurite-blob")
    or (str(_IN_VENV) if _IN_VENV.exists() else None)
)
pytestmark = pytest.mark.skipif(AZURITE is None, reason="needs azurite-blob (npm azurite)")

#: Azurite's development account (public, documented by Microsoft for the emulator).
ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@pytest.fixture(scope="module")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(connection string, local copy) of a prepared dataset uploaded to ``az://data/ds``."""

    def argv(port: int) -> list[str]:
        return [str(AZURITE), "--blobHost", "127.0.0.1", "--blobPort", str(port),
                "--inMemoryPersistence", "--skipApiVersionCheck", "--silent"]  # fmt: skip

    with emulator(argv, "azurite-blob") as port:
        conn = (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
                f"BlobEndpoint=http://127.0.0.1:{port}/{ACCOUNT};")  # fmt: skip
        local = prepare_local(tmp_path_factory.mktemp("az"), "az", 3, 10)
        fs = adlfs.AzureBlobFileSystem(connection_string=conn)
        fs.mkdir("data")
        fs.put(str(local), "data/ds", recursive=True)
        yield conn, local


@pytest.fixture
def az_env(azurite: tuple[str, Path], monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite[0])
    return azurite[1]


def test_an_epoch_from_azure_blob_storage_with_two_workers_matches_the_local_one(
    az_env: Path,
) -> None:
    keys = epoch_keys("az://data/ds", 2)
    assert len(keys) == 20 and sorted(keys) == sorted(epoch_keys(str(az_env), 0))
    assert epoch_keys("az://data/ds", 0, split="val") == epoch_keys(str(az_env), 0, split="val")


def test_ranged_reads_and_a_missing_object_on_azure(az_env: Path) -> None:
    store: Any = open_store("az://data/ds")
    local = (az_env / "train_1.tar").read_bytes()
    assert store.read_range("train_1.tar", 512, 700) == local[512:1212]
    assert store.size("train_1.tar") == len(local)
    with pytest.raises(StorageError, match=re.escape("az://data/ds/nothing.tar")):
        store.read_range("nothing.tar", 0, 10)
