"""``pack``: grouping and key rules, shard limits, determinism, JSONL, overwrite and atomicity."""

from __future__ import annotations

import dataclasses
import json
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stoker.cli.pack import SizeParam
from stoker.errors import ConfigError, FormatError, StorageError
from stoker.format import pack as pack_module
from stoker.format.pack import (
    collect_samples,
    pack,
    plan_shards,
    sample_tar_bytes,
    shard_file_bytes,
)
from stoker.format.pack.manifest import MANIFEST
from stoker.format.prepare import TMP_MARK
from stoker.format.tar import split_name


def write(root: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path -> bytes)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def members(shard: Path) -> dict[str, bytes]:
    with tarfile.open(shard) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]


def numbered(root: Path, count: int, size: int = 10) -> Path:
    """``count`` samples ``000000.bin`` + ``000000.txt`` with distinct contents."""
    files = {}
    for i in range(count):
        files[f"{i:06d}.bin"] = bytes([i % 256]) * size
        files[f"{i:06d}.txt"] = f"caption {i}".encode()
    return write(root, files)


@pytest.fixture
def src(tmp_path: Path) -> Path:
    return write(
        tmp_path / "src",
        {
            "sub/000001.png": b"png-1",
            "sub/000001.txt": b"text-1",
            "sub/000002.png": b"png-2",
            "a.seg.png": b"seg",
            "a.json": b"{}",
            "v1.0/x.txt": b"dotted folder",
            ".hidden.txt": b"hidden",
            ".git/config": b"hidden folder",
            "README": b"no extension",
            "__meta__.json": b"a sample",
            "__pycache__/m.pyc": b"reserved",
        },
    )


def test_grouping_and_key_rules(src: Path) -> None:
    samples, skipped = collect_samples(str(src))
    assert [s.key for s in samples] == ["__meta__", "a", "sub/000001", "sub/000002", "v1.0/x"]
    assert [p.name for p in samples[1].parts] == ["json", "seg.png"]
    assert [p.name for p in samples[2].parts] == ["png", "txt"]
    reasons = {s.path: s.reason for s in skipped}
    assert set(reasons) == {".git/", ".hidden.txt", "README", "__pycache__/m.pyc"}
    assert "hidden" in reasons[".hidden.txt"]
    assert "extension" in reasons["README"]


def test_member_names_split_back_to_key_and_part(src: Path, tmp_path: Path) -> None:
    report = pack(str(src), str(tmp_path / "out"), samples_per_shard=2)
    names = [n for shard in report.shards for n in members(tmp_path / "out" / shard)]
    split = [split_name(n) for n in names]
    assert None not in split
    keys = [s[0] for s in split if s is not None]
    assert sorted(set(keys)) == ["__meta__", "a", "sub/000001", "sub/000002", "v1.0/x"]
    assert all("." not in key.rpartition("/")[2] for key in keys)
    assert members(tmp_path / "out" / report.shards[0])["a.seg.png"] == b"seg"
    assert report.samples == 5
    assert report.part_names == ["json", "png", "seg.png", "txt"]


