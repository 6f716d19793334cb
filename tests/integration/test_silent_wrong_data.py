"""Data that used to load silently wrong is found by ``lint`` and refused by ``prepare`` / loading:
a shard listed twice, swapped shards, a part repeated in a sample, a damaged tar header, a
missing dataset.yaml, an empty split, and shard paths that lead outside the dataset."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from stoker import WorkerConfig, get_loader, get_train_dataset, get_val_dataset
from stoker.errors import ConfigError, FormatError
from stoker.format.dataset_config import make_dataset_yaml
from stoker.format.lint import Finding, LintReport, lint_dataset
from stoker.format.prepare import prepare_dataset
from tests.conftest import text_samples, write_shard

SHARDS, PER_SHARD = 3, 4


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """3 prepared shards of 4 text samples, all in train."""
    folder = tmp_path / "ds"
    for s in range(SHARDS):
        write_shard(folder / f"shard_{s:03d}.tar", text_samples(f"s{s}_", PER_SHARD))
    prepare_dataset(
        str(folder),
        split_ratio=[("train", 1.0)],
        dataset_yaml=make_dataset_yaml("TextSample", {"text": "txt"}),
        num_workers=1,
    )
    return folder


def lint(root: Path) -> LintReport:
    return lint_dataset(str(root), num_workers=1)


def errors(report: LintReport) -> list[Finding]:
    found = [f for f in report.findings if f.severity == "error"]
    assert found and not report.ok, [f.message for f in report.findings]
    return found


def write_split(root: Path, split: dict[str, Any]) -> None:
    (root / ".nv-meta/split.yaml").write_text(yaml.safe_dump(split))


def load_all(root: Path, workers: int, **options: Any) -> list[str]:
    wc = WorkerConfig(rank=0, world_size=1, num_workers=workers)
    ds = get_val_dataset(
        str(root), split_part="train", worker_config=wc, batch_size=None, **options
    )
    with get_loader(ds) as loader:
        return [s.__key__ for s in loader]


def header_offset(root: Path, shard: str, sample: int) -> int:
    return int.from_bytes(
        (root / f"{shard}.idx").read_bytes()[8 * sample : 8 * sample + 8], "little"
    )


# -- a shard listed twice, an empty split -------------------------------------------------------


@pytest.mark.parametrize("workers", [0, 2])
def test_shard_listed_twice(root: Path, workers: int) -> None:
    write_split(root, {"split_parts": {"train": ["shard_000.tar", "shard_{000..002}.tar"]}})
    (finding,) = errors(lint(root))
    assert finding.path == ".nv-meta/split.yaml"
    assert "lists shard 'shard_000.tar' more than once" in finding.problem
    with pytest.raises(ConfigError, match=r"lists shard 'shard_000\.tar' more than once"):
        load_all(root, workers)


@pytest.mark.parametrize("workers", [0, 2])
def test_empty_split_is_refused_even_with_repeat(root: Path, workers: int) -> None:
    shards = [f"shard_{s:03d}.tar" for s in range(SHARDS)]
    write_split(root, {"split_parts": {"train": shards}, "exclude": shards})
    wc = WorkerConfig(rank=0, world_size=1, num_workers=workers)
    with pytest.raises(ConfigError, match="split 'train' has no samples: every shard") as info:
        get_train_dataset(
            str(root), worker_config=wc, batch_size=2, shuffle_buffer_size=None,
            max_samples_per_sequence=None, repeat=True,
        )  # fmt: skip
    assert str(info.value.path).endswith("split.yaml")
    keys = [f"shard_000.tar/s0_{i:05d}" for i in range(PER_SHARD)]
    write_split(root, {"split_parts": {"train": ["shard_000.tar"]}, "exclude": keys})
    with pytest.raises(ConfigError, match="no samples"):
        load_all(root, workers)


# -- swapped shards -----------------------------------------------------------------------------


def test_swapped_shards_are_found_by_their_fingerprints(root: Path) -> None:
    stored = json.loads((root / ".nv-meta/.stoker-shards.json").read_text())
    assert sorted(stored["fingerprints"]) == [f"shard_{s:03d}.tar" for s in range(SHARDS)]
    assert lint(root).ok  # same sizes and counts: only the fingerprints tell the shards apart
    a, b = root / "shard_001.tar", root / "shard_002.tar"
    shutil.move(a, root / "tmp.tar")
    shutil.move(b, a)
    shutil.move(root / "tmp.tar", b)
    found = errors(lint(root))
    assert [(f.path, f.key, f.offset) for f in found] == [
        ("shard_001.tar", "s2_00000", 0),
        ("shard_002.tar", "s1_00000", 0),
    ]
    assert "not the one that was prepared" in found[0].problem
    assert found[0].message.startswith("shard_001.tar, sample 's2_00000', byte offset 0:")


# -- a part repeated in one sample --------------------------------------------------------------


def _repeat_a_part(root: Path) -> None:
    """Shard 1's sample 2 gets its ``txt`` part twice instead of ``txt`` + ``json`` (the data
    sizes are kept, so its ``.tar.idx`` stays right)."""
    samples = text_samples("s1_", PER_SHARD)
    key, parts = samples[2]
    members = [(key, {"txt": parts["txt"]}), (key, {"txt": parts["json"]})]
    write_shard(root / "shard_001.tar", [*samples[:2], *members, *samples[3:]])


def test_repeated_part_is_found_by_lint(root: Path) -> None:
    _repeat_a_part(root)
    found = errors(lint(root))
    repeated = [f for f in found if "occurs twice" in f.problem]
    assert [(f.path, f.key) for f in repeated] == [("shard_001.tar", "s1_00002")]
    assert repeated[0].offset is not None and repeated[0].offset > header_offset(
        root, "shard_001.tar", 2
    )


@pytest.mark.parametrize("workers", [0, 2])
def test_repeated_part_fails_loading(root: Path, workers: int) -> None:
    _repeat_a_part(root)
    with pytest.raises(FormatError, match="part 'txt' occurs twice") as info:
        load_all(root, workers)
    assert info.value.key == "s1_00002"
    assert str(info.value.path).endswith("shard_001.tar")
    assert info.value.offset is not None


def test_prepare_refuses_a_repeated_part(tmp_path: Path) -> None:
    folder = tmp_path / "ds"
    write_shard(folder / "a.tar", [("k0", {"txt": b"x"}), ("k0", {"txt": b"y"})])
    with pytest.raises(FormatError, match="part 'txt' occurs twice") as info:
        prepare_dataset(str(folder), split_ratio=[("train", 1.0)], num_workers=1)
    assert (info.value.key, info.value.offset) == ("k0", 1024)


# -- a damaged header checksum ------------------------------------------------------------------


def _damage_header(root: Path, shard: str, sample: int) -> int:
    """Change one byte of the mtime field of the sample's first header; its offset."""
    offset = header_offset(root, shard, sample)
    path = root / shard
    data = bytearray(path.read_bytes())
    data[offset + 140] = ord("7") if data[offset + 140] != ord("7") else ord("6")
    path.write_bytes(bytes(data))
    return offset


