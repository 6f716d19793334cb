"""Megatron-Bridge's own energon code (installed from the package index) against stoker.

``_bridge_client.py`` is a training script's data path on Bridge's ``EnergonMultiModalDataModule``
and its Qwen-VL task encoder (cooker, ``encode_sample``, ``batch``, ``encode_batch``), with and
without packing, 2 dataloader workers, save, ``torch.save`` checkpoint, resume. It runs in a fresh
process under ``python -m stoker.energon_alias``, so Bridge's ``from megatron.energon import ...``
gets stoker; the same script runs against Energon itself for reference.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration._bridge import answer_of, images_of, write_chatml_dataset

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "tests" / "integration" / "_bridge_client.py"
SAVE_AT, TAIL, VAL, PACK_LENGTH = 5, 10, 3, 48
#: Qwen-VL merges 2x2 patches into one token.
MERGE = 4


@pytest.fixture(scope="module")
def chatml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 train samples in 3 shards and 8 val samples, one or two images each."""
    return write_chatml_dataset(tmp_path_factory.mktemp("bridge") / "chatml")


#: How the client is started: under the alias, under torchrun with the alias, or on Energon.
ALIAS = ["-m", "stoker.energon_alias"]
TORCHRUN = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", *ALIAS]
ENERGON: list[str] = []


def run_client(
    data: Path, out: Path, *flags: str, launcher: list[str] = ALIAS, ranks: int = 1
) -> list[dict[str, Any]]:
    """The results of each rank (``OUT``, or ``OUT.rank{N}`` with ``--data-parallel``)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, *launcher, str(CLIENT), str(data), str(out), *flags]
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-6000:]
    assert "skipped a " not in done.stdout + done.stderr  # none lost to the error policy
    paths = [out] if ranks == 1 else [Path(f"{out}.rank{r}") for r in range(ranks)]
    return [json.loads(path.read_text()) for path in paths]


def check_batch(batch: dict[str, Any], split: str, packing: bool) -> None:
    """One micro-batch holds what Bridge's encoder makes of the samples named by its keys."""
    grids = iter(batch["grids"])
    assert batch["visual_inputs"] == "Qwen2_5_VLVisualInputs"
    assert batch["visual_grids"] == batch["grids"]
    for row, key in enumerate(batch["keys"]):
        keys = key.split("+")
        assert all(k.startswith(f"{split}_") for k in keys), key
        assert len(keys) == 1 or packing
        assert batch["answers"][row] == " ".join(answer_of(k) for k in keys)
        row_grids = [next(grids) for k in keys for _ in range(images_of(k))]
        tokens = sum(t * h * w for t, h, w in row_grids) // MERGE
        assert batch["image_tokens"][row] == tokens
        length = sum(1 for t in batch["input_ids"][row] if t != 0)
        assert length <= (PACK_LENGTH if packing else 64)
    assert next(grids, None) is None
    assert batch["pixel_rows"] == sum(t * h * w for t, h, w in batch["grids"])


def check_run(result: dict[str, Any], packing: bool, min_seen: int = 13) -> None:
    assert [len(result[k]) for k in ("before", "after", "resumed", "val")] == [
        SAVE_AT,
        TAIL,
        TAIL,
        VAL,
    ]
    assert result["resumed"] == result["after"]  # identical micro-batches after the resume
    for batch in result["before"] + result["after"]:
        check_batch(batch, "train", packing)
    for batch in result["val"]:
        check_batch(batch, "val", packing)
    if packing:
        rows = [key for batch in result["after"] for key in batch["keys"]]
        assert any("+" in key for key in rows)  # samples were packed together
    # the stream goes on across passes: 15 micro-batches of 2 > 24 train samples (per rank)
    assert len(train_keys(result)) >= min_seen


def train_keys(result: dict[str, Any]) -> set[str]:
    batches = result["before"] + result["after"]
    return {k for b in batches for key in b["keys"] for k in key.split("+")}


@pytest.mark.slow
@pytest.mark.parametrize("packing", [False, True], ids=["plain", "packing"])
def test_bridge_qwen_vl_data_path_on_stoker(chatml: Path, tmp_path: Path, packing: bool) -> None:
    flags = ["--packing"] if packing else []
    (result,) = run_client(chatml, tmp_path / "out.json", *flags)
    check_run(result, packing)


@pytest.mark.slow
def test_stoker_data_module_with_bridges_qwen_vl_encoder(chatml: Path, tmp_path: Path) -> None:
    """stoker's data module in place of Bridge's, called in current Bridge's order."""
    flags = ["--packing", "--stoker-datamodule"]
    (result,) = run_client(chatml, tmp_path / "out.json", *flags)
    check_run(result, packing=True)


@pytest.mark.slow
def test_bridge_data_module_on_data_parallel_ranks(chatml: Path, tmp_path: Path) -> None:
    """Under ``torchrun ... -m stoker.energon_alias`` with megatron-core's parallel state, Bridge's
    data module gives each of 2 data-parallel ranks its own half of the data, and each resumes."""
    out = tmp_path / "out.json"
    results = run_client(chatml, out, "--data-parallel", launcher=TORCHRUN, ranks=2)
    for result in results:
        check_run(result, packing=False, min_seen=12)  # a rank's half: 12 samples
    halves = [train_keys(result) for result in results]
    assert not halves[0] & halves[1]
    assert sorted(halves[0] | halves[1]) == [f"train_{i:04d}" for i in range(24)]
    val = [{k for b in result["val"] for k in b["keys"]} for result in results]
    assert not val[0] & val[1]


@pytest.mark.slow
@pytest.mark.energon
def test_same_client_on_energon_for_reference(chatml: Path, tmp_path: Path) -> None:
    """Energon 7 needs two changes to Bridge 0.3.1's encoder (``--energon7-fixes``): its cooker
    must be marked stateless, its ``batch()`` must pass ``__key__`` and ``__restore_key__``."""
    pytest.importorskip("megatron.energon")
    flags = ["--packing", "--energon7-fixes"]
    (result,) = run_client(chatml, tmp_path / "out.json", *flags, launcher=ENERGON)
    check_run(result, packing=True)
