"""The join index: key matching against a dict reference, collision fallback, caching."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from stoker.format import join_index as ji


def reference(primary: ji.KeyTable, total: int, partner: ji.KeyTable) -> list[int]:
    where = dict(zip(partner.keys, partner.positions.tolist(), strict=True))
    out = [-1] * total
    for key, pos in zip(primary.keys, primary.positions.tolist(), strict=True):
        out[pos] = where.get(key, -1)
    return out


def tables(n: int, seed: int) -> tuple[ji.KeyTable, ji.KeyTable]:
    rng = np.random.default_rng(seed)
    keys = [f"key/{i:06d}" for i in rng.permutation(2 * n)]
    primary = ji.KeyTable(keys[:n], rng.permutation(n).astype(np.int64))
    shared = keys[n // 2 : n // 2 + n]  # half of the primary's keys, plus others
    partner = ji.KeyTable(shared, rng.permutation(n).astype(np.int64))
    return primary, partner


def test_match_of_10k_keys_agrees_with_a_dict() -> None:
    primary, partner = tables(10_000, seed=1)
    got = ji.match(primary, 10_000, partner)
    assert got.tolist() == reference(primary, 10_000, partner)
    assert int((got >= 0).sum()) == 5_000


def test_hash_collisions_fall_back_to_exact_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    primary, partner = tables(500, seed=2)
    monkeypatch.setattr(ji, "_hashes", lambda keys: np.zeros(len(keys), np.int64))
    assert ji.match(primary, 500, partner).tolist() == reference(primary, 500, partner)


def test_empty_partner_matches_nothing() -> None:
    primary, _ = tables(10, seed=3)
    empty = ji.KeyTable([], np.zeros(0, np.int64))
    assert ji.match(primary, 10, empty).tolist() == [-1] * 10


def test_cache_key_covers_every_input() -> None:
    base = ("/d", "train", "split.yaml", b"fp")
    keys = {
        ji.cache_key([base]),
        ji.cache_key([("/e", *base[1:])]),
        ji.cache_key([("/d", "val", *base[2:])]),
        ji.cache_key([("/d", "train", "other.yaml", b"fp")]),
        ji.cache_key([(*base[:3], b"fp2")]),
        ji.cache_key([base, base]),
    }
    assert len(keys) == 6


def test_saved_index_loads_only_with_its_key_and_shape(tmp_path: Path) -> None:
    path = ji.cache_path(str(tmp_path / "mds.yaml"), "abc")
    assert path == str(tmp_path / "mds.yaml.cache" / "stoker_join_abc.npz")
    locations = np.arange(6, dtype=np.int64).reshape(2, 3)
    ji.save_index(path, "abc", locations)
    loaded = ji.load_index(path, "abc", (2, 3))
    assert loaded is not None and loaded.tolist() == locations.tolist()
    assert ji.load_index(path, "abd", (2, 3)) is None
    assert ji.load_index(path, "abc", (2, 4)) is None
    Path(path).write_bytes(b"garbage")
    assert ji.load_index(path, "abc", (2, 3)) is None
    assert [p.name for p in (tmp_path / "mds.yaml.cache").iterdir()] == ["stoker_join_abc.npz"]
    (tmp_path / "mds.yaml.cache" / "join_index_0.bin").write_bytes(b"not stoker's")
    assert ji.cached_indexes(str(tmp_path / "mds.yaml")) == [path]
    assert ji.cached_indexes(str(tmp_path / "other.yaml")) == []
