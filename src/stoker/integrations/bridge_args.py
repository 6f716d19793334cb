"""The two ways Megatron-Bridge's Energon data module has been called.

Bridge 0.3 and earlier took ``(path, tokenizer, image_processor, seq_length, micro_batch_size,
global_batch_size, num_workers, ...)``; current Bridge dropped ``image_processor`` and
``global_batch_size``: ``(path, tokenizer, seq_length, micro_batch_size, num_workers, ...)``.
:func:`bind_bridge_arguments` accepts both, by keyword or by position: a third positional
argument that is not an integer is the old ``image_processor``.

Example:
    >>> values, extra = bind_bridge_arguments(("/data", "tok", 4096, 2, 4), {})
    >>> values["seq_length"], values["micro_batch_size"], values["num_workers"]
    (4096, 2, 4)
    >>> values, extra = bind_bridge_arguments(("/data", "tok", "proc", 4096, 2, 256, 4), {})
    >>> values["image_processor"], values["global_batch_size"], values["num_workers"]
    ('proc', 256, 4)
"""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Mapping
from typing import Any


def current_parameters(
    path: str,
    tokenizer: Any,
    seq_length: int = 2048,
    micro_batch_size: int = 1,
    num_workers: int = 1,
    num_val_workers: int | None = None,
    pin_memory: bool = True,
    shuffle_buffer_size: int = 100,
    max_samples_per_sequence: int | None = None,
    multimodal_sample_config: Any = None,
    task_encoder: Any = None,
    decoder_seq_length: int | None = None,
    packing_buffer_size: int | None = None,
    validation_task_encoder: Any = None,
    pg_collection: Any = None,
    *,
    image_processor: Any = None,
    global_batch_size: int | None = None,
    **kwargs: Any,
) -> None:
    """Current Bridge's parameters; ``image_processor`` and ``global_batch_size`` (removed by
    Bridge) are still taken by keyword."""


def legacy_signature(current: inspect.Signature) -> inspect.Signature:
    """Bridge 0.3's parameters: current Bridge's, with ``image_processor`` third (required) and
    ``global_batch_size`` (default 1) after ``micro_batch_size``, both positional again."""
    moved = ("image_processor", "global_batch_size")
    parameters = [p for p in current.parameters.values() if p.name not in moved]
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    image_processor = current.parameters["image_processor"]
    parameters.insert(2, image_processor.replace(kind=positional, default=inspect.Parameter.empty))
    after = [p.name for p in parameters].index("micro_batch_size") + 1
    global_batch_size = current.parameters["global_batch_size"]
    parameters.insert(after, global_batch_size.replace(kind=positional, default=1))
    return current.replace(parameters=parameters)


CURRENT = inspect.signature(current_parameters)
LEGACY = legacy_signature(CURRENT)


def is_legacy_call(args: tuple[Any, ...]) -> bool:
    """Whether ``args`` are positional arguments in Bridge 0.3's order (an image processor
    third, where current Bridge takes ``seq_length``)."""
    if len(args) < 3:
        return False
    third = args[2]
    return isinstance(third, bool) or not isinstance(third, numbers.Integral)


def bind_bridge_arguments(
    args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(values, extra)``: every named parameter with its value (defaults filled in) and the
    remaining keyword arguments (for ``get_train_dataset``)."""
    signature = LEGACY if is_legacy_call(args) else CURRENT
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as error:
        style = "Bridge 0.3's order" if signature is LEGACY else "current Bridge's order"
        raise TypeError(
            f"EnergonMultiModalDataModule: {error} (arguments read in {style}: "
            f"{', '.join(signature.parameters)})."
        ) from None
    bound.apply_defaults()
    values = dict(bound.arguments)
    extra = dict(values.pop("kwargs"))
    return values, extra
