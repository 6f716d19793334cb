"""How far a packing buffer may grow when selections take nothing, and the error past that.

A round of ``select_samples_to_pack`` that takes nothing from a full buffer is tried again with
one more sample (see :mod:`stoker.pipeline.pack`); :func:`stall_limit` such rounds in a row stop
the stream with :func:`stalled_error`, so the buffer never grows without bound.

Example:
    >>> from stoker import TaskEncoder
    >>> stall_limit(TaskEncoder())
    100
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stoker.errors import StokerError

if TYPE_CHECKING:
    from stoker.model.task import TaskEncoder

#: Rounds in a row that may select nothing from a full buffer, unless the task encoder says
#: otherwise (Energon's default failure tolerance of ``select_samples_to_pack``).
STALL_LIMIT = 100


def stall_limit(encoder: TaskEncoder[Any, Any, Any, Any]) -> int:
    """Rounds in a row that may select nothing from a full buffer: ``select_samples_to_pack``'s
    ``failure_tolerance`` (``@stateless(failure_tolerance=N)``, Energon's name), else the task
    encoder's ``__default_failure_tolerance__``, else :data:`STALL_LIMIT`. 0 (Energon: no limit)
    gives :data:`STALL_LIMIT` too: the buffer must not grow without bound.
    """
    for value in (
        getattr(encoder.select_samples_to_pack, "__failure_tolerance__", None),
        getattr(encoder, "__default_failure_tolerance__", None),
    ):
        if isinstance(value, int) and value > 0:
            return value
    return STALL_LIMIT


def stalled_error(rounds: int, held: int, size: int, waited: str) -> StokerError:
    """The error for ``rounds`` empty selections in a row from a buffer of ``held`` samples
    (``packing_buffer_size=size``); ``waited``: where the oldest buffered sample comes from."""
    return StokerError(
        f"select_samples_to_pack selected nothing from a full packing buffer {rounds} times in a "
        f"row (the buffer holds {held} samples, packing_buffer_size={size}); {waited} has waited "
        "longest. Without a limit the buffer would grow forever.",
        hint="Return at least one group from a full buffer (e.g. the fullest pack when none is "
        "full enough), raise SkipSample less often, or allow more rounds with "
        "@stateless(failure_tolerance=N) on select_samples_to_pack (docs/packing.md).",
    )
