"""``stoker info``, ``lint`` and ``preview`` on Megatron token datasets written by megatron-core:
the summary matches the index, a damaged ``.idx`` is named with its file and byte offset, and
the preview shows each sequence's array."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from stoker.format.binidx import HEADER
from tests.integration._remote import stoker_cli
from tests.integration._tokens import reference, write_tokens


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return write_tokens(tmp_path / "corpus", np.int32, 30)


def test_info_summarises_the_index(corpus: Path) -> None:
    ref = reference(corpus)
    done = stoker_cli("info", str(corpus), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["kind"] == "binidx" and report["samples"] == len(ref)
    assert report["tokens"]["documents"] == 30 and report["tokens"]["dtype"] == "int32"
    assert report["tokens"]["tokens"] == int(ref.sequence_lengths.sum())
    assert report["bytes"] == Path(f"{corpus}.bin").stat().st_size
    text = stoker_cli("info", f"{corpus}.idx").stdout
    assert f"{len(ref):,} (one sample each)" in text and "of int32" in text


def test_lint_passes_a_sound_dataset(corpus: Path) -> None:
    done = stoker_cli("lint", f"{corpus}.bin")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(reference(corpus))} samples: no problems" in done.stdout


def damage(corpus: Path, tmp_path: Path, at: int, data: bytes, name: str) -> Path:
    out = tmp_path / name
    shutil.copy(f"{corpus}.bin", f"{out}.bin")
    raw = bytearray(Path(f"{corpus}.idx").read_bytes())
    raw[at : at + len(data)] = data
    Path(f"{out}.idx").write_bytes(bytes(raw))
    return out


def test_lint_names_the_file_and_offset_of_a_damaged_index(corpus: Path, tmp_path: Path) -> None:
    count = len(reference(corpus))
    pointers = HEADER.size + 4 * count
    cases = {
        "magic": (0, b"XXIDIDX", "offset 0", "not a Megatron MMIDIDX index"),
        "dtype": (17, bytes([9]), "offset 17", "unknown dtype code 9"),
        # the 3rd sequence points past the end of the .bin
        "pointer": (
            pointers + 16,
            struct.pack("<q", 1 << 40),
            f"offset {pointers + 16}",
            "outside",
        ),
    }
    for name, (at, data, where, problem) in cases.items():
        damaged = damage(corpus, tmp_path, at, data, name)
        done = stoker_cli("lint", str(damaged))
        assert done.returncode == 1, (name, done.stdout)
        assert f"{name}.idx" in done.stdout and where in done.stdout, (name, done.stdout)
        assert problem in done.stdout, (name, done.stdout)
    truncated = tmp_path / "short"
    shutil.copy(f"{corpus}.bin", f"{truncated}.bin")
    Path(f"{truncated}.idx").write_bytes(Path(f"{corpus}.idx").read_bytes()[:-8])
    done = stoker_cli("lint", f"{truncated}.bin")
    assert done.returncode == 1 and "short.idx" in done.stdout and "needs" in done.stdout


def test_preview_shows_the_token_arrays(corpus: Path) -> None:
    done = stoker_cli("preview", str(corpus), "-n", "2")
    assert done.returncode == 0, done.stderr
    first = len(reference(corpus)[0])
    assert "Megatron .bin/.idx tokens (crude)" in done.stdout
    assert f"tokens  array {first} int32" in done.stdout


def test_bench_loads_the_sequences_at_each_worker_count(corpus: Path) -> None:
    done = stoker_cli(
        "bench", f"{corpus}.bin", "--workers", "0,2", "--batches", "3", "--batch-size", "4",
        "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    runs = json.loads(done.stdout)["runs"]
    assert [(r["workers"], r["batches"], r["samples"]) for r in runs] == [(0, 3, 12), (2, 3, 12)]
    assert all(r["samples_per_s"] > 0 and r["skipped"] == 0 for r in runs)
