"""The settings of ``stoker bench`` and the user's task encoder it loads with.

Example:
    >>> settings = BenchSettings("/data/shards", workers=(0, 2), image_decode="torchrgb8")
    >>> settings.check()
    >>> make_task_encoder(settings).decoder.image_decode
    'torchrgb8'
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
from typing import Any

from stoker.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class BenchSettings:
    """What to load and how. ``task_encoder`` is ``"module:Class"`` (None: the default one).

    ``seconds`` (when set) measures each worker count for that long instead of ``batches``.
    ``hold``: the batches the simulated loop keeps while it asks for the next (1: a plain
    ``for batch in loader``; 2: it keeps the previous one too, as a loop that logs it does).
    Decoder options (``image_decode``, ``av_decode``) replace the task encoder's ``decoder``
    when given.
    """

    path: str
    workers: tuple[int, ...] = (0, 2, 4)
    batch_size: int = 16
    batches: int = 50
    seconds: float | None = None
    consumer_ms: float = 0.0
    task_encoder: str | None = None
    image_decode: str | None = None
    av_decode: str | None = None
    split_part: str = "train"
    shuffle_buffer_size: int = 100
    max_samples_per_sequence: int | None = 100
    prefetch_factor: int = 2
    hold: int = 1
    #: Worker types to try at each worker count (None: processes, the loader's default).
    worker_types: tuple[str | None, ...] = (None,)

    def check(self) -> None:
        """Refuse settings that cannot be measured, saying which option to change."""
        if not self.workers or any(w < 0 for w in self.workers):
            raise ConfigError(
                f"invalid worker counts {self.workers}.",
                hint="Give --workers as counts >= 0, e.g. --workers 0,2,4.",
            )
        if self.batch_size < 1 or self.batches < 1 or self.prefetch_factor < 1:
            raise ConfigError(
                f"invalid batch_size={self.batch_size}, batches={self.batches} or "
                f"prefetch_factor={self.prefetch_factor}.",
                hint="Use --batch-size, --batches and --prefetch-factor >= 1.",
            )
        if self.hold < 1:
            raise ConfigError(
                f"invalid hold={self.hold}.",
                hint="Use --hold 1 for a plain loop, or the number of batches your loop keeps.",
            )
        if (self.seconds is not None and self.seconds <= 0) or self.consumer_ms < 0:
            raise ConfigError(
                f"invalid seconds={self.seconds} or consumer_ms={self.consumer_ms}.",
                hint="Use --seconds > 0 and --consumer-ms >= 0.",
            )


def parse_workers(text: str) -> tuple[int, ...]:
    """``"0,2,4"`` -> ``(0, 2, 4)``, sorted and without repeats.

    Example:
        >>> parse_workers("4, 0,2,2")
        (0, 2, 4)
    """
    try:
        counts = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        counts = []
    if not counts or counts[0] < 0:
        raise ConfigError(
            f"cannot read worker counts from {text!r}.",
            hint="Give comma-separated counts >= 0, e.g. --workers 0,2,4.",
        )
    return tuple(counts)


def parse_worker_types(text: str) -> tuple[str | None, ...]:
    """``"fork,thread"`` -> ``("fork", "thread")``, each checked (empty: the default, None).

    Example:
        >>> parse_worker_types("fork, thread"), parse_worker_types("")
        (('fork', 'thread'), (None,))
    """
    from stoker.runtime.worker_types import worker_type_name

    names = [part.strip() for part in text.split(",") if part.strip()]
    return tuple(dict.fromkeys(worker_type_name(name) for name in names)) or (None,)


def make_task_encoder(settings: BenchSettings) -> Any:
    """The task encoder named by ``settings.task_encoder``, with the decoder options applied."""
    from stoker.model.task import DefaultTaskEncoder
    from stoker.pipeline.decode import SampleDecoder

    encoder = DefaultTaskEncoder() if settings.task_encoder is None else _load(settings)
    if settings.image_decode is not None or settings.av_decode is not None:
        current = getattr(encoder, "decoder", None)
        options: dict[str, Any] = {
            "image_decode": settings.image_decode or getattr(current, "image_decode", "torchrgb"),
            "av_decode": settings.av_decode or getattr(current, "av_decode", "AVDecoder"),
        }
        encoder.decoder = SampleDecoder(**options)
    return encoder


def _load(settings: BenchSettings) -> Any:
    spec = settings.task_encoder or ""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigError(
            f"--task-encoder {spec!r} is not 'module:Class'.",
            hint="Name the class as module:Class, e.g. --task-encoder my_project.data:MyEncoder.",
        )
    if os.getcwd() not in sys.path:  # as `python -m` does: modules beside the user are found
        sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as e:
        raise ConfigError(
            f"cannot load the task encoder {spec!r}: {e}.",
            hint="Check the module is importable from this directory (or PYTHONPATH).",
        ) from None
    try:
        return target() if isinstance(target, type) else target
    except TypeError as e:
        raise ConfigError(
            f"cannot create the task encoder {spec!r} without arguments: {e}.",
            hint="Point --task-encoder at an instance (module:name) or a class with defaults.",
        ) from None
