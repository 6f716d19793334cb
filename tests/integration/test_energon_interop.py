"""Interoperability with the real Megatron-Energon, both directions.

stoker -> Energon: a dataset prepared by stoker is loaded, linted and summarised by Energon.
Energon -> stoker: what ``energon prepare`` writes is read by stoker's format layer and equals,
byte for byte or row for row, what ``stoker prepare`` writes for the same shards.

Energon runs in subprocesses: it imports torch and emits warnings, which pytest turns into errors.
"""

from __future__ import annotations

import io
import json
import shutil
import sqlite3
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

import braceexpand
import pytest
import yaml

from stoker.format.dataset_config import FieldAccess, make_dataset_yaml, read_dataset_config
from stoker.format.jsonl import index_jsonl
from stoker.format.meta import is_prepared, read_info, read_split_config
from stoker.format.prepare import prepare_dataset, split_by_ratio
from stoker.format.shard_scan import scan_shard
from stoker.format.sqlite_index import SqliteIndexReader
from stoker.format.tar_index import decode_offsets, encode_offsets
from stoker.storage import open_store

pytest.importorskip("megatron.energon")
Image = pytest.importorskip("PIL.Image")

pytestmark = pytest.mark.energon

PROBE = Path(__file__).with_name("energon_probe.py")
ENERGON = [sys.executable, "-m", "megatron.energon.cli.main"]
SHARDS = 3
SAMPLES_PER_SHARD = 7
FIELD_MAP = {"image": "jpg", "caption": "txt"}
#: Decoded JPEG colours of a solid image stay within this of the colour encoded.
COLOUR_TOLERANCE = 4.0
#: One tar format per shard: ustar (long names split into prefix + name), GNU ('L' records), pax.
TAR_FORMATS = (tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT)


@dataclass(frozen=True)
class Expected:
    """What a sample written by :func:`write_shards` must load as."""

    shard: str
    key: str
    caption: str
    colour: tuple[int, int, int]
    size: tuple[int, int]  # (width, height)


def _sample_key(shard: int, i: int) -> str:
    if shard == 0 and i == 2:  # a subfolder, whose long name needs the ustar prefix field
        return f"{'p' * 60}/{'q' * 50}/s0_02"
    if shard == 0 and i == 4:
        return "sub/s0_04"
    if shard in (1, 2) and i == 3:  # > 100 characters: a GNU long name, then a pax path
        return f"long_{'x' * 110}_{shard}"
    return f"s{shard}_{i:02d}"


def _jpeg(colour: tuple[int, int, int], size: tuple[int, int]) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, format="JPEG", quality=95)
    return buf.getvalue()


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 1_700_000_000
    tar.addfile(info, io.BytesIO(data))


def write_shards(folder: Path) -> list[Expected]:
    """3 shards x 7 samples of a solid-colour JPEG and a unique caption; a few odd members."""
    folder.mkdir(parents=True)
    expected = []
    for shard in range(SHARDS):
        name = f"shard_{shard:03d}.tar"
        with tarfile.open(folder / name, "w", format=TAR_FORMATS[shard]) as tar:
            if shard == 2:  # meta members belong to no sample
                _add(tar, "__meta__/info.txt", b"not a sample")
            for i in range(SAMPLES_PER_SHARD):
                g = shard * SAMPLES_PER_SHARD + i
                key = _sample_key(shard, i)
                if key.startswith("sub/"):
                    folder_info = tarfile.TarInfo("sub")
                    folder_info.type = tarfile.DIRTYPE
                    tar.addfile(folder_info)  # a directory member, skipped by both
                colour = ((g * 12) % 256, 255 - (g * 12) % 256, (g * 37) % 256)
                size = (16 + 8 * (g % 3), 16 + 8 * (g % 2))
                caption = f"caption {g}: {key[-12:]}"
                _add(tar, f"{key}.jpg", _jpeg(colour, size))
                _add(tar, f"{key}.txt", caption.encode())
                if i == 5:
                    _add(tar, f"{key}.json", json.dumps({"g": g}).encode())
                expected.append(Expected(name, key, caption, colour, size))
    return expected


