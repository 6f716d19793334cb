"""The per-worker path every worker type runs: the batches of the worker's streams in canonical
order, each wrapped in an :class:`~stoker.runtime.envelope.Envelope` with what the worker
skipped and measured since the one before (:func:`worker_items`)."""

from __future__ import annotations

from collections.abc import Iterator
from time import perf_counter

import torch.utils.data

from stoker.pipeline.stage_clock import CLOCK
from stoker.runtime.debug_log import DebugLog
from stoker.runtime.envelope import BATCH, END, ERROR, Envelope
from stoker.runtime.streams import Loadable, Resume
from stoker.runtime.worker_errors import WorkerFailure
from stoker.runtime.worker_meter import Meter


def worker_items(
    dataset: Loadable, worker: int, resume: Resume, meter: Meter | None = None
) -> Iterator[Envelope]:
    """The batches of one worker's streams, round-robin over its streams (canonical order).

    The round starts at the stream the main process asks this worker for first, at or after its
    micro-batch counter ``resume.t`` (not necessarily at a round boundary after a restore).
    Every item carries what the worker skipped since the one before, and now and then what
    ``meter`` measured; a failure (opening the streams too) is sent as an ERROR item, for the
    stream asked for next, and ends the worker.
    """
    meter = meter or Meter(enabled=False)
    streams = _rotated_streams(dataset, worker, set(resume.exhausted), resume.t)
    if not streams:
        return
    try:
        opened = dataset.open_streams(streams, resume)
    except Exception as e:  # sent as data: torch's re-raise would lose its type
        yield Envelope(ERROR, worker, streams[0], WorkerFailure.capture(e, worker))
        return
    in_worker = torch.utils.data.get_worker_info() is not None
    debug = DebugLog.of(dataset.worker_config, worker, resume.epoch, in_worker=in_worker)
    try:
        while streams:
            for s in list(streams):
                started = perf_counter()
                try:
                    batch, position, held = next(opened.batches[s])
                except StopIteration:
                    CLOCK.busy += perf_counter() - started
                    streams.remove(s)
                    stats = meter.due(final=not streams)
                    yield Envelope(END, worker, s, skips=opened.take_skips(), stats=stats)
                except Exception as e:
                    failure = WorkerFailure.capture(e, worker)
                    yield Envelope(ERROR, worker, s, failure, skips=opened.take_skips())
                    return
                else:
                    CLOCK.busy += perf_counter() - started
                    if debug is not None:
                        debug.batch(s, batch)
                    yield Envelope(
                        BATCH,
                        worker,
                        s,
                        batch,
                        position=position.to_list(),
                        held=held,
                        skips=opened.take_skips(),
                        samples=CLOCK.take_samples(),
                        stats=meter.due(),
                    )
    finally:
        opened.close()
        if debug is not None:
            debug.close()


def metered_items(
    stats: bool, dataset: Loadable, worker: int, resume: Resume
) -> Iterator[Envelope]:
    """:func:`worker_items` with a meter of its own (a thread worker's)."""
    return worker_items(dataset, worker, resume, Meter(enabled=stats))


def _rotated_streams(dataset: Loadable, worker: int, exhausted: set[int], t: int) -> list[int]:
    topology = dataset.topology()
    own = [s for s in topology.worker_streams(worker).tolist() if s not in exhausted]
    order = topology.rank_streams().tolist()
    for step in range(t, t + len(order)):
        stream = order[step % len(order)]
        if stream in own:
            i = own.index(stream)
            return own[i:] + own[:i]
    return own


__all__ = ["metered_items", "worker_items"]
