"""Log the training loader's :meth:`~stoker.runtime.loader.Loader.stats` through Lightning.

:class:`StokerStatsCallback` logs ``stats().flat()`` (``data/wait_frac``, ``data/samples_per_s``,
``data/stage/decode_s``, ...) with the ``LightningModule``'s ``log_dict`` every ``every_n_steps``
training steps, so they land in whatever logger the trainer has (TensorBoard, W&B, CSV).
:class:`~stoker.integrations.lightning.StokerDataModule` adds one itself when given
``log_stats_every_n_steps``.

Example:
    >>> callback = StokerStatsCallback(every_n_steps=50)
    >>> trainer = pl.Trainer(callbacks=[callback], logger=False, enable_progress_bar=False)
    >>> callback in trainer.callbacks
    True
"""

from __future__ import annotations

from typing import Any, Protocol

import pytorch_lightning as pl

from stoker.errors import ConfigError
from stoker.runtime.stats_view import LoaderStats


class _HasStats(Protocol):
    def stats(self, *, reset: bool = False) -> LoaderStats | None: ...


class StokerStatsCallback(pl.Callback):
    """Logs the training loader's flat stats every ``every_n_steps`` steps.

    Args:
        every_n_steps: Training steps between two logs (>= 1).
        prefix: Prefix of the logged names (``"data/"``: ``data/wait_frac``, ...).
        datamodule: Whose ``stats()`` to log (None: the trainer's datamodule).
    """

    def __init__(
        self, every_n_steps: int = 50, prefix: str = "data/", datamodule: _HasStats | None = None
    ) -> None:
        if isinstance(every_n_steps, bool) or not isinstance(every_n_steps, int):
            every_n_steps = -1
        if every_n_steps < 1:
            raise ConfigError(
                f"every_n_steps={every_n_steps!r} must be a whole number >= 1.",
                hint="E.g. StokerStatsCallback(every_n_steps=50).",
            )
        self.every_n_steps, self.prefix, self.datamodule = every_n_steps, prefix, datamodule

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args: Any
    ) -> None:
        """Log ``stats().flat()`` through ``pl_module.log_dict`` every ``every_n_steps``."""
        if (trainer.global_step or 0) % self.every_n_steps:
            return
        source = self.datamodule or getattr(trainer, "datamodule", None)
        stats = source.stats() if source is not None and hasattr(source, "stats") else None
        if stats is not None:
            pl_module.log_dict(stats.flat(self.prefix), on_step=True, on_epoch=False)