def run(args: list[str], cwd: Path | None = None, timeout: float = 120) -> str:
    """Run a command; fail the test with its output if it exits non-zero."""
    proc = subprocess.run(args, capture_output=True, text=True, cwd=cwd, timeout=timeout)
    if proc.returncode != 0:
        pytest.fail(f"{args} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def energon_prepare(path: Path, *extra: str) -> None:
    run(
        [
            *ENERGON,
            "prepare",
            str(path),
            "--non-interactive",
            "--no-progress",
            "--num-workers",
            "2",
            "--sample-type",
            "CaptioningSample",
            "--field-map",
            json.dumps(FIELD_MAP),
            *extra,
        ]
    )


def table(db: Path, name: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return sorted(conn.execute(f"SELECT * FROM {name}").fetchall(), key=repr)


# --- stoker -> Energon -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stoker_prepared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Expected]]:
    path = tmp_path_factory.mktemp("stoker-to-energon") / "ds"
    expected = write_shards(path)
    prepare_dataset(
        str(path),
        split_ratio="1,1,1",
        num_workers=2,
        dataset_yaml=make_dataset_yaml("CaptioningSample", FIELD_MAP),
    )
    return path, expected


def test_energon_loads_every_stoker_sample_once(
    stoker_prepared: tuple[Path, list[Expected]],
) -> None:
    path, expected = stoker_prepared
    out = run([sys.executable, str(PROBE), str(path), "train", "val", "test"])
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    split_of_shard = {"shard_000.tar": "train", "shard_001.tar": "val", "shard_002.tar": "test"}

    seen = [(row["split"], row["key"]) for row in rows]
    assert sorted(seen) == sorted((split_of_shard[e.shard], e.key) for e in expected)
    by_key = {row["key"]: row for row in rows}
    for e in expected:
        row = by_key[e.key]
        assert row["caption"] == e.caption, e.key
        assert row["shape"] == [3, e.size[1], e.size[0]], e.key
        for got, want in zip(row["mean"], e.colour, strict=True):
            assert abs(got - want) <= COLOUR_TOLERANCE, (e.key, row["mean"], e.colour)


def test_energon_lint_passes_on_stoker_dataset(
    stoker_prepared: tuple[Path, list[Expected]],
) -> None:
    path, _ = stoker_prepared
    out = run([*ENERGON, "lint", str(path)])
    assert "Error" not in out


def test_energon_info_summarises_stoker_dataset(
    stoker_prepared: tuple[Path, list[Expected]],
) -> None:
    path, _ = stoker_prepared
    out = run([*ENERGON, "info", str(path)])
    assert "21 samples" in out
    assert "in 3 shards" in out
    assert "CaptioningSample" in out
    for split in ("train", "val", "test"):
        assert f"`{split}`: 33%, 7 samples in 1 shards" in out


# --- Energon -> stoker -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def both_prepared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[Expected]]:
    """The same raw shards prepared once by Energon and once by stoker (ratio split 1,1,1)."""
    root = tmp_path_factory.mktemp("energon-to-stoker")
    expected = write_shards(root / "raw")
    energon_path, stoker_path = root / "energon", root / "stoker"
    shutil.copytree(root / "raw", energon_path)
    shutil.copytree(root / "raw", stoker_path)
    energon_prepare(energon_path, "--split-ratio", "1,1,1")
    prepare_dataset(
        str(stoker_path),
        split_ratio="1,1,1",
        num_workers=2,
        dataset_yaml=make_dataset_yaml("CaptioningSample", FIELD_MAP),
    )
    return energon_path, stoker_path, expected


def test_energon_info_matches_stoker_scan(
    both_prepared: tuple[Path, Path, list[Expected]],
) -> None:
    energon_path, _, expected = both_prepared
    store = open_store(str(energon_path))
    info = read_info(store)
    assert info.writer is not None
    assert info.writer != "stoker"
    assert list(info.shard_counts) == [f"shard_{i:03d}.tar" for i in range(SHARDS)]
    for name, count in info.shard_counts.items():
        scan = scan_shard(store, name)
        assert count == len(scan.keys) == SAMPLES_PER_SHARD
        assert scan.keys == [e.key for e in expected if e.shard == name]


def test_energon_split_membership(both_prepared: tuple[Path, Path, list[Expected]]) -> None:
    energon_path, _, _ = both_prepared
    store = open_store(str(energon_path))
    raw = yaml.safe_load((energon_path / ".nv-meta" / "split.yaml").read_text())
    config = read_split_config(store)
    assert set(config.split_parts) == set(raw["split_parts"]) == {"train", "val", "test"}
    for split, patterns in raw["split_parts"].items():
        declared = [n for p in patterns for n in braceexpand.braceexpand(p)]
        assert config.shards(split) == declared
    shards = list(read_info(store).shard_counts)
    ratios = [("train", 1.0), ("val", 1.0), ("test", 1.0)]
    assert {s: config.shards(s) for s in config.split_parts} == split_by_ratio(shards, ratios, None)


def test_tar_idx_byte_identical(both_prepared: tuple[Path, Path, list[Expected]]) -> None:
    energon_path, stoker_path, _ = both_prepared
    store = open_store(str(energon_path))
    for i in range(SHARDS):
        name = f"shard_{i:03d}.tar"
        energon_idx = (energon_path / f"{name}.idx").read_bytes()
        assert energon_idx == (stoker_path / f"{name}.idx").read_bytes(), name
        offsets = decode_offsets(energon_idx, name)
        scan = scan_shard(store, name)
        assert offsets.tolist() == scan.offsets
        assert len(offsets) == SAMPLES_PER_SHARD + 1
        assert encode_offsets(offsets) == energon_idx


def test_sqlite_rows_identical(both_prepared: tuple[Path, Path, list[Expected]]) -> None:
    energon_path, stoker_path, expected = both_prepared
    energon_db = energon_path / ".nv-meta" / "index.sqlite"
    stoker_db = stoker_path / ".nv-meta" / "index.sqlite"
    for name in ("samples", "sample_parts"):
        energon_rows = table(energon_db, name)
        assert energon_rows, name
        assert energon_rows == table(stoker_db, name), name

    reader = SqliteIndexReader(str(energon_db))
    try:
        assert reader.count() == len(expected)
        assert reader.duplicate_keys() == []
        assert reader.shard_counts() == dict.fromkeys(range(SHARDS), SAMPLES_PER_SHARD)
        long_key = _sample_key(1, 3)
        where = reader.locate(long_key)
        assert where is not None
        assert (where.shard_id, where.index) == (1, 3)
        offsets = decode_offsets((energon_path / "shard_001.tar.idx").read_bytes(), "idx")
        assert where.byte_offset == offsets[3]
        assert where.byte_size == offsets[4] - offsets[3]
        parts = reader.parts(1, 3)
        assert [p[0] for p in parts] == ["jpg", "txt"]
        with tarfile.open(energon_path / "shard_001.tar") as tar:
            member = tar.getmember(f"{long_key}.txt")
            assert parts[1][1:] == (member.offset_data, member.size)
    finally:
        reader.close()


def test_energon_dataset_yaml_parses(both_prepared: tuple[Path, Path, list[Expected]]) -> None:
    energon_path, _, _ = both_prepared
    config = read_dataset_config(open_store(str(energon_path)))
    assert config.sample_type == "CaptioningSample"
    assert not config.is_crude
    assert config.field_map == {"image": [FieldAccess("jpg")], "caption": [FieldAccess("txt")]}
    assert config.parts_used() == {"jpg", "txt"}


def test_pattern_split_matches_energon(tmp_path: Path) -> None:
    """``--split-parts`` regexes: both write splits that expand to the same shards."""
    write_shards(tmp_path / "energon")
    shutil.copytree(tmp_path / "energon", tmp_path / "stoker")
    patterns = [("train", "shard_00[01]"), ("val", "shard_00{2,3}")]
    energon_prepare(tmp_path / "energon", *(f"--split-parts={n}:{p}" for n, p in patterns))
    prepare_dataset(str(tmp_path / "stoker"), split_parts=patterns, num_workers=1)
    energon = read_split_config(open_store(str(tmp_path / "energon")))
    stoker = read_split_config(open_store(str(tmp_path / "stoker")))
    assert energon.shards("train") == ["shard_000.tar", "shard_001.tar"]
    assert energon.shards("val") == ["shard_002.tar"]
    for split in ("train", "val"):
        assert stoker.shards(split) == energon.shards(split)


def test_shard_discovery_matches_energon(tmp_path: Path) -> None:
    """Same shards, same order (= tar_file_id and ratio split) as ``energon prepare``."""
    raw = tmp_path / "raw"
    for i, name in enumerate(["a.tar", "a-b.tar", "a/b.tar", ".cache/c.tar", "z.tar"]):
        (raw / name).parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(raw / name, "w") as tar:
            _add(tar, f"k{i}.txt", b"x")
    (raw / "original.tar.gz").write_bytes(b"\x1f\x8b not a shard of the dataset")
    shutil.copytree(raw, tmp_path / "energon")
    shutil.copytree(raw, tmp_path / "stoker")
    energon_prepare(tmp_path / "energon", "--split-ratio", "1,0,0", "--skip-dataset-yaml")
    energon = read_info(open_store(str(tmp_path / "energon")))
    assert list(energon.shard_counts) == ["a/b.tar", "a-b.tar", "a.tar", "z.tar"]
    prepare_dataset(str(tmp_path / "stoker"), split_ratio="1,0,0", num_workers=1)
    stoker = read_info(open_store(str(tmp_path / "stoker")))
    assert list(stoker.shard_counts) == list(energon.shard_counts)


# --- JSONL and legacy info -----------------------------------------------------------------------

JSONL_CASES = {
    # blank lines in the middle and at the end (the case the CLI runs)
    "blank_middle_end": b'{"a": 1}\n{"a": 2}\n\n\n{"a": 3}\n\n\n',
    "leading_blank": b'\n\n{"a": 1}\n{"a": 2}\n',
    "whitespace_lines": b'{"a": 1}\n   \n\t\n  {"a": 2}  \n{"a": 3}',
    "crlf": b'{"a": 1}\r\n\r\n{"a": 2}\r\n',
    "single_no_newline": b'{"only": true}',
}


def test_jsonl_idx_identical_to_energon(tmp_path: Path) -> None:
    for name, data in JSONL_CASES.items():
        (tmp_path / f"{name}.jsonl").write_bytes(data)
    # The CLI for the main case, Energon's own function (what the CLI calls) for the rest.
    run([*ENERGON, "prepare", str(tmp_path / "blank_middle_end.jsonl")])
    others = [str(tmp_path / f"{name}.jsonl") for name in JSONL_CASES if name != "blank_middle_end"]
    script = (
        "import sys\n"
        "from megatron.energon.flavors.jsonl.jsonl_prepare import JsonlPreparator\n"
        "for path in sys.argv[1:]:\n"
        "    JsonlPreparator.prepare_dataset(path)\n"
    )
    run([sys.executable, "-c", script, *others])
    for name, data in JSONL_CASES.items():
        energon_idx = (tmp_path / f"{name}.jsonl.idx").read_bytes()
        assert encode_offsets(index_jsonl(data, name)) == energon_idx, name
        offsets = decode_offsets(energon_idx, name)
        assert offsets[-1] == len(data)


def test_legacy_info_yaml(tmp_path: Path) -> None:
    meta = tmp_path / ".nv-meta"
    meta.mkdir()
    (meta / ".info.yaml").write_text(
        "energon_version: 2.0.0\nshard_counts:\n  parts/a_000.tar: 12\n  parts/a_001.tar: 3\n"
    )
    store = open_store(str(tmp_path))
    assert is_prepared(store)
    info = read_info(store)
    assert info.shard_counts == {"parts/a_000.tar": 12, "parts/a_001.tar": 3}
    assert list(info.shard_counts) == ["parts/a_000.tar", "parts/a_001.tar"]
    assert info.writer == "2.0.0"
    assert info.total_samples == 15
