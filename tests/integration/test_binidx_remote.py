"""Megatron token datasets over S3 (the suite's SeaweedFS server) and across topologies.

The same ``.bin``/``.idx`` files load through ``s3://`` equal to local ones, reading exactly
each sequence's bytes, the index kept once in the metadata cache; a run saved on 2 ranks x 2
workers resumes on 1 rank x 4 workers with the same global batches.
"""

from __future__ import annotations

import mmap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stoker import WorkerConfig, get_loader, get_val_dataset
from stoker.sources.load import load_source
from stoker.storage.s3 import STATS
from tests.integration._tokens import reference, write_tokens
from tests.integration.test_s3 import bucket, s3_env, upload  # noqa: F401  (fixtures)
from tests.integration.test_state_distributed import STEPS, interleave, spawn

AFTER = 12


@pytest.mark.parametrize("workers", [0, 2])
def test_token_files_on_s3_load_equal_to_local_ones(
    bucket: Any,  # noqa: F811
    tmp_path: Path,
    workers: int,
) -> None:
    prefix = write_tokens(tmp_path / "local" / "corpus", np.uint16, 400)  # an .idx of ~10 kB
    url = upload(bucket, tmp_path / "local", f"tokens{workers}") + "/corpus"

    def sequences(where: str) -> list[tuple[str, Any]]:
        dataset = get_val_dataset(
            where, split_part="train", worker_config=WorkerConfig(0, 1, workers), batch_size=None
        )
        with get_loader(dataset) as loader:
            return [(s["__key__"], s["tokens"]) for s in loader]

    remote, local = sequences(url), sequences(str(prefix))
    assert [k for k, _ in remote] == [k for k, _ in local]
    assert all(
        np.array_equal(a, b) and a.dtype == b.dtype
        for (_, a), (_, b) in zip(remote, local, strict=True)
    )
    ref = reference(prefix)
    assert all(np.array_equal(tokens, ref[int(key)]) for key, tokens in remote)
    reader = load_source(url + ".bin").reader()
    index = reader.index(0)  # kept in the local metadata cache, mapped
    assert isinstance(getattr(index.pointers.base, "obj", None), mmap.mmap)
    assert index.pointers.tolist() == ref.index.sequence_pointers.tolist()
    STATS.reset()  # one sequence costs one GET of exactly its bytes
    longest = int(np.argmax(ref.sequence_lengths))
    assert np.array_equal(reader.read(0, longest).parts["tokens"], ref[longest])
    assert STATS.requests["GET"] == 1
    assert STATS.bytes_received == 2 * int(ref.sequence_lengths[longest])
    reader.close()


def test_two_ranks_by_two_workers_resume_on_one_by_four(tmp_path: Path) -> None:
    prefix = write_tokens(tmp_path / "corpus", np.int32, 30)
    out = tmp_path / "out"
    out.mkdir()
    spec: dict[str, Any] = {
        "mode": "save", "tag": "save", "dataset": f"{prefix}.bin", "out": str(out),
        "workers": 2, "steps": STEPS, "after": AFTER // 2,
        "states_file": str(out / "states.pt"), "redist_file": str(out / "unused.pt"),
    }  # fmt: skip
    saved = spawn(2, spec)
    expected = interleave([r["reference"] for r in saved])[STEPS * 2 :]
    assert len({repr(b) for b in expected}) == AFTER  # distinct batches
    restored = spawn(
        1,
        {**spec, "mode": "restore", "tag": "restore", "workers": 4, "after": AFTER,
         "methods": ["global_all"]},
    )  # fmt: skip
    assert restored[0]["global_all"] == expected