def test_bad_header_checksum_is_found_by_lint_and_refused_by_prepare(root: Path) -> None:
    offset = _damage_header(root, "shard_002.tar", 2)
    (finding,) = errors(lint(root))
    assert (finding.path, finding.offset) == ("shard_002.tar", offset)
    assert "checksum" in finding.problem
    with pytest.raises(FormatError, match="checksum") as info:
        prepare_dataset(str(root), split_ratio=[("train", 1.0)], num_workers=1, overwrite=True)
    assert str(info.value.path).endswith("shard_002.tar")
    assert info.value.offset == offset


# -- a missing dataset.yaml ---------------------------------------------------------------------


def test_missing_dataset_yaml(root: Path) -> None:
    (root / ".nv-meta/dataset.yaml").unlink()
    (finding,) = errors(lint(root))
    assert finding.path == ".nv-meta/dataset.yaml"
    assert "does not exist" in finding.problem


# -- shard paths outside the dataset ------------------------------------------------------------


def _point_outside(root: Path, name: str) -> None:
    """Make shard 0 of .info.json and split.yaml read ``name`` instead."""
    info_path = root / ".nv-meta/.info.json"
    info = json.loads(info_path.read_text())
    counts = info["shard_counts"]
    first = next(iter(counts))  # shard 0, under whatever name it has now
    info["shard_counts"] = {name: counts.pop(first), **counts}
    info_path.write_text(json.dumps(info))
    write_split(root, {"split_parts": {"train": [name, "shard_{001..002}.tar"]}})


@pytest.mark.parametrize("workers", [0, 2])
def test_paths_outside_the_dataset_are_refused(
    root: Path, workers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = root.parent / "outside"
    outside.mkdir()
    shutil.copy(root / "shard_000.tar", outside / "evil.tar")
    shutil.copy(root / "shard_000.tar.idx", outside / "evil.tar.idx")
    for name in ("../outside/evil.tar", str(outside / "evil.tar")):
        _point_outside(root, name)
        with pytest.raises(ConfigError, match="leads outside the dataset folder") as info:
            load_all(root, workers)
        assert str(info.value.path).endswith(".info.json")
        assert "STOKER_ALLOW_OUTSIDE_PATHS=1" in (info.value.hint or "")
        (finding,) = errors(lint(root))
        assert "leads outside the dataset folder" in finding.problem
        assert len(load_all(root, workers, allow_outside_paths=True)) == SHARDS * PER_SHARD
        monkeypatch.setenv("STOKER_ALLOW_OUTSIDE_PATHS", "1")
        assert len(load_all(root, workers)) == SHARDS * PER_SHARD
        monkeypatch.delenv("STOKER_ALLOW_OUTSIDE_PATHS")
        _point_outside(root, "shard_000.tar")


def test_fingerprints_of_an_earlier_prepare_are_ignored(root: Path) -> None:
    """Prepared again by another tool (a new index.uuid): the old fingerprints no longer say
    which shard is which, so lint checks without them instead of reporting every shard."""
    (root / "shard_001.tar").write_bytes((root / "shard_002.tar").read_bytes())
    (root / ".nv-meta/index.uuid").write_text("prepared-again")
    duplicates = [f for f in errors(lint(root)) if "duplicate" in f.problem]
    assert len(errors(lint(root))) == len(duplicates) == PER_SHARD  # no fingerprint findings
