"""Megatron-LM's multimodal data path against stoker, through ``stoker.energon_alias``.

``_megatron_lm_client.py`` reproduces the patterns of Megatron-LM's ``examples/multimodal``
(``dataloader_provider.py``, ``dataset_helpers.py``) importing ``megatron.energon``: ``Batch``
and ``Sample`` subclasses re-declaring the metadata fields, an SFT blend (Metadataset YAML with
weights and subflavors) whose SFT dataset is read by a ``sample_loader.py``,
``@stateless(restore_seeds=True)``, packing, ``LimitDataset(RepeatDataset(...))`` validation,
2 workers, and checkpoint/resume with ``save_state_rank`` / ``restore_state_rank``. It runs in a
fresh process under ``python -m stoker.energon_alias``; the same script runs against Energon
itself for reference.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration._megatron_lm import (
    IGNORE,
    IMAGE_TOKEN,
    IMAGE_TOKENS,
    detokenize,
    target_of,
    write_pretrain,
    write_sft_blend,
)

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "tests" / "integration" / "_megatron_lm_client.py"
SAVE_AT, TAIL, EVAL_ITERS, MICRO_BATCH, PACK_LENGTH = 4, 8, 3, 2, 16


@pytest.fixture(scope="module")
def blend(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Captioning (16 train, 4 val) and SFT VQA (12 train, 4 val) data, blended 1:2."""
    return write_sft_blend(tmp_path_factory.mktemp("megatron_lm"))


@pytest.fixture(scope="module")
def pretrain(blend: Path) -> Path:
    """The pretraining metadataset over the captioning data alone."""
    return write_pretrain(blend.parent, blend.parent / "captions")


def run_client(blend: Path, out: Path, *flags: str, alias: bool = True) -> dict[str, Any]:
    launcher = ["-m", "stoker.energon_alias"] if alias else []
    # The SFT dataset's sample_loader.py runs only with this opt-in (docs/security).
    env = {**os.environ, "PYTHONPATH": str(ROOT), "STOKER_TRUST_SAMPLE_LOADER": "1"}
    command = [sys.executable, *launcher, str(CLIENT), str(blend), str(out), *flags]
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-6000:]
    assert "skipped a " not in done.stdout + done.stderr  # none lost to the error policy
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def check_batch(batch: dict[str, Any], split: str, packing: bool) -> None:
    """Each row holds the encoded samples its key names, from the dataset its subflavors say."""
    images = 0
    for row, key in enumerate(batch["keys"]):
        keys = key.split(",")
        assert len(keys) == 1 or packing
        sources = ["captions" if k.startswith("cap_") else "sft" for k in keys]
        assert batch["sources"][row] == sources  # each dataset's subflavors from the blend
        cuts = batch["cu_lengths"][row]
        assert len(cuts) == len(keys) + 1 and cuts[-1] <= (PACK_LENGTH if packing else 99)
        tokens, labels = batch["tokens"][row], batch["labels"][row]
        for k, start, end in zip(keys, cuts, cuts[1:], strict=False):
            index = int(k.rsplit("_", 1)[1])
            assert (index >= (16 if k.startswith("cap_") else 12)) == (split == "val"), k
            assert tokens[start : start + IMAGE_TOKENS] == [IMAGE_TOKEN] * IMAGE_TOKENS
            trained = [t for t in labels[start:end] if t != IGNORE]
            assert detokenize(trained) == target_of(k)  # sample_loader's answer for SFT
        images += len(keys)
    assert batch["imgs"][0] == [images, 3, 8, 8]
    assert all(batch["was_pil"])  # image_decode="pil"
    assert len(batch["augment"]) == images


def check_run(result: dict[str, Any], packing: bool, sources: int = 2) -> None:
    assert result["errors"] == []
    assert [len(result[k]) for k in ("before", "after", "resumed")] == [SAVE_AT, TAIL, TAIL]
    assert result["resumed"] == result["after"]  # incl. the restored random augmentations
    train = result["before"] + result["after"]
    for batch in train:
        check_batch(batch, "train", packing)
    keys = [k for b in train for key in b["keys"] for k in key.split(",")]
    assert {k.split("_")[0] for k in keys} == {"cap", "sft"} if sources == 2 else {"cap"}
    assert len({a for b in train for a in b["augment"]}) > len(train)  # random per sample
    if packing:
        assert any("," in key for b in train for key in b["keys"])
    assert len(result["val"]) == sources  # one validation dataset per source of the blend
    for passes, prefix in zip(result["val"], ("cap_", "sft_")[:sources], strict=True):
        for batch in passes:
            check_batch(batch, "val", packing)
            assert all(key.startswith(prefix) for key in batch["keys"])
        # LimitDataset(RepeatDataset(..), EVAL_ITERS, reset_after_epoch=True): every
        # evaluation sees the same EVAL_ITERS batches
        assert passes[:EVAL_ITERS] == passes[EVAL_ITERS:]


@pytest.mark.slow
@pytest.mark.parametrize("packing", [False, True], ids=["plain", "packing"])
def test_megatron_lm_multimodal_data_path_on_stoker(
    blend: Path, tmp_path: Path, packing: bool
) -> None:
    flags = ["--packing"] if packing else []
    result = run_client(blend, tmp_path / "out.json", *flags)
    check_run(result, packing)
    # stoker's loader state is plain data: it loads with torch.load's default weights_only=True,
    # as dataloader_provider.py loads it
    assert result["plain_data_state"] is True


@pytest.mark.slow
def test_megatron_lm_pretraining_data_path_on_stoker(pretrain: Path, tmp_path: Path) -> None:
    check_run(run_client(pretrain, tmp_path / "out.json"), packing=False, sources=1)


@pytest.mark.slow
@pytest.mark.energon
def test_same_client_on_energon_for_reference(blend: Path, tmp_path: Path) -> None:
    pytest.importorskip("megatron.energon")
    result = run_client(blend, tmp_path / "out.json", "--packing", alias=False)
    check_run(result, packing=True)
    # Energon's state holds classes: with torch's default weights_only=True it does not load
    # (Megatron-LM's dataloader_provider.py then prints that it skips it)
    assert result["plain_data_state"] is False
