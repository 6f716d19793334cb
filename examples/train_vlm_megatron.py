"""A Megatron-style training loop over stoker's multimodal data module; save, restart, resume.

    python examples/train_vlm_megatron.py [--data demo-data/shards] [--steps 200] [--megatron-core]

The data module is built as Megatron-Bridge builds its Energon one (change of import only). Each
optimizer step takes ``global_batch_size / (micro_batch_size x data-parallel size)``
micro-batches with ``next(train_iter)``; a checkpoint holds the model, the optimizer and
``train_iter.save_state()`` under ``dataloader_state_dict``, as Megatron-LM stores it. After a
simulated restart, a fresh data module is restored from the checkpoint and the loop checks that it
yields the micro-batches the first one would have.

``--megatron-core`` initialises megatron-core's model parallel state (one process, gloo): the data
module then takes its data-parallel rank from it. Runs in well under a minute on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tiny_vlm import IMAGE_TOKENS, TinyVLM
from vlm_data import ResizeNormalize, WordTokenizer, captions, make_demo_dataset

from stoker.integrations.megatron import EnergonMultiModalDataModule
from stoker.integrations.task_encoder import MultiModalSampleConfig
from stoker.integrations.topology import data_parallel_place

SEQ_LENGTH = 12


def init_megatron_core() -> None:
    """One process, gloo: megatron-core's parallel state with data-parallel size 1."""
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29512")
    dist.init_process_group("gloo", rank=0, world_size=1)
    with warnings.catch_warnings():  # megatron-core warns that Transformer Engine / Apex are absent
        warnings.simplefilter("ignore")
        from megatron.core import parallel_state

    parallel_state.initialize_model_parallel()


def data_module(args: argparse.Namespace, tokenizer: WordTokenizer) -> EnergonMultiModalDataModule:
    return EnergonMultiModalDataModule(
        str(args.data),
        tokenizer,
        ResizeNormalize(32),
        seq_length=SEQ_LENGTH,
        micro_batch_size=8,
        global_batch_size=16,
        num_workers=1,
        multimodal_sample_config=MultiModalSampleConfig(image_tokens_per_image=IMAGE_TOKENS),
        virtual_workers=2,  # passed on to get_train_dataset
    )


def train(
    model: TinyVLM,
    optimizer: torch.optim.Optimizer,
    data: EnergonMultiModalDataModule,
    steps: range,
) -> None:
    """Megatron's loop: each step takes its micro-batches with next(), validates every 50."""
    train_iter, valid_iter = data.train_dataloader(), data.val_dataloader()
    dp_size = train_iter.loader.dataset.worker_config.world_size
    if steps.start == 1:
        place = data_parallel_place(data.pg_collection)
        print(f"data-parallel rank {place.rank} of {place.world_size} (from {place.source})")
    micro_batches = data.global_batch_size // (data.micro_batch_size * dp_size)
    for step in steps:
        optimizer.zero_grad()
        for _ in range(micro_batches):
            (model.loss(next(train_iter)) / micro_batches).backward()
        optimizer.step()
        if step % 50 == 0:
            with torch.no_grad():
                val_loss = sum(float(model.loss(next(valid_iter))) for _ in range(3)) / 3
            print(f"step {step}: val loss {val_loss:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("demo-data/shards"))
    parser.add_argument("--out", type=Path, default=Path("demo-data/runs/vlm-megatron"))
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--megatron-core", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)  # a tiny model: threads only fight the dataloader worker
    if not args.data.exists():
        make_demo_dataset(args.data)
    if args.megatron_core:
        init_megatron_core()
    torch.manual_seed(0)
    tokenizer = WordTokenizer(captions(str(args.data)))
    model = TinyVLM(tokenizer.vocab_size, SEQ_LENGTH)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    half = args.steps // 2

    data = data_module(args, tokenizer)
    train(model, optimizer, data, range(1, half + 1))
    checkpoint = args.out / "checkpoint.pt"
    args.out.mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "dataloader_state_dict": data.train_dataloader().save_state(),
        },
        checkpoint,
    )
    expected = [next(data.train_dataloader()).__key__ for _ in range(3)]  # what would come next
    print(f"step {half}: saved {checkpoint}; the job ends")

    # A new job: build everything again and restore it from the checkpoint.
    saved = torch.load(checkpoint, weights_only=True)
    model.load_state_dict(saved["model"])
    optimizer.load_state_dict(saved["optimizer"])
    data = data_module(args, tokenizer)
    data.load_state_dict(saved)  # or: data.train_dataloader().restore_state(saved)
    resumed = [next(data.train_dataloader()).__key__ for _ in range(3)]
    print(f"the restored loader continues where the first job stopped: {resumed == expected}")
    if resumed != expected:
        raise SystemExit(f"expected {expected}, got {resumed}")
    data.load_state_dict(saved)  # rewind the 3 micro-batches looked at, and train on
    train(model, optimizer, data, range(half + 1, args.steps + 1))


if __name__ == "__main__":
    main()