def test_samples_per_shard(tmp_path: Path) -> None:
    report = pack(str(numbered(tmp_path / "src", 10)), str(tmp_path / "out"), samples_per_shard=3)
    assert report.shards == [f"shard-{i:06d}.tar" for i in range(4)]
    counts = [len(members(tmp_path / "out" / s)) // 2 for s in report.shards]
    assert counts == [3, 3, 3, 1]
    assert report.bytes == sum((tmp_path / "out" / s).stat().st_size for s in report.shards)


def test_default_is_1000_samples_per_shard(tmp_path: Path) -> None:
    report = pack(str(numbered(tmp_path / "src", 1001, size=1)), str(tmp_path / "out"))
    assert len(report.shards) == 2
    assert len(members(tmp_path / "out" / report.shards[1])) == 2


def test_max_shard_bytes(tmp_path: Path) -> None:
    src = numbered(tmp_path / "src", 12, size=3000)
    (src / "000005.bin").write_bytes(b"x" * 100_000)  # larger than a shard: gets its own
    limit = 20 * 1024
    report = pack(str(src), str(tmp_path / "out"), max_shard_bytes=limit)
    sizes = {s: (tmp_path / "out" / s).stat().st_size for s in report.shards}
    big = [s for s in report.shards if "000005.bin" in members(tmp_path / "out" / s)]
    assert len(big) == 1
    assert len(members(tmp_path / "out" / big[0])) == 2
    assert all(size <= limit for shard, size in sizes.items() if shard != big[0])
    assert len(report.shards) >= 4
    assert report.samples == 12


def test_both_limits_close_at_the_first_reached(tmp_path: Path) -> None:
    src = numbered(tmp_path / "src", 9, size=3000)
    by_count = pack(str(src), str(tmp_path / "a"), samples_per_shard=2, max_shard_bytes=10**9)
    by_bytes = pack(str(src), str(tmp_path / "b"), samples_per_shard=100, max_shard_bytes=20480)
    assert len(by_count.shards) == 5
    assert len(by_bytes.shards) > 1
    assert all((tmp_path / "b" / s).stat().st_size <= 20480 for s in by_bytes.shards)


def test_planned_sizes_are_exact(tmp_path: Path) -> None:
    long_name = "d/" + "x" * 150  # needs a pax header
    src = write(tmp_path / "src", {f"{long_name}.txt": b"1" * 700, "é/ü.png": b"2", "k.bin": b""})
    samples, _ = collect_samples(str(src))
    report = pack(str(src), str(tmp_path / "out"))
    shard = tmp_path / "out" / report.shards[0]
    assert shard.stat().st_size == shard_file_bytes(sum(sample_tar_bytes(s) for s in samples))
    assert members(shard)[f"{long_name}.txt"] == b"1" * 700
    assert members(shard)["é/ü.png"] == b"2"


@given(
    sizes=st.lists(st.integers(min_value=512, max_value=50_000), max_size=60),
    per_shard=st.none() | st.integers(min_value=1, max_value=10),
    max_bytes=st.none() | st.integers(min_value=1, max_value=200_000),
)
def test_plan_shards_properties(
    sizes: list[int], per_shard: int | None, max_bytes: int | None
) -> None:
    ends = plan_shards(sizes, per_shard, max_bytes)
    starts = [0, *ends][: len(ends)]
    assert (ends[-1] if ends else 0) == len(sizes)
    assert all(end > start for start, end in zip(starts, ends, strict=True))
    for start, end in zip(starts, ends, strict=True):
        if per_shard is not None:
            assert end - start <= per_shard
        if max_bytes is not None and end - start > 1:
            assert shard_file_bytes(sum(sizes[start:end])) <= max_bytes


def test_deterministic_bytes_and_headers(src: Path, tmp_path: Path) -> None:
    first = pack(str(src), str(tmp_path / "one"), samples_per_shard=2)
    (src / "sub/000001.png").touch()  # a new mtime must not change the output
    second = pack(str(src), str(tmp_path / "two"), samples_per_shard=2)
    assert first.shards == second.shards
    assert snapshot(tmp_path / "one") == snapshot(tmp_path / "two")
    with tarfile.open(tmp_path / "one" / first.shards[0]) as tar:
        for m in tar.getmembers():
            assert (m.mtime, m.uid, m.gid, m.uname, m.gname, m.mode) == (0, 0, 0, "", "", 0o644)


def order(report_out: Path, shards: list[str]) -> list[str]:
    keys = []
    for shard in shards:
        for name in members(report_out / shard):
            key = name.rpartition(".")[0]
            if not keys or keys[-1] != key:
                keys.append(key)
    return keys


def test_shuffle_with_seed(tmp_path: Path) -> None:
    src = str(numbered(tmp_path / "src", 30))
    plain = pack(src, str(tmp_path / "plain"), samples_per_shard=7)
    a = pack(src, str(tmp_path / "a"), samples_per_shard=7, shuffle=True, seed=1)
    b = pack(src, str(tmp_path / "b"), samples_per_shard=7, shuffle=True, seed=1)
    c = pack(src, str(tmp_path / "c"), samples_per_shard=7, shuffle=True, seed=2)
    sorted_keys = [f"{i:06d}" for i in range(30)]
    assert order(tmp_path / "plain", plain.shards) == sorted_keys
    order_a = order(tmp_path / "a", a.shards)
    assert sorted(order_a) == sorted_keys
    assert order_a != sorted_keys
    assert order_a == order(tmp_path / "b", b.shards)
    assert order_a != order(tmp_path / "c", c.shards)


def test_jsonl_input(tmp_path: Path) -> None:
    lines = [b'{"a": 1}', b"", b'  {"b": [2, 3]}  ', b'"text"\r']
    path = tmp_path / "data.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n\n")
    report = pack(str(path), str(tmp_path / "out"), samples_per_shard=2)
    got: dict[str, bytes] = {}
    for shard in report.shards:
        got |= members(tmp_path / "out" / shard)
    assert got == {
        "00000001.json": b'{"a": 1}',
        "00000003.json": b'  {"b": [2, 3]}  ',
        "00000004.json": b'"text"',
    }
    assert report.samples == 3
    assert report.part_names == ["json"]
    assert len(report.shards) == 2


