"""Train a tiny vision-language model on the demo dataset with Lightning; crash, resume, caption.

    python examples/train_vlm_lightning.py [--data demo-data/shards] [--steps 300]

1. Makes the demo dataset if ``--data`` does not exist (what ``make demo`` makes), trains a
   word-level tokenizer on its captions, and sets up ``StokerDataModule`` with
   ``MultiModalTaskEncoder`` (tokenizer + resize/normalise image processor).
2. Trains for ``--steps`` steps with a checkpoint every ``--every`` steps, and "crashes" at
   two thirds of the way.
3. Resumes from the last checkpoint: the model, the optimizer *and the data position* come back,
   so the resumed run trains on exactly the batches the crashed run would have trained on
   (``--check`` also runs the training uninterrupted and compares, step by step).
4. Captions a few validation images. Runs in about 20 s on a 2-core CPU (40 s with --check).
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import warnings
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tiny_vlm import IMAGE_TOKENS, TinyVLM
from vlm_data import ResizeNormalize, WordTokenizer, captions, make_demo_dataset

from stoker.integrations.lightning import StokerDataModule
from stoker.integrations.task_encoder import (
    MultiModalSampleConfig,
    MultiModalTaskEncoder,
)

SEQ_LENGTH = 12  # 4 image placeholders + "a red circle" + [EOS], padded


class CaptionModel(pl.LightningModule):
    def __init__(self, vocab_size: int) -> None:
        super().__init__()
        self.model = TinyVLM(vocab_size, SEQ_LENGTH)
        self.keys: list[list[str]] = []  # the sample keys of each step of this fit

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.keys.append(list(batch.__key__))
        loss = self.model.loss(batch)
        self.log("loss", loss, prog_bar=True, batch_size=len(batch.__key__))
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", self.model.loss(batch), batch_size=len(batch.__key__))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.parameters(), lr=3e-3)


class Crash(Exception):
    """Stands for a node failure, a pre-emption, an out-of-memory kill."""


class CrashAt(pl.Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(self, trainer: pl.Trainer, *args: Any) -> None:
        if trainer.global_step >= self.step:
            raise Crash(f"crash after step {trainer.global_step}")


def trainer(steps: int, out: Path, every: int, callbacks: list[pl.Callback]) -> pl.Trainer:
    save = pl.callbacks.ModelCheckpoint(out, every_n_train_steps=every, save_top_k=-1)
    return pl.Trainer(
        accelerator="cpu",
        max_steps=steps,
        default_root_dir=out,
        callbacks=[save, *callbacks],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        check_val_every_n_epoch=5,
        log_every_n_steps=10,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("demo-data/shards"))
    parser.add_argument("--out", type=Path, default=Path("demo-data/runs/vlm-lightning"))
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--every", type=int, default=50)
    parser.add_argument("--check", action="store_true", help="compare with an uninterrupted run")
    args = parser.parse_args()
    # A tiny model gains nothing from threads, and they fight the dataloader worker for the cores.
    torch.set_num_threads(1)
    shutil.rmtree(args.out, ignore_errors=True)  # checkpoints of an earlier run would be resumed
    if not args.data.exists():
        print(f"making the demo dataset in {args.data}")
        make_demo_dataset(args.data)
    tokenizer = WordTokenizer(captions(str(args.data)))
    config = MultiModalSampleConfig(image_tokens_per_image=IMAGE_TOKENS)
    encoder = MultiModalTaskEncoder(tokenizer, ResizeNormalize(32), SEQ_LENGTH, config)

    def data() -> StokerDataModule:
        return StokerDataModule(
            str(args.data),
            batch_size=16,
            task_encoder=encoder,
            num_workers=1,
            num_val_workers=0,  # 40 samples: loading them in the main process is quickest
            virtual_workers=2,  # fixed: the run may resume with other numbers of workers
        )

    crash_at = args.steps * 2 // 3 + args.every // 2
    print(f"training {args.steps} steps, checkpoint every {args.every}, crash at {crash_at}")
    torch.manual_seed(0)
    crashed = CaptionModel(tokenizer.vocab_size)
    with contextlib.suppress(Crash):
        trainer(args.steps, args.out, args.every, [CrashAt(crash_at)]).fit(
            crashed, datamodule=data()
        )
    last = max(args.out.glob("*.ckpt"), key=lambda p: int(p.stem.split("step=")[1]))
    saved_step = int(last.stem.split("step=")[1])
    print(f"crashed after step {crash_at}; resuming from {last.name}")

    resumed, dm = CaptionModel(tokenizer.vocab_size), data()
    run = trainer(args.steps, args.out, args.every, [])
    run.fit(resumed, datamodule=dm, ckpt_path=last)
    print(f"resumed at step {saved_step + 1} with samples {resumed.keys[0][:4]} ...")
    print(f"final loss {float(run.callback_metrics['loss']):.3f}, data position {position(dm)}")
    show_captions(resumed.model, dm, tokenizer)
    if args.check:
        torch.manual_seed(0)
        full = CaptionModel(tokenizer.vocab_size)
        trainer(args.steps, args.out / "uninterrupted", args.every, []).fit(full, datamodule=data())
        same = crashed.keys[:saved_step] + resumed.keys == full.keys
        print(f"same {len(full.keys)} batches as an uninterrupted run, step by step: {same}")
        if not same:
            raise SystemExit("the resumed run trained on other batches")


def position(dm: StokerDataModule) -> dict[str, Any]:
    (state,) = dm.state_dict()["train"]["ranks"]
    return {"epoch": state["epoch"], "batches": state["yielded"]}


def show_captions(model: TinyVLM, dm: StokerDataModule, tokenizer: WordTokenizer) -> None:
    """Greedy captions of the first validation batch: a few shown, all counted."""
    model.eval()
    batch = next(iter(dm.val_dataloader()))
    right = 0
    for row in range(len(batch.__key__)):
        ids = model.caption(batch, row, prompt_length=IMAGE_TOKENS, steps=4)
        ids = ids[: ids.index(tokenizer.eos_token_id)] if tokenizer.eos_token_id in ids else ids
        predicted = tokenizer.decode(ids)
        truth = tokenizer.decode(t for t in batch.tokens[row].tolist() if t >= 0)
        right += predicted == truth
        if row < 4:
            print(f"  {batch.__key__[row]}: predicted {predicted!r}, truth {truth!r}")
    print(f"  {right} of {len(batch.__key__)} validation images captioned right")


if __name__ == "__main__":
    # Lightning 2.6 calls a pytree API that torch 2.13 deprecates; and it warns when a resumed
    # run writes checkpoints next to the one it resumed from, which is what we want here.
    warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)`")
    warnings.filterwarnings("ignore", message="Checkpoint directory .* exists and is not empty")
    main()
