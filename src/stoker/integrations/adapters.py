"""Call the tokenizers and image processors that training code already has, whatever their kind.

Tokenizers: a ``tokenizers.Tokenizer`` (``encode(text).ids``), a Hugging Face ``transformers``
tokenizer (``encode(text) -> list[int]``), a Megatron tokenizer (``tokenize(text) -> list[int]``),
or any callable ``text -> list[int]``. Image processors: any callable ``image -> tensor``, where
``image`` is a ``(C, H, W)`` tensor as stoker decodes it; a result with ``pixel_values`` (Hugging
Face image processors) is unwrapped, and a leading batch dimension of 1 removed.

Example:
    >>> token_ids(lambda text: [len(w) for w in text.split()], "a red circle")
    [1, 3, 6]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from stoker.errors import ConfigError


def token_ids(tokenizer: Any, text: str) -> list[int]:
    """``text`` as token ids with ``tokenizer`` (see the module docstring for the kinds)."""
    if hasattr(tokenizer, "encode"):
        result = tokenizer.encode(text)
    elif hasattr(tokenizer, "tokenize"):
        result = tokenizer.tokenize(text)
    elif callable(tokenizer):
        result = tokenizer(text)
    else:
        raise ConfigError(
            f"cannot tokenize with a {type(tokenizer).__name__}.",
            hint="Pass a tokenizer with encode(text) or tokenize(text), or a function text -> ids.",
        )
    ids = getattr(result, "ids", result)  # tokenizers.Encoding
    if isinstance(ids, Mapping):
        ids = ids["input_ids"]
    if isinstance(ids, torch.Tensor):
        ids = ids.flatten().tolist()
    if not isinstance(ids, Sequence) or not all(isinstance(i, int) for i in ids):
        raise ConfigError(
            f"the tokenizer gave {type(ids).__name__} for a text, not a list of token ids.",
            hint="Wrap it in a function text -> list[int].",
        )
    return list(ids)


def special_token_id(tokenizer: Any, names: Sequence[str]) -> int | None:
    """The first of the attributes ``names`` of ``tokenizer`` that holds an int (or None).

    Example:
        >>> class T:
        ...     eod = 2
        >>> special_token_id(T(), ("eos_token_id", "eod"))
        2
    """
    for name in names:
        value = getattr(tokenizer, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def processed_image(image_processor: Any, image: Any) -> torch.Tensor:
    """``image`` through ``image_processor``, as one ``(C, H, W)`` float tensor."""
    if image_processor is None:
        result = image
    elif callable(image_processor):
        result = image_processor(image)
    else:
        raise ConfigError(
            f"cannot process images with a {type(image_processor).__name__}.",
            hint="Pass a callable image -> tensor (or a Hugging Face image processor).",
        )
    if isinstance(result, Mapping) or hasattr(result, "pixel_values"):
        result = result["pixel_values"] if isinstance(result, Mapping) else result.pixel_values
    if isinstance(result, list | tuple) and len(result) == 1:
        result = result[0]
    tensor = torch.as_tensor(result)
    if tensor.dim() == 4 and tensor.shape[0] == 1:
        tensor = tensor[0]
    if tensor.dim() != 3:
        raise ConfigError(
            f"the image processor gave a tensor of shape {tuple(tensor.shape)}, not (C, H, W).",
            hint="Return one image per call, resized to a fixed size.",
        )
    return tensor.float()
