"""Failures in a row that each task-encoder hook may have: Energon's ``failure_tolerance``.

``@stateless(failure_tolerance=N)`` on a hook (or ``__default_failure_tolerance__ = N`` on the
task encoder, for every hook without its own) sets how many failures of that hook in a row are
skipped before the run stops with :class:`~stoker.errors.FatalSampleError`, as in Energon;
0 means no limit. Hooks without a tolerance share the loader's
``ErrorPolicy.max_consecutive_failures`` (100, Energon's default tolerance too).

Example:
    >>> from stoker import TaskEncoder, stateless
    >>> class Enc(TaskEncoder):
    ...     @stateless(failure_tolerance=5)
    ...     def encode_sample(self, sample):
    ...         return sample
    >>> hook_tolerances(Enc())
    {'encode_sample': 5}
"""

from __future__ import annotations

from typing import Any

#: The hooks whose failures reach the stream's error tracker under their own name.
TOLERANT_HOOKS = (
    "encode_sample",
    "preencode_sample",
    "postencode_sample",
    "batch",
    "encode_batch",
    "select_samples_to_pack",
    "pack_selected_samples",
    "batch_group_criterion",
)


def hook_tolerances(task_encoder: Any) -> dict[str, int]:
    """Hook name -> its failure tolerance, for the hooks of ``task_encoder`` that set one
    (themselves, or through the encoder's ``__default_failure_tolerance__``)."""
    default = getattr(task_encoder, "__default_failure_tolerance__", None)
    limits: dict[str, int] = {}
    for name in TOLERANT_HOOKS:
        hook = getattr(task_encoder, name, None)
        value = getattr(hook, "__failure_tolerance__", default)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            limits[name] = value
    return limits


def get_failure_tolerance(fn: Any, default_failure_tolerance: int | None = None) -> int:
    """The failure tolerance of hook ``fn`` (``@stateless(failure_tolerance=N)``), else
    ``default_failure_tolerance``; 0 (no limit) where neither is set (Energon's function).

    Example:
        >>> get_failure_tolerance(lambda sample: sample, 100)
        100
    """
    return getattr(fn, "__failure_tolerance__", default_failure_tolerance) or 0
