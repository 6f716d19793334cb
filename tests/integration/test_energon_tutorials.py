"""Energon's quickstart and tutorials, run with ``from stoker import ...`` instead of Energon.

The code blocks are Energon's documentation (``docs/source/basic/quickstart.md`` and
``task_encoder.md``) with only these changes: ``megatron.energon`` -> ``stoker``, the dataset
path, and endless loops (``repeat=True``) stopped after a few batches. Each runs on a dataset
prepared by ``energon prepare`` and on one prepared by stoker.
"""

from __future__ import annotations

import json
import subprocess
import sys
import types
from collections.abc import Iterator
from itertools import count
from pathlib import Path
from typing import Any

import pytest
import torch

from stoker.runtime.loader import Loader
from tests.integration._images import (
    FIELD_MAP,
    SIZE,
    caption_of,
    make_image_dataset,
    write_image_shards,
)

ENERGON_PREPARE = [sys.executable, "-m", "megatron.energon.cli.main", "prepare"]
SHARDS = {"shard_000": 6, "shard_001": 6, "shard_002": 6}
_counter = count()

QUICKSTART = """
from megatron.energon import get_train_dataset, get_loader, WorkerConfig

ds = get_train_dataset(
    '/my/dataset/path',
    batch_size=1,
    shuffle_buffer_size=100,
    max_samples_per_sequence=100,
    worker_config=WorkerConfig.default_worker_config(),
)

loader = get_loader(ds)

for batch in loader:
    # Do something with batch
    # Infer, gradient step, ...
    seen.append(batch)  # (test) instead of `pass`: the loop repeats forever
    if len(seen) == 8:
        break
"""

TUTORIAL_2 = """
from megatron.energon import get_train_dataset, get_loader, WorkerConfig

ds = get_train_dataset(
    '/path/to/your/dataset',
    batch_size=None,
    shuffle_buffer_size=100,
    max_samples_per_sequence=100,
    worker_config=WorkerConfig.default_worker_config(),
)

with get_loader(ds) as loader:
    for batch in loader:
        print(batch)
        break
"""

TUTORIAL_3 = """
from megatron.energon import get_train_dataset, get_loader, WorkerConfig

with get_loader(get_train_dataset(
    '/path/to/your/dataset',
    batch_size=2,
    shuffle_buffer_size=100,
    max_samples_per_sequence=100,
    worker_config=WorkerConfig.default_worker_config(),
)) as loader:
    for batch in loader:
        print(batch)
        break
"""

TUTORIAL_4 = """
from megatron.energon import get_train_dataset, get_loader, WorkerConfig
import torch.distributed as dist

worker_config = WorkerConfig(
    rank=SET_YOUR_GLOBAL_DATA_RANK_HERE,
    world_size=SET_YOUR_GLOBAL_WORLD_SIZE_HERE,
    num_workers=2,
)

with get_loader(get_train_dataset(
    '/path/to/your/dataset',
    batch_size=4,
    shuffle_buffer_size=100,
    max_samples_per_sequence=100,
    worker_config=worker_config,
)) as loader:
    for batch in loader:
        print(batch)
        break
"""

#: task_encoder.md before Energon's ``Batch`` class, with a stand-in tokenizer and image transform
#: (no transformers/torchvision).
TASK_ENCODER = """
from dataclasses import dataclass
from typing import Callable, List, Optional

import torch

from megatron.energon import CaptioningSample, DefaultTaskEncoder, batch_list, batch_stack
from megatron.energon import WorkerConfig, get_loader, get_train_dataset


# Type for intermediate batch, after batching operation
@dataclass
class CaptioningRawBatch:
    # (n,)
    __key__: List[str]
    # (test) Energon 7 samples carry these too, and `_batch` passes every field on.
    __restore_key__: list
    __subflavors__: list
    __sources__: list
    # (n, c, h, w)
    image: torch.Tensor
    # (n,)
    caption: List[str]


# Typing for the resulting batch data
@dataclass
class CaptioningBatch:
    __keys__: List[str]
    # (n, c, h, w)
    images: torch.Tensor
    # (n, c)
    text_tokens: torch.Tensor
    # (n, c, c)
    text_attn_mask: torch.Tensor


# All the typing is optional
class CaptioningTaskEncoder(
    DefaultTaskEncoder[CaptioningSample, CaptioningSample, CaptioningRawBatch, CaptioningBatch]
):
    \"\"\"A simple task encoder for captioning.\"\"\"

    def __init__(
        self,
        tokenizer,
        image_transform: Optional[Callable[[torch.Tensor], torch.Tensor]] = None,
        max_length: int = 128,
    ):
        # Specify the batch_type for default batching (batching is performed here "manually" by
        # overwriting the `batch` method)
        super().__init__(batch_type=CaptioningRawBatch)
        self.tokenizer = tokenizer
        self.image_transform = image_transform
        self.max_length = max_length

    def encode_sample(self, sample: CaptioningSample) -> CaptioningSample:
        sample.image = self.image_transform(sample.image)
        return sample

    def batch(self, samples: List[CaptioningSample]) -> CaptioningRawBatch:
        # Batch the samples
        # The actions dict specifies how to batch each field of the sample. In addition to these,
        # you may use `batch_pad_stack` as well.
        return self._batch(
            samples,
            result_type=CaptioningRawBatch,
            actions={"image": batch_stack, "caption": batch_list},
        )

    def encode_batch(self, batch_data: CaptioningRawBatch) -> CaptioningBatch:
        # Run the encoder on the batch of captions.
        tokenized = self.tokenizer(batch_data.caption)
        # Return the final batch, going into the network
        return CaptioningBatch(
            __keys__=batch_data.__key__,
            images=batch_data.image,
            text_tokens=tokenized["input_ids"],
            text_attn_mask=tokenized["attention_mask"],
        )


train_loader = get_loader(get_train_dataset(
    '/my/dataset/path',
    batch_size=4,
    shuffle_buffer_size=100,
    max_samples_per_sequence=100,
    task_encoder=CaptioningTaskEncoder(
        tokenizer=tokenizer,
        image_transform=train_img_transform,
    ),
    worker_config=WorkerConfig.default_worker_config(),
))

for data in train_loader:
    # data is a CaptioningBatch
    seen.append(data)  # (test) instead of `pass`: the loop repeats forever
    if len(seen) == 3:
        break
"""

