"""A Megatron-Bridge data path, as a training script runs it, on Bridge's own code.

Run as ``python -m stoker.energon_alias tests/integration/_bridge_client.py DATA OUT [--packing]``
(with the repository root on ``PYTHONPATH``), or with plain ``python`` against Energon itself.
It builds Bridge's ``EnergonMultiModalDataModule`` with Bridge's ``QwenVLTaskEncoder`` (and, with
``--packing``, a subclass adding the packing hooks a Bridge user writes: the published Bridge's
Qwen-VL encoder has none), takes micro-batches with 2 dataloader workers, saves the loader state
through a ``torch.save`` checkpoint, resumes in a new data module and writes every micro-batch
(summarised) to the JSON file ``OUT``. With ``--stoker-datamodule``, stoker's
``EnergonMultiModalDataModule`` takes the place of Bridge's (with Bridge's task encoder). With
``--data-parallel`` (under ``torchrun``), megatron-core's parallel state is initialised first, so
Bridge's data module takes each rank's data-parallel rank and group from it; each rank writes
``OUT.rank{N}``.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import io
import json
from typing import Any

import numpy as np
import torch

from tests.integration._bridge import (
    DATAMODULE,
    QWEN_VL_TASK_ENCODER,
    bridge_module,
    qwen_image_processor,
    qwen_tokenizer,
)

SAVE_AT, TAIL, VAL = 5, 10, 3
#: Tokens per packed sequence.
PACK_LENGTH = 48


def packing_encoder(module: Any, **options: Any) -> Any:
    """Bridge's ``QwenVLTaskEncoder`` plus the packing hooks a user adds: samples in buffer
    order into packs of at most :data:`PACK_LENGTH` tokens, each pack one ``QwenVLTaskSample``."""
    from megatron.energon import stateless

    class PackingQwenVLTaskEncoder(module.QwenVLTaskEncoder):  # type: ignore[misc]
        @stateless  # packing buffers restore by encoding their samples again
        def encode_sample(self, sample: Any) -> Any:
            encoded = super().encode_sample(sample)
            # Bridge's QwenVLTaskSample has no restore key of its own: carry the sample's.
            encoded.__restore_key__ = sample.__restore_key__
            return encoded

        def select_samples_to_pack(self, samples: list[Any]) -> list[list[Any]]:
            packs: list[list[Any]] = [[]]
            for sample in samples:
                if (
                    packs[-1]
                    and sum(len(s.text) for s in packs[-1]) + len(sample.text) > PACK_LENGTH
                ):
                    packs.append([])
                packs[-1].append(sample)
            return packs

        @stateless
        def pack_selected_samples(self, samples: list[Any]) -> Any:
            with_images = [s for s in samples if len(s.imgs) > 0]
            return module.QwenVLTaskSample(
                __key__="+".join(s.__key__ for s in samples),
                __subflavors__=samples[0].__subflavors__,
                imgs=torch.cat([s.imgs for s in with_images]) if with_images else [],
                videos=[],
                image_thw_grids=np.concatenate([s.image_thw_grids for s in with_images])
                if with_images
                else [],
                video_thw_grids=[],
                image_input_mask=torch.cat([s.image_input_mask for s in samples]),
                video_input_mask=torch.cat([s.video_input_mask for s in samples]),
                text=torch.cat([s.text for s in samples]),
                target=torch.cat([s.target for s in samples]),
            )

    return PackingQwenVLTaskEncoder(**options)


def energon7_fixes(module: Any) -> None:
    """What Bridge 0.3.1's Qwen-VL encoder (written for Energon 6) needs to run on Energon 7.

    Energon 7 asserts that cookers are marked stateless, and its ``Batch`` requires
    ``__key__`` and ``__restore_key__``, which Bridge 0.3.1's ``batch()`` does not pass.
    """
    from megatron.energon import Cooker, stateless

    module.QwenVLTaskEncoder.cookers = [Cooker(stateless(module.cook_chatml_sample))]

    @dataclasses.dataclass(kw_only=True)
    class QwenVLTaskBatch(module.QwenVLTaskBatch):  # type: ignore[misc]
        __key__: list[str] = dataclasses.field(default_factory=list)
        __restore_key__: tuple[Any, ...] = ()

    module.QwenVLTaskBatch = QwenVLTaskBatch


def summary(batch: dict[str, Any], tokenizer: Any) -> dict[str, Any]:
    """What a micro-batch holds, as plain data (pixels as a digest)."""
    pixels = batch["pixel_values"]
    labels = batch["labels"]
    answers = [
        tokenizer.decode([t for t in row.tolist() if t >= 0], skip_special_tokens=False)
        for row in labels
    ]
    grids = batch["image_grid_thw"]
    return {
        "keys": list(batch["__keys__"]),
        "input_ids": batch["input_ids"].tolist(),
        "labels": labels.tolist(),
        "answers": answers,
        "image_tokens": batch["image_input_mask"].sum(dim=1).tolist(),
        "grids": [] if grids is None else grids.tolist(),
        "pixel_rows": 0 if pixels is None else int(pixels.shape[0]),
        "pixels": None
        if pixels is None
        else hashlib.sha256(pixels.float().numpy().tobytes()).hexdigest(),
        "visual_inputs": type(batch["visual_inputs"]).__name__,
        "visual_grids": batch["visual_inputs"].image_grid_thw.tolist(),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("data")
    parser.add_argument("out")
    parser.add_argument("--packing", action="store_true")
    parser.add_argument("--energon7-fixes", action="store_true")
    parser.add_argument("--stoker-datamodule", action="store_true")
    parser.add_argument("--data-parallel", action="store_true")
    args = parser.parse_args()

    out = args.out
    if args.data_parallel:  # under torchrun: Megatron's parallel state, one replica per rank
        import torch.distributed as dist

        dist.init_process_group("gloo")
        from megatron.core import parallel_state

        parallel_state.initialize_model_parallel()
        out = f"{out}.rank{parallel_state.get_data_parallel_rank()}"
    datamodule = bridge_module(DATAMODULE)
    qwen_vl = bridge_module(QWEN_VL_TASK_ENCODER)
    if args.energon7_fixes:
        energon7_fixes(qwen_vl)
    tokenizer, processor = qwen_tokenizer(), qwen_image_processor()

    def data_module() -> Any:
        options = {
            "tokenizer": tokenizer,
            "image_processor": processor,
            "max_padding_length": 64,
            "min_pixels": 28 * 28,
            "max_pixels": 56 * 56,
        }
        if args.packing:
            encoder = packing_encoder(qwen_vl, **options)
        else:
            encoder = qwen_vl.QwenVLTaskEncoder(**options)
        loading = {
            "shuffle_buffer_size": 8,
            "max_samples_per_sequence": 4,
            "task_encoder": encoder,
            "packing_buffer_size": 6 if args.packing else None,
        }
        if args.stoker_datamodule:  # the one-line switch, called in current Bridge's order
            from stoker.integrations.megatron import EnergonMultiModalDataModule

            return EnergonMultiModalDataModule(args.data, tokenizer, 64, 2, 2, **loading)
        return datamodule.EnergonMultiModalDataModule(
            args.data,
            tokenizer,
            processor,
            seq_length=64,
            micro_batch_size=2,
            global_batch_size=2,
            num_workers=2,
            **loading,
        )

    data = data_module()
    train = data.train_dataloader()
    before = [summary(next(train), tokenizer) for _ in range(SAVE_AT)]
    checkpoint = io.BytesIO()
    torch.save({"dataloader_state_dict": train.save_state()}, checkpoint)
    after = [summary(next(train), tokenizer) for _ in range(TAIL)]
    val = data.val_dataloader()
    val_batches = [summary(next(val), tokenizer) for _ in range(VAL)]

    resumed_data = data_module()
    resumed = resumed_data.train_dataloader()
    checkpoint.seek(0)
    state = torch.load(checkpoint, weights_only=False)["dataloader_state_dict"]
    resumed_data.train_dataloader_object.restore_state_rank(state)
    resumed_batches = [summary(next(resumed), tokenizer) for _ in range(TAIL)]

    with open(out, "w") as file:
        result = {"before": before, "after": after, "resumed": resumed_batches, "val": val_batches}
        json.dump(result, file)


if __name__ == "__main__":
    main()
