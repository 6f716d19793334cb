"""Megatron-LM's multimodal data path (``examples/multimodal``), as its training script uses it.

Written from the patterns of ``dataloader_provider.py`` and ``dataset_helpers.py`` (which import
``megatron.training``, not installable here): sample and batch dataclasses re-declaring Energon's
metadata fields, ``@stateless(restore_seeds=True)`` encoding with a random augmentation, packing
with ``select_samples_to_pack`` / ``pack_selected_samples``, ``encode_batch`` to a dict, the
datasets of ``datasets_provider`` (``handler=``, ``image_decode="pil"``, ``virtual_epoch_length``,
``LimitDataset(RepeatDataset(...), reset_after_epoch=True)`` around each validation dataset), and
the checkpoint of ``train_valid_test_dataloaders_provider`` (``torch.save`` of
``{"dataloader_state_dict": loader.save_state_rank()}``, ``restore_state_rank`` on resume).

Run as ``python -m stoker.energon_alias tests/integration/_megatron_lm_client.py BLEND OUT
[--packing]`` with the repository root on ``PYTHONPATH``; writes a JSON summary to ``OUT``.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import pickle
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from megatron.energon import (
    Batch,
    CaptioningSample,
    DefaultTaskEncoder,
    LimitDataset,
    RepeatDataset,
    Sample,
    VQASample,
    WorkerConfig,
    get_loader,
    get_savable_loader,
    get_train_dataset,
    get_val_datasets,
)
from megatron.energon.task_encoder.base import stateless
from PIL import Image

from tests.integration._megatron_lm import IGNORE, IMAGE_TOKEN, IMAGE_TOKENS, tokenize

SAVE_AT, TAIL, EVAL_ITERS, MICRO_BATCH, PACK_LENGTH = 4, 8, 3, 2, 16
ERRORS: list[str] = []


@dataclass
class ImageTaskSample(Sample):
    __key__: str
    __restore_key__: tuple[Any, ...]
    __subflavor__: dict[str, Any] | None
    __subflavors__: dict[str, Any]
    imgs: list[torch.Tensor]
    tokens: torch.Tensor
    total_len: int
    was_pil: bool
    augment: int
    labels: torch.Tensor | None = None


@dataclass
class ImageTaskSamplePacked(Sample):
    __subflavor__: dict[str, Any] | None
    __subflavors__: dict[str, Any]
    tokens: torch.Tensor
    labels: torch.Tensor
    imgs: list[torch.Tensor]
    cu_lengths: torch.Tensor
    max_length: int
    sources: list[str]
    was_pil: list[bool]
    augment: list[int]


@dataclass
class ImageTaskBatchPacked(Batch):
    __subflavor__: dict[str, Any] | None
    __subflavors__: list[dict[str, Any]]
    tokens: torch.Tensor
    labels: torch.Tensor
    imgs: torch.Tensor
    cu_lengths: list[list[int]]
    sources: list[list[str]]
    was_pil: list[bool]
    augment: list[int]


class TaskEncoder(DefaultTaskEncoder[Any, Any, ImageTaskBatchPacked, dict]):  # type: ignore[type-arg]
    def __init__(self, packing_seq_length: int | None = None) -> None:
        super().__init__()
        self.packing_seq_length = packing_seq_length

    @stateless(restore_seeds=True)
    def encode_sample(self, sample: CaptioningSample | VQASample) -> ImageTaskSample:
        image = sample.image
        was_pil = isinstance(image, Image.Image)
        pixels = torch.from_numpy(np.array(image.convert("RGB").resize((8, 8)))).permute(2, 0, 1)
        augment = int(torch.randint(0, 1_000_000, ()))  # seeded: the same after a restore
        if isinstance(sample, CaptioningSample):
            prompt, target = [], tokenize(sample.caption)
        else:
            prompt, target = tokenize(sample.context), tokenize(sample.answers[0])
        tokens = torch.tensor([IMAGE_TOKEN] * IMAGE_TOKENS + prompt + target)
        labels = torch.tensor([IGNORE] * (IMAGE_TOKENS + len(prompt)) + target)
        return ImageTaskSample(
            __key__=sample.__key__,
            __restore_key__=sample.__restore_key__,
            __subflavor__=None,
            __subflavors__=sample.__subflavors__,
            imgs=[pixels],
            tokens=tokens,
            labels=labels,
            total_len=len(tokens),
            was_pil=was_pil,
            augment=augment,
        )

    def select_samples_to_pack(self, samples: list[ImageTaskSample]) -> list[list[ImageTaskSample]]:
        """Greedy knapsack: longest first into the first pack with room."""
        packs: list[list[ImageTaskSample]] = []
        room: list[int] = []
        for sample in sorted(samples, key=lambda s: (-s.total_len, s.__key__)):
            fits = [i for i, r in enumerate(room) if r >= sample.total_len]
            if fits:
                packs[fits[0]].append(sample)
                room[fits[0]] -= sample.total_len
            else:
                packs.append([sample])
                room.append(int(self.packing_seq_length or 0) - sample.total_len)
        return packs

    @stateless
    def pack_selected_samples(self, samples: list[ImageTaskSample]) -> ImageTaskSamplePacked:
        lengths = [s.total_len for s in samples]
        return ImageTaskSamplePacked(
            __key__=",".join(s.__key__ for s in samples),
            __restore_key__=(),  # set by the loader from the samples
            __subflavor__=None,
            __subflavors__=samples[0].__subflavors__,
            tokens=torch.cat([s.tokens for s in samples]),
            labels=torch.cat([s.labels for s in samples if s.labels is not None]),
            imgs=[img for s in samples for img in s.imgs],
            cu_lengths=torch.tensor(np.cumsum([0, *lengths]), dtype=torch.int32),
            max_length=max(lengths),
            sources=[s.__subflavors__["source"] for s in samples],
            was_pil=[s.was_pil for s in samples],
            augment=[s.augment for s in samples],
        )

    def batch(self, samples: list[Any]) -> ImageTaskBatchPacked:
        packed = isinstance(samples[0], ImageTaskSamplePacked)
        width = max(len(s.tokens) for s in samples)
        tokens = torch.zeros(len(samples), width, dtype=torch.int64)
        labels = torch.full((len(samples), width), IGNORE, dtype=torch.int64)
        for row, s in enumerate(samples):
            tokens[row, : len(s.tokens)] = s.tokens
            labels[row, : len(s.labels)] = s.labels
        return ImageTaskBatchPacked(
            __key__=[s.__key__ for s in samples],
            __restore_key__=tuple(s.__restore_key__ for s in samples),
            __subflavor__=None,
            __subflavors__=[s.__subflavors__ for s in samples],
            tokens=tokens,
            labels=labels,
            imgs=torch.stack([img for s in samples for img in s.imgs]),
            cu_lengths=[s.cu_lengths.tolist() if packed else [0, s.total_len] for s in samples],
            sources=[s.sources if packed else [s.__subflavors__["source"]] for s in samples],
            was_pil=[p for s in samples for p in (s.was_pil if packed else [s.was_pil])],
            augment=[a for s in samples for a in (s.augment if packed else [s.augment])],
        )

    def encode_batch(self, batch: ImageTaskBatchPacked) -> dict[str, Any]:
        raw = dataclasses.asdict(batch)
        del raw["__subflavors__"]
        return raw


def print_error_handler(exc: Exception, key: str | None) -> None:
    ERRORS.append(f"{key}: {exc}")
    print(f"The following exception occurred for sample {key} and is skipped", file=sys.stderr)
    traceback.print_exc()


def cyclic_iter(iterable: Any) -> Any:
    while True:
        yield from iterable


def summary(batch: dict[str, Any]) -> dict[str, Any]:
    return {
        "keys": list(batch["__key__"]),
        "sources": batch["sources"],
        "tokens": batch["tokens"].tolist(),
        "labels": batch["labels"].tolist(),
        "cu_lengths": batch["cu_lengths"],
        "imgs": [list(batch["imgs"].shape), hashlib.sha256(batch["imgs"].numpy()).hexdigest()],
        "was_pil": batch["was_pil"],
        "augment": batch["augment"],
    }


def datasets_provider(blend: str, task_encoder: TaskEncoder, worker_config: Any, packing: bool):
    common = {
        "batch_size": MICRO_BATCH,
        "task_encoder": task_encoder,
        "worker_config": worker_config,
        "packing_buffer_size": 8 if packing else None,
        "handler": print_error_handler,
        "image_decode": "pil",
    }
    train = get_train_dataset(
        blend,
        virtual_epoch_length=1000,
        max_samples_per_sequence=100,
        shuffle_buffer_size=100,
        **common,
    )
    val = [
        LimitDataset(
            RepeatDataset(val_ds, worker_config=worker_config),
            length=EVAL_ITERS,
            worker_config=worker_config,
            reset_after_epoch=True,
        )
        for val_ds, _source in get_val_datasets(blend, **common)
    ]
    return train, val


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("blend")
    parser.add_argument("out")
    parser.add_argument("--packing", action="store_true")
    args = parser.parse_args()
    out = Path(args.out)

    worker_config = WorkerConfig(
        rank=0,
        world_size=1,
        num_workers=2,
        data_parallel_group=None,
        worker_debug_path=None,
        worker_log_level=0,
    )

    def build() -> tuple[Any, list[Any]]:
        encoder = TaskEncoder(PACK_LENGTH if args.packing else None)
        return datasets_provider(args.blend, encoder, worker_config, args.packing)

    train_ds, val_ds = build()
    train_loader = get_savable_loader(train_ds, worker_config=worker_config)
    train = cyclic_iter(train_loader)
    before = [summary(next(train)) for _ in range(SAVE_AT)]
    checkpoint = out.with_name("train_dataloader_dprank000.pt")
    torch.save({"dataloader_state_dict": train_loader.save_state_rank()}, checkpoint)
    after = [summary(next(train)) for _ in range(TAIL)]
    val = []
    for ds in val_ds:
        loader = cyclic_iter(get_loader(ds, worker_config=worker_config))
        val.append([summary(next(loader)) for _ in range(2 * EVAL_ITERS)])

    resumed_ds, _ = build()
    resumed_loader = get_savable_loader(resumed_ds, worker_config=worker_config)
    try:  # as dataloader_provider.py loads it: torch's default, weights_only=True
        state = torch.load(checkpoint, map_location="cpu")
        plain_data = True
    except pickle.UnpicklingError:  # a state holding classes (Megatron-LM would skip it)
        state = torch.load(checkpoint, map_location="cpu", weights_only=False)
        plain_data = False
    resumed_loader.restore_state_rank(state["dataloader_state_dict"])
    resumed = cyclic_iter(resumed_loader)
    resumed_batches = [summary(next(resumed)) for _ in range(TAIL)]

    result = {"before": before, "after": after, "resumed": resumed_batches, "val": val,
              "plain_data_state": plain_data}  # fmt: skip
    out.write_text(json.dumps({**result, "errors": ERRORS}))


if __name__ == "__main__":
    main()
