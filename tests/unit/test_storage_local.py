"""LocalStore.read_bytes reads whole files without a Python file object."""

from __future__ import annotations

from pathlib import Path

import pytest

from stoker.errors import StorageError
from stoker.storage.local import LocalStore


@pytest.mark.parametrize("size", [0, 1, 4096, (1 << 16) + 7, 3 << 20])
def test_read_bytes_returns_the_whole_file(tmp_path: Path, size: int) -> None:
    data = bytes(i % 251 for i in range(size))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "f.bin").write_bytes(data)
    assert LocalStore(str(tmp_path)).read_bytes("sub/f.bin") == data


def test_read_bytes_names_a_missing_file_and_a_folder(tmp_path: Path) -> None:
    store = LocalStore(str(tmp_path))
    with pytest.raises(StorageError, match="file not found") as missing:
        store.read_bytes("nope.idx")
    assert "nope.idx" in str(missing.value)
    (tmp_path / "folder").mkdir()
    with pytest.raises(StorageError, match="folder") as folder:
        store.read_bytes("folder")
    assert "Is a directory" in str(folder.value)
