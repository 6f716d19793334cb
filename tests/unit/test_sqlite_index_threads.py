"""The index reader answers from any thread (a cache pool's threads read through the stores a
dataloader worker opened), not only from the thread that opened it."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.prepare import prepare_dataset
from stoker.format.sqlite_index import SqliteIndexReader
from tests.conftest import write_shard


def test_reader_answers_from_other_threads(tmp_path: Path) -> None:
    for s in range(2):
        write_shard(tmp_path / f"shard_{s}.tar",
                    [(f"s{s}_{i}", {"txt": f"{s}.{i}".encode()}) for i in range(5)])  # fmt: skip
    prepare_dataset(str(tmp_path), split_ratio="1,0,0",
                    dataset_yaml=make_dataset_yaml("TextSample", {"text": "txt"}))  # fmt: skip
    reader = SqliteIndexReader(str(tmp_path / ".nv-meta" / "index.sqlite"))
    here = reader.locate("s1_3")
    assert here is not None and (here.shard_id, here.index) == (1, 3)
    with ThreadPoolExecutor(4) as pool:
        keys = [f"s{s}_{i}" for s in range(2) for i in range(5)] * 4
        found = list(pool.map(reader.locate, keys))
        parts = list(pool.map(lambda loc: reader.parts(loc.shard_id, loc.index), found))
    assert [(loc.shard_id, loc.index) for loc in found[:10]] == [(s, i) for s in range(2)
                                                                 for i in range(5)]  # fmt: skip
    assert all([name for name, _, _ in p] == ["txt"] for p in parts)
    assert reader.count() == 10
    reader.close()
