"""A restore under another task encoder class continues from the same samples (as in Energon:
e.g. a lazily cooking encoder swapped for an eager one); the change is logged, not refused."""

from __future__ import annotations

import itertools
import logging
from typing import Any

import pytest

from stoker import DefaultTaskEncoder, TextSample, WorkerConfig, get_loader, get_train_dataset
from stoker.runtime.loader import Loader
from tests.contract.contract import roundtrip
from tests.contract.test_save_restore_batch_size import dataset  # noqa: F401  (fixture)


class Upper(DefaultTaskEncoder):  # type: ignore[type-arg]
    """Another encoder class: same samples, upper-cased texts."""

    def encode_sample(self, sample: Any) -> Any:
        return TextSample.derive_from(sample, text=sample.text.upper())


def loader(path: str, task_encoder: Any) -> Loader:
    wc = WorkerConfig(rank=0, world_size=1, num_workers=2)
    ds = get_train_dataset(path, worker_config=wc, batch_size=3, shuffle_buffer_size=5,
                           max_samples_per_sequence=2, sample_type=TextSample,
                           task_encoder=task_encoder)  # fmt: skip
    return get_loader(ds)


def test_restore_under_another_task_encoder_class(
    dataset: str,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    with loader(dataset, DefaultTaskEncoder()) as saved:
        list(itertools.islice(saved, 5))
        state = roundtrip(saved.save_state_rank())
        after = [b.text for b in itertools.islice(saved, 6)]
    with loader(dataset, Upper()) as restored, caplog.at_level(logging.WARNING, "stoker"):
        restored.restore_state_rank(state)
        texts = [b.text for b in itertools.islice(restored, 6)]
    assert texts == [[t.upper() for t in batch] for batch in after]
    assert "task_encoder='DefaultTaskEncoder' under 'Upper'" in caplog.text
