"""Readable text for samples and batches, for logs, error messages and debugging.

Energon's ``megatron.energon.sample_utils`` names, with Energon's output format:
``format_sample_detailed`` renders a sample as block YAML (tensors and arrays summarised with
shape, dtype, min, max and a few values), ``format_sample_compact`` as one line, and
``default_get_batch_keys`` finds the sample keys of a batch.

Example:
    >>> print(format_sample_detailed({"label": 5, "text": "hi"}))
    label: 5
    text: hi
    >>> format_sample_compact({"label": 5, "tags": ["a", "b"]})
    "{label: '5', tags: ['a', 'b']}"
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import numpy as np
import yaml

__all__ = ["default_get_batch_keys", "format_sample_compact", "format_sample_detailed"]

_SHOWN_VALUES = 3  # values shown at each end of a long tensor or array
_DICT_ITEMS = 25
_LIST_ITEMS = 10
_STR_CHARS = 1000
_REPR_CHARS = 200


def _is_tensor(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def _is_dataclass_instance(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def _string_keys(keys: Any) -> list[str] | None:
    if isinstance(keys, list) and all(isinstance(key, str) for key in keys):
        return keys
    return None


def default_get_batch_keys(batch: Any) -> list[str] | None:
    """The sample keys of a batch (or of the first item of a list), or None.

    Looks at the ``__key__`` / ``__keys__`` attributes, then the ``__key__``, ``__keys__`` and
    ``keys`` entries of a dict; the first that is a list of strings wins.

    Example:
        >>> default_get_batch_keys({"__key__": ["a/0", "a/1"]})
        ['a/0', 'a/1']
    """
    if isinstance(batch, list):
        batch = batch[0]
    for attribute in ("__key__", "__keys__"):
        found = _string_keys(getattr(batch, attribute, None))
        if found is not None:
            return found
    if isinstance(batch, dict):
        for entry in ("__key__", "__keys__", "keys"):
            if entry in batch:
                found = _string_keys(batch[entry])
                if found is not None:
                    return found
    return None


def _compact_items(items: Any, depth: int, max_items: int, max_str_len: int) -> str:
    return ", ".join(format_sample_compact(v, depth - 1, max_items, max_str_len) for v in items)


def format_sample_compact(
    sample: Any, depth: int = 3, max_items: int = 10, max_str_len: int = 50
) -> str:
    """One line describing ``sample``, cut at ``depth`` levels, ``max_items`` and ``max_str_len``.

    Example:
        >>> format_sample_compact(("a" * 60, 1), max_str_len=5)
        "('aaaaa...', '1')"
    """
    if isinstance(sample, dict):
        if depth <= 0:
            return "{...}"
        parts = []
        for key, value in list(sample.items())[:max_items]:
            if isinstance(key, str) and key.startswith("__"):
                parts.append(f"{key}: {value!r}")
            else:
                parts.append(
                    f"{key}: {format_sample_compact(value, depth - 1, max_items, max_str_len)}"
                )
        return "{" + ", ".join(parts) + "}"
    if isinstance(sample, (list, tuple)):
        opening, closing = ("[", "]") if isinstance(sample, list) else ("(", ")")
        if depth <= 0:
            return f"{opening}...{closing}"
        return opening + _compact_items(sample[:max_items], depth, max_items, max_str_len) + closing
    if isinstance(sample, str):
        return repr(sample[:max_str_len] + "...") if len(sample) > max_str_len else repr(sample)
    if _is_tensor(sample):
        return f"Tensor(shape={sample.shape}, dtype={sample.dtype}, device={sample.device})"
    if isinstance(sample, np.ndarray):
        return f"np.ndarray(shape={sample.shape}, dtype={sample.dtype})"
    if _is_dataclass_instance(sample):
        limits = (depth, max_items, max_str_len)
        fields = ", ".join(
            f"{f.name}={format_sample_compact(getattr(sample, f.name), *limits)}"
            for f in dataclasses.fields(sample)
        )
        return f"{type(sample).__name__}({fields})"
    return format_sample_compact(repr(sample), depth, max_items, max_str_len)


def _values(flat: list[Any]) -> str:
    if len(flat) <= 2 * _SHOWN_VALUES:
        return ", ".join(repr(v) for v in flat)
    return _ends(flat[:_SHOWN_VALUES] + flat[-_SHOWN_VALUES:])


def _ends(ends: list[Any]) -> str:
    head = ", ".join(repr(v) for v in ends[:_SHOWN_VALUES])
    tail = ", ".join(repr(v) for v in ends[_SHOWN_VALUES:])
    return f"{head}, ..., {tail}"


def _tensor_text(tensor: Any) -> str:
    head = f"Tensor(shape={tensor.shape}, dtype={tensor.dtype}, device={tensor.device}"
    if tensor.numel() == 0:
        return f"{head}, values=[])"
    try:
        low, high = tensor.min().item(), tensor.max().item()
        flat = tensor.flatten()
        shown = [v.item() for v in flat] if flat.numel() <= 2 * _SHOWN_VALUES else None
        ends = [v.item() for v in (*flat[:_SHOWN_VALUES], *flat[-_SHOWN_VALUES:])]
    except (RuntimeError, ValueError):
        return f"{head})"
    values = _values(shown) if shown is not None else _ends(ends)
    return f"{head}, min={low}, max={high}, values=[{values}])"


def _array_text(array: np.ndarray[Any, Any]) -> str:
    head = f"np.ndarray(shape={array.shape}, dtype={array.dtype}"
    if array.size == 0:
        return f"{head}, values=[])"
    try:
        low, high = array.min(), array.max()
    except (ValueError, TypeError):
        return f"{head})"
    return f"{head}, min={low}, max={high}, values=[{_values(list(array.ravel()))}])"


def _key(key: Any) -> Any:
    return key if isinstance(key, (str, int, float, bool, type(None))) else repr(key)


def _plain(value: Any) -> Any:
    """``value`` as plain YAML data: containers cut short, tensors and objects as text."""
    if _is_tensor(value):
        return _tensor_text(value)
    if isinstance(value, np.ndarray):
        return _array_text(value)
    if _is_dataclass_instance(value):
        fields = {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {type(value).__name__: fields}
    if isinstance(value, dict):
        items = list(value.items())
        out = {_key(k): _plain(v) for k, v in items[:_DICT_ITEMS]}
        if len(items) > _DICT_ITEMS:
            out["..."] = f"and {len(items) - _DICT_ITEMS} more items"
        return out
    if isinstance(value, (list, tuple)):
        listed = [_plain(v) for v in value[:_LIST_ITEMS]]
        if len(value) > _LIST_ITEMS:
            listed.append(f"... and {len(value) - _LIST_ITEMS} more items")
        return listed
    if isinstance(value, str):
        if len(value) > _STR_CHARS:
            return f"{value[:_STR_CHARS]}... (and {len(value) - _STR_CHARS} more characters)"
        return value
    if isinstance(value, (int, float, bool, type(None))):
        return value
    text = repr(value)
    return text[:_REPR_CHARS] + "..." if len(text) > _REPR_CHARS else text


def format_sample_detailed(sample: Any, indent: str = "") -> str:
    """Several lines of block YAML describing ``sample``, each prefixed with ``indent``.

    Example:
        >>> print(format_sample_detailed({"scores": [1, 2]}, indent="  "))
          scores:
          - 1
          - 2
    """
    text = yaml.safe_dump(_plain(sample), sort_keys=False, default_flow_style=False, width=120)
    text = text.rstrip()
    text = text.removesuffix("\n...")
    if not indent:
        return text
    return "\n".join(f"{indent}{line}" if line else line for line in text.splitlines())