def test_bad_jsonl_line_names_file_line_and_offset(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"ok": 1}\n\n{"broken": \n{"ok": 2}\n')
    with pytest.raises(FormatError) as info:
        pack(str(path), str(tmp_path / "out"))
    assert info.value.path == str(path)
    assert info.value.offset == 11
    assert "line 3" in info.value.message
    assert "byte offset 11" in info.value.message
    assert not (tmp_path / "out").exists()


def test_links_and_special_files(src: Path, tmp_path: Path) -> None:
    (src / "linked").symlink_to(src / "sub", target_is_directory=True)
    (src / "broken.txt").symlink_to(tmp_path / "missing.txt")
    (src / "file-link.txt").symlink_to(src / "sub" / "000001.txt")
    samples, skipped = collect_samples(str(src))
    reasons = {s.path: s.reason for s in skipped}
    assert "not followed" in reasons["linked/"]
    assert "broken link" in reasons["broken.txt"]
    assert "file-link" in [s.key for s in samples]


def test_skipped_files_are_reported(src: Path, tmp_path: Path) -> None:
    report = pack(str(src), str(tmp_path / "out"))
    assert sorted(s.path for s in report.skipped) == [
        ".git/",
        ".hidden.txt",
        "README",
        "__pycache__/m.pyc",
    ]
    names = members(tmp_path / "out" / report.shards[0])
    assert not any("hidden" in n or "README" in n or "pycache" in n for n in names)


def test_overwrite_refused_then_replaces(src: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    pack(str(numbered(tmp_path / "other", 5)), str(out), samples_per_shard=1)
    write(out, {"shard-000004.tar.idx": b"idx", ".nv-meta/.info.json": b"{}", "notes.md": b"keep"})
    before = snapshot(out)
    with pytest.raises(ConfigError, match="already holds 5 shard") as info:
        pack(str(src), str(out))
    assert "--force-overwrite" in (info.value.hint or "")
    assert snapshot(out) == before
    report = pack(str(src), str(out), overwrite=True)
    assert sorted(snapshot(out)) == [MANIFEST, "notes.md", "shard-000000.tar"]
    assert report.shards == ["shard-000000.tar"]


def test_meta_folder_alone_also_needs_overwrite(src: Path, tmp_path: Path) -> None:
    out = write(tmp_path / "out", {".nv-meta/split.yaml": b"split_parts: {}"})
    with pytest.raises(ConfigError, match=r"\.nv-meta"):
        pack(str(src), str(out))


def failing_after_first(exc: BaseException) -> Callable[..., None]:
    real = pack_module._write_shard
    calls = []

    def fake(*args: Any, **kwargs: Any) -> None:
        if calls:
            raise exc
        calls.append(1)
        real(*args, **kwargs)

    return fake


@pytest.mark.parametrize("exc", [OSError("disk full"), KeyboardInterrupt()])
def test_failure_leaves_out_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exc: BaseException
) -> None:
    src = str(numbered(tmp_path / "src", 6))
    out = tmp_path / "out"
    pack(str(numbered(tmp_path / "old", 2)), str(out), samples_per_shard=1)
    before = snapshot(out)
    monkeypatch.setattr(pack_module, "_write_shard", failing_after_first(exc))
    with pytest.raises(type(exc)):
        pack(src, str(out), samples_per_shard=2, overwrite=True)
    assert snapshot(out) == before
    with pytest.raises(type(exc)):
        pack(src, str(tmp_path / "new"), samples_per_shard=2)
    assert not (tmp_path / "new").exists()


def test_file_vanishing_midway_is_a_storage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = numbered(tmp_path / "src", 4)
    real = pack_module.collect_samples

    def collect_then_delete(path: str) -> Any:
        result = real(path)
        (src / "000002.txt").unlink()
        return result

    monkeypatch.setattr(pack_module, "collect_samples", collect_then_delete)
    with pytest.raises(StorageError) as info:
        pack(str(src), str(tmp_path / "out"), samples_per_shard=1)
    assert info.value.key == "000002"
    assert (info.value.path or "").endswith("000002.txt")
    assert not (tmp_path / "out").exists()
    assert not any(TMP_MARK in p.name for p in tmp_path.rglob("*"))


def test_source_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        pack(str(tmp_path / "missing"), str(tmp_path / "out"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="no samples found") as info:
        pack(str(tmp_path / "empty"), str(tmp_path / "out"))
    assert "000001.jpg" in (info.value.hint or "")
    write(tmp_path / "only-skipped", {"README": b"x", ".DS_Store": b"y"})
    with pytest.raises(ConfigError, match=r"2 file\(s\) skipped"):
        pack(str(tmp_path / "only-skipped"), str(tmp_path / "out"))
    (tmp_path / "data.csv").write_text("a,b\n")
    with pytest.raises(ConfigError, match=r"neither a folder nor a \.jsonl"):
        pack(str(tmp_path / "data.csv"), str(tmp_path / "out"))
    (tmp_path / "blank.jsonl").write_text("\n \n")
    with pytest.raises(ConfigError, match="no samples"):
        pack(str(tmp_path / "blank.jsonl"), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_option_errors(src: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="samples_per_shard=0"):
        pack(str(src), str(tmp_path / "out"), samples_per_shard=0)
    with pytest.raises(ConfigError, match="max_shard_bytes=-1"):
        pack(str(src), str(tmp_path / "out"), max_shard_bytes=-1)
    with pytest.raises(ConfigError, match="shard_prefix"):
        pack(str(src), str(tmp_path / "out"), shard_prefix="a/b-")
    with pytest.raises(ConfigError, match="inside it"):
        pack(str(src), str(src / "shards"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="not a folder"):
        pack(str(src), str(tmp_path / "file"))
    assert not (tmp_path / "out").exists()
    assert not (src / "shards").exists()


def test_shard_prefix_and_progress(
    src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = pack(str(src), str(tmp_path / "out"), shard_prefix="train-", progress=True)
    assert report.shards == ["train-000000.tar"]
    assert (tmp_path / "out/train-000000.tar").exists()
    assert "Packing" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1000000", 10**6), ("500MB", 500 * 10**6), ("500M", 500 * 10**6), ("1GiB", 2**30),
     ("1.5 GB", 1_500_000_000), ("64KiB", 65536), ("10b", 10)],
)  # fmt: skip
def test_size_param(text: str, expected: int) -> None:
    assert SizeParam().convert(text, None, None) == expected


@pytest.mark.parametrize("text", ["", "MB", "1 XB", "-5MB", "1iB"])
def test_size_param_rejects(text: str) -> None:
    with pytest.raises(click.BadParameter, match="not a size"):
        SizeParam().convert(text, None, None)


def test_report_is_json_serialisable(src: Path, tmp_path: Path) -> None:
    report = pack(str(src), str(tmp_path / "out"))
    data = json.loads(json.dumps(dataclasses.asdict(report)))
    assert data["samples"] == 5
    assert data["skipped"][0] == {
        "path": ".git/",
        "reason": "hidden folder",
    }


def test_first_fit_decreasing_matches_the_simple_algorithm() -> None:
    import random

    from stoker import first_fit_decreasing

    def simple(lengths: list[int], capacity: int) -> list[list[int]]:
        bins: list[list[int]] = []
        free: list[int] = []
        for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
            if lengths[i] > capacity:
                continue
            for b, space in enumerate(free):
                if lengths[i] <= space:
                    bins[b].append(i)
                    free[b] -= lengths[i]
                    break
            else:
                bins.append([i])
                free.append(capacity - lengths[i])
        return bins

    rng = random.Random(0)
    for n in (0, 1, 2, 7, 100, 513):
        lengths = [rng.randint(1, 120) for _ in range(n)]
        assert first_fit_decreasing(lengths, 100) == simple(lengths, 100)
    assert first_fit_decreasing([5, 3, 4, 2], 7) == [[0, 3], [2, 1]]
    assert first_fit_decreasing([101], 100) == []  # too long: in no bin
