"""A tiny LightningModule that records which samples each step saw, and a crash callback.

The model predicts one number from an image's mean colour: enough for a real optimizer step and
a real checkpoint, fast on one CPU core.
"""

from __future__ import annotations

from typing import Any

import pytorch_lightning as pl
import torch


class KeyRecorder(pl.LightningModule):
    """Trains a linear layer on mean colours; ``train_keys[i]`` are the keys of step ``i + 1``
    of this fit, ``val_keys`` one list per validation run."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(3, 1)
        self.train_keys: list[list[str]] = []
        self.val_keys: list[list[str]] = []

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.train_keys.append(list(batch.__key__))
        colours = batch.image.float().mean(dim=(2, 3))
        return ((self.layer(colours) - 0.5) ** 2).mean()

    def on_validation_epoch_start(self) -> None:
        self.val_keys.append([])

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.val_keys[-1].extend(batch.__key__)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


class Crash(Exception):
    """What :class:`CrashAt` raises: the run dies as if the machine went away."""


class CrashAt(pl.Callback):
    """Raise :class:`Crash` at the end of training step ``step`` (after checkpoints of it)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(self, trainer: pl.Trainer, *args: Any) -> None:
        if trainer.global_step >= self.step:
            raise Crash(f"crashed after step {trainer.global_step}")


def trainer(max_steps: int, root: str, callbacks: list[pl.Callback] | None = None) -> pl.Trainer:
    """A quiet CPU trainer that validates every epoch (2 sanity batches first)."""
    return pl.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=max_steps,
        default_root_dir=root,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        log_every_n_steps=1,
        callbacks=callbacks or [],
    )
