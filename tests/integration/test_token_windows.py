"""The fixed-length recipe (``TokenWindowEncoder`` on stoker's packing) cuts the windows
megatron-core's ``GPTDataset`` cuts, over the same files, for an unshuffled pass; and a loader
with it restores exactly.

GPTDataset has no switch to turn shuffling off: its document and sample orders are drawn from a
``numpy.random.RandomState``; the test hands it one whose ``shuffle`` keeps the order, so its
windows come in stream order. It runs on CPU (its C++ ``helpers`` ship compiled in the wheel).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from stoker import WorkerConfig, get_loader, get_train_dataset, get_val_dataset
from stoker.integrations.token_windows import TokenWindowEncoder
from stoker.runtime.loader import Loader
from tests.contract.contract import run_contract
from tests.integration._tokens import megatron_datasets, reference, write_tokens

SEQ = 16
EOD = 3


class _InOrder(np.random.RandomState):
    """A RandomState whose shuffle keeps the order (GPTDataset's only source of shuffling)."""

    def shuffle(self, x: Any) -> None:
        return None


class _Tokenizer:
    """What GPTDataset asks of a tokenizer."""

    eod, pad, vocab_size = EOD, -1, 30000
    unique_identifiers: ClassVar[dict[str, str]] = {"class": "_Tokenizer"}


def gpt_windows(prefix: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[Any]:
    """GPTDataset's windows (``seq_length + 1`` tokens) over ``prefix``, in stream order."""
    indexed = megatron_datasets()
    from megatron.core.datasets import gpt_dataset
    from megatron.core.datasets.utils import Split

    monkeypatch.setattr(gpt_dataset.numpy.random, "RandomState", _InOrder)
    config = gpt_dataset.GPTDatasetConfig(
        random_seed=1, sequence_length=SEQ, split="1,0,0", tokenizer=_Tokenizer(),
        reset_position_ids=False, reset_attention_mask=False, eod_mask_loss=False,
        path_to_cache=str(tmp_path / "gpt_cache"),
    )  # fmt: skip
    data = indexed.IndexedDataset(str(prefix))
    ds = gpt_dataset.GPTDataset(
        data, str(prefix), np.arange(len(data), dtype=np.int32), None, Split.train, config
    )
    out = []
    for i in range(len(ds)):
        item = ds[i]
        out.append(np.append(item["tokens"].numpy(), item["labels"].numpy()[-1]))
    return out


def our_windows(prefix: str, workers: int, eod: int | None) -> list[Any]:
    dataset = get_val_dataset(
        prefix, split_part="train", worker_config=WorkerConfig(0, 1, workers), batch_size=4,
        task_encoder=TokenWindowEncoder(SEQ, eod=eod), packing_buffer_size=64,
    )  # fmt: skip
    with get_loader(dataset) as loader:
        return [
            (w, t.numpy())
            for batch in loader
            for w, t in zip(batch.window, batch.tokens, strict=True)
        ]


@pytest.mark.parametrize("dtype", [np.uint16, np.int32])
def test_windows_equal_gpt_datasets_for_an_unshuffled_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dtype: Any
) -> None:
    # The same documents with the end-of-document token written in (as preprocess_data.py
    # --append-eod does) and without it (then the recipe appends it).
    with_eod = write_tokens(tmp_path / "with_eod", dtype, 50, seed=5, eod=EOD)
    plain = write_tokens(tmp_path / "plain", dtype, 50, seed=5)
    assert len(reference(plain)) > 50  # documents of several sequences
    expected = gpt_windows(with_eod, monkeypatch, tmp_path)
    assert len(expected) > 20
    for prefix, eod in ((with_eod, None), (plain, EOD)):
        got = our_windows(str(prefix), 0, eod)
        assert [w for w, _ in got] == list(range(len(expected)))
        for (_, tokens), want in zip(got, expected, strict=True):
            assert np.array_equal(tokens, want)
    # With 2 workers each reads its own range: every window but the one straddling them.
    got2 = dict(our_windows(str(plain), 2, EOD))
    assert len(got2) >= len(expected) - 1
    assert all(np.array_equal(tokens, expected[w]) for w, tokens in got2.items())


def test_a_loader_of_windows_restores_exactly(tmp_path: Path) -> None:
    prefix = write_tokens(tmp_path / "c", np.uint16, 60, seed=2)

    def make() -> Loader:
        dataset = get_train_dataset(
            str(prefix), worker_config=WorkerConfig(0, 1, 2), batch_size=2,
            shuffle_buffer_size=None, max_samples_per_sequence=None, virtual_workers=2,
            task_encoder=TokenWindowEncoder(SEQ, eod=EOD), packing_buffer_size=32,
        )  # fmt: skip
        return get_loader(dataset)

    run_contract(make, total=30, midpoints=[0, 5, 13, 26])