#: task_encoder.md as of Energon 7.4: the same encoder on Energon's ``Batch`` base class.
TASK_ENCODER_BATCH_CLASS = """
from dataclasses import dataclass
from typing import List

import torch

from megatron.energon import Batch, CaptioningSample, DefaultTaskEncoder
from megatron.energon import WorkerConfig, get_loader, get_train_dataset


@dataclass
class CaptioningRawBatch(Batch):
    # (n, c, h, w)
    image: torch.Tensor
    # (n,)
    caption: List[str]


@dataclass
class CaptioningBatch(Batch):
    # (n, c, h, w)
    images: torch.Tensor
    # (n, c)
    text_tokens: torch.Tensor
    # (n, c, c)
    text_attn_mask: torch.Tensor


class CaptioningTaskEncoder(
    DefaultTaskEncoder[CaptioningSample, CaptioningSample, CaptioningRawBatch, CaptioningBatch]
):
    def __init__(self, tokenizer):
        super().__init__(batch_type=CaptioningRawBatch)
        self.tokenizer = tokenizer

    def batch(self, samples: List[CaptioningSample]) -> CaptioningRawBatch:
        return CaptioningRawBatch.from_samples(samples)

    def encode_batch(self, batch_data: CaptioningRawBatch) -> CaptioningBatch:
        tokenized = self.tokenizer(batch_data.caption)
        return CaptioningBatch.derive_from(
            batch_data,
            images=batch_data.image,
            text_tokens=tokenized["input_ids"],
            text_attn_mask=tokenized["attention_mask"],
        )


train_loader = get_loader(get_train_dataset(
    '/my/dataset/path',
    batch_size=4,
    shuffle_buffer_size=100,
    max_samples_per_sequence=100,
    task_encoder=CaptioningTaskEncoder(tokenizer=tokenizer),
    worker_config=WorkerConfig.default_worker_config(),
))

for data in train_loader:
    seen.append(data)
    if len(seen) == 3:
        break
"""


def tokenizer(captions: list[str]) -> dict[str, torch.Tensor]:
    """A stand-in for a Hugging Face tokenizer: bytes of each caption, padded to 32."""
    ids = torch.zeros(len(captions), 32, dtype=torch.long)
    for i, caption in enumerate(captions):
        data = torch.tensor(list(caption.encode()[:32]))
        ids[i, : len(data)] = data
    return {"input_ids": ids, "attention_mask": (ids != 0).long()}


def train_img_transform(image: torch.Tensor) -> torch.Tensor:
    """A stand-in for torchvision transforms: a horizontal flip."""
    return image.flip(-1)


