"""Many small samples per call on a stream's hot path: the runs of one dataset in a block
(:func:`same_runs`), and their outputs under the default ``encode_sample`` in one loop
(:func:`plain_outputs`).

The loop does per sample exactly what :meth:`PreparedRuns._prepared
<stoker.runtime.prepared_runs.PreparedRuns._prepared>` does for one (cook crude
samples with the hook indices set, count the success, extend the restore key), without a call
per sample between the stages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from time import perf_counter
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np
import numpy.typing as npt

from stoker.model.samples import CrudeSample
from stoker.pipeline import hook_index
from stoker.pipeline.stage_clock import CLOCK, COOK

if TYPE_CHECKING:
    from stoker.pipeline.skip_policy import ErrorTracker
    from stoker.runtime.kitchen import Kitchen


def same_runs(choices: npt.NDArray[np.integer[Any]]) -> list[tuple[int, int]]:
    """``(value, length)`` of each run of equal values of ``choices``, in order.

    Example:
        >>> same_runs(np.array([0, 0, 1, 0, 0, 0]))
        [(0, 2), (1, 1), (0, 3)]
    """
    if len(choices) == 0:
        return []
    cuts = (np.flatnonzero(choices[1:] != choices[:-1]) + 1).tolist()
    starts = [0, *cuts]
    lengths = np.diff([*starts, len(choices)]).tolist()
    return list(zip(choices[starts].tolist(), lengths, strict=True))


def plain_outputs(
    samples: Sequence[Any],
    kitchen: Kitchen | None,
    batch_index: int,
    sample_index: int,
    step: int,
    tracker: ErrorTracker,
    out: list[Any],
    failed: Callable[[Exception, int], None],
) -> tuple[int, int | None]:
    """Append the one output of each of ``samples`` under the default ``encode_sample`` to
    ``out``: cooked (crude samples where there are cookers) with the hook indices
    ``(batch_index, sample_index + j * step)`` set for sample ``j``, the restore key extended
    by that sample index (as :func:`~stoker.runtime.sample_encoding.encoded_key`).

    All go into the batch ``batch_index``. A cooker's failure goes to ``failed(error, j)``
    (called with the hook indices still set) and ends the run. Returns how many samples were
    used and the place of the last that gave an output (None: none did).
    """
    if kitchen is None:
        return _outputs(samples, None, None, [], batch_index, sample_index, step, tracker, out,
                        failed)  # fmt: skip
    # The cooker's function itself where Kitchen.cook would only call it (a call less per
    # sample); its failure is then raised as Kitchen.cook raises it (Kitchen.reraise).
    cook = kitchen.cook if kitchen.direct is None else kitchen.direct
    reraise = None if kitchen.direct is None else kitchen.reraise
    active = hook_index.active()
    active.append((batch_index, sample_index))
    started = perf_counter()
    try:
        return _outputs(samples, cook, reraise, active, batch_index, sample_index, step,
                        tracker, out, failed)  # fmt: skip
    finally:
        active.pop()
        CLOCK.charge(COOK, perf_counter() - started)


def _outputs(
    samples: Sequence[Any], cook: Callable[[Any], Any] | None,
    reraise: Callable[[Exception, Any], NoReturn] | None, active: list[tuple[int, int]],
    batch_index: int, sample_index: int, step: int, tracker: ErrorTracker, out: list[Any],
    failed: Callable[[Exception, int], None],
) -> tuple[int, int | None]:  # fmt: skip
    """The loop of :func:`plain_outputs`: ``cook`` (None: no cookers) runs with the hook
    indices on top of ``active``, and its failure is raised as ``reraise`` says (None: as
    it is)."""
    append = out.append
    made: int | None = None
    for j, sample in enumerate(samples):
        index = sample_index + j * step
        if cook is not None and isinstance(sample, CrudeSample):
            active[-1] = (batch_index, index)
            try:
                sample = cook(sample)
            except Exception as e:
                failed(e if reraise is None else _raised(reraise, e, sample), j)
                return j + 1, made
        if tracker.consecutive or tracker.storage_shards:
            tracker.succeeded()
        # encoded_key, inline: the restore key read here is the one to extend. A plain
        # tuple is extended by concatenation (cheaper); a subclass is unpacked (it may
        # iterate otherwise).
        if isinstance(sample, dict):
            key = sample.get("__restore_key__")
            if isinstance(key, tuple) and len(key) == 3:
                sample["__restore_key__"] = (
                    key + (index, 0) if type(key) is tuple else (*key, index, 0)  # noqa: RUF005
                )
        else:
            try:  # getattr(sample, name, None), as a slot read the interpreter specialises
                key = sample.__restore_key__
            except AttributeError:
                key = None
            if isinstance(key, tuple) and len(key) == 3:
                extended = key + (index, 0) if type(key) is tuple else (*key, index, 0)  # noqa: RUF005
                try:  # noqa: SIM105 (per sample: suppress() costs more)
                    sample.__restore_key__ = extended
                except (AttributeError, TypeError):  # frozen: left as it is
                    pass
        append(sample)
        made = j
    return len(samples), made


def _raised(reraise: Callable[[Exception, Any], NoReturn], e: Exception, sample: Any) -> Exception:
    """What ``reraise(e, sample)`` raises (:meth:`Kitchen.reraise`: what :meth:`Kitchen.cook`
    raises where its cooker raised ``e``), with its traceback and context as there."""
    try:
        reraise(e, sample)
    except Exception as raised:
        return raised


__all__ = ["plain_outputs", "same_runs"]