@pytest.fixture(scope="module", params=["energon prepare", "stoker prepare"])
def prepared(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A dataset of 18 samples in 3 shards, split 1,1,1 (6 train samples)."""
    root = tmp_path_factory.mktemp("tutorial") / "ds"
    if request.param == "stoker prepare":
        make_image_dataset(root, {"train": {"train_a": 6}, "val": {"val_a": 6}})
        return root
    pytest.importorskip("megatron.energon")
    write_image_shards(root, SHARDS)
    command = [
        *ENERGON_PREPARE,
        str(root),
        "--non-interactive",
        "--split-ratio",
        "1,1,1",
        "--sample-type",
        "CaptioningSample",
        "--field-map",
        json.dumps(FIELD_MAP),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return root


@pytest.fixture(autouse=True)
def _tutorials_end_with_their_test() -> Iterator[None]:
    """Each tutorial's module leaves ``sys.modules`` when its test ends, and the loaders it left
    open are closed: its workers and their shared memory are not carried into later tests."""
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.startswith("tutorial_"):
            for value in sys.modules.pop(name).__dict__.values():
                if isinstance(value, Loader):
                    value.close()


def run_tutorial(code: str, path: Path, **names: Any) -> dict[str, Any]:
    """Run a tutorial with stoker in place of Energon; returns its global names.

    The code runs as a module of its own (registered in ``sys.modules``, so that the classes it
    defines can be pickled from dataloader workers), without this file's ``__future__`` imports.
    """
    assert "megatron.energon" in code
    code = code.replace("megatron.energon", "stoker")
    for placeholder in ("/my/dataset/path", "/path/to/your/dataset"):
        code = code.replace(placeholder, str(path))
    module = types.ModuleType(f"tutorial_{next(_counter)}")
    module.__dict__.update(seen=[], **names)
    sys.modules[module.__name__] = module
    exec(compile(code, f"<{module.__name__}>", "exec", dont_inherit=True), module.__dict__)
    return module.__dict__


def check_captioning_batch(batch: Any, size: int) -> None:
    from stoker import CaptioningSample

    assert isinstance(batch, CaptioningSample)
    assert isinstance(batch.__key__, list)
    assert len(batch.__key__) == size
    assert all(isinstance(key, str) for key in batch.__key__)
    assert batch.image.shape == (size, 3, SIZE[1], SIZE[0])
    assert batch.image.dtype == torch.float32  # Energon's default image decode: torchrgb
    assert 0.0 <= float(batch.image.min()) <= float(batch.image.max()) <= 1.0
    assert isinstance(batch.caption, list)
    assert batch.caption == [caption_of(key.rsplit("/", 1)[-1]) for key in batch.__key__]


def test_quickstart(prepared: Path) -> None:
    seen = run_tutorial(QUICKSTART, prepared)["seen"]
    assert len(seen) == 8
    for batch in seen:
        check_captioning_batch(batch, 1)
    keys = {batch.__key__[0].rsplit("/", 1)[-1] for batch in seen}
    # 4 workers take turns over the 6 train samples: 8 batches hold each at least once.
    assert len(keys) == 6, keys
    assert len({key.rsplit("_", 1)[0] for key in keys}) == 1, "not one shard's samples"


def test_tutorial_2_unbatched_sample(prepared: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from stoker import CaptioningSample

    sample = run_tutorial(TUTORIAL_2, prepared)["batch"]
    assert isinstance(sample, CaptioningSample)
    assert isinstance(sample.__key__, str)
    assert sample.image.shape == (3, SIZE[1], SIZE[0])
    assert sample.image.dtype == torch.float32
    assert sample.caption == caption_of(sample.__key__.rsplit("/", 1)[-1])
    assert capsys.readouterr().out.startswith("CaptioningSample(")


def test_tutorial_3_batch_size(prepared: Path, capsys: pytest.CaptureFixture[str]) -> None:
    batch = run_tutorial(TUTORIAL_3, prepared)["batch"]
    check_captioning_batch(batch, 2)
    assert capsys.readouterr().out.startswith("CaptioningSample(")


def test_tutorial_4_explicit_worker_config(prepared: Path) -> None:
    batch = run_tutorial(
        TUTORIAL_4,
        prepared,
        SET_YOUR_GLOBAL_DATA_RANK_HERE=0,
        SET_YOUR_GLOBAL_WORLD_SIZE_HERE=1,
    )["batch"]
    check_captioning_batch(batch, 4)


def test_task_encoder_tutorial(prepared: Path) -> None:
    namespace = run_tutorial(
        TASK_ENCODER, prepared, tokenizer=tokenizer, train_img_transform=train_img_transform
    )
    seen = namespace["seen"]
    assert len(seen) == 3
    for data in seen:
        assert type(data).__name__ == "CaptioningBatch"
        assert len(data.__keys__) == 4
        assert data.images.shape == (4, 3, SIZE[1], SIZE[0])
        assert data.text_tokens.shape == data.text_attn_mask.shape == (4, 32)
        captions = [caption_of(key.rsplit("/", 1)[-1]) for key in data.__keys__]
        assert torch.equal(data.text_tokens, tokenizer(captions)["input_ids"])


def test_task_encoder_tutorial_with_batch_class(prepared: Path) -> None:
    seen = run_tutorial(TASK_ENCODER_BATCH_CLASS, prepared, tokenizer=tokenizer)["seen"]
    assert len(seen) == 3
    for data in seen:
        assert type(data).__name__ == "CaptioningBatch"
        assert len(data.__key__) == 4
        assert data.images.shape == (4, 3, SIZE[1], SIZE[0])
        assert data.text_tokens.shape == (4, 32)
