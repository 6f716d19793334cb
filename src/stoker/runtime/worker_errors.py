"""An exception raised in a dataloader worker, on its way to the training process.

A worker sends its failure as data (:class:`WorkerFailure`), the way torch's ``ExceptionWrapper``
keeps the formatted traceback, but the exception itself travels too: the training process raises
it with its own type, message and fields (a :class:`~stoker.errors.StokerError`'s path, key and
offset), caused by a :class:`~stoker.errors.RemoteTraceback` whose text is the worker's
traceback, so a user hook's frames (and the exceptions it was chained to) show where the
training loop fails. An exception that cannot be pickled arrives as a ``RuntimeError`` with its
type, message and traceback.
"""

from __future__ import annotations

import pickle
import traceback
from dataclasses import dataclass
from typing import NoReturn

from stoker.errors import RemoteTraceback


@dataclass
class WorkerFailure:
    """An exception of dataloader worker ``worker`` and its formatted traceback.

    Example:
        >>> try:
        ...     {}["caption"]
        ... except KeyError as e:
        ...     failure = WorkerFailure.capture(e, worker=1)
        >>> sent = pickle.loads(pickle.dumps(failure))
        >>> try:
        ...     sent.reraise()
        ... except KeyError as e:
        ...     print(type(e.__cause__).__name__, "{}[\\"caption\\"]" in str(e.__cause__))
        RemoteTraceback True
    """

    error: BaseException
    #: The traceback as the worker formatted it (with the exceptions it was chained to).
    traceback: str
    worker: int

    @staticmethod
    def capture(error: BaseException, worker: int) -> WorkerFailure:
        """``error`` (being handled now, or with its traceback) of worker ``worker``."""
        return WorkerFailure(error, "".join(traceback.format_exception(error)), worker)

    def __reduce__(self) -> tuple[object, ...]:
        return (WorkerFailure, (_portable(self.error, self.traceback), self.traceback, self.worker))

    def reraise(self) -> NoReturn:
        """Raise the error here: as it was where it did not cross processes, else caused by
        the worker's traceback."""
        error = self.error
        if error.__traceback__ is None:  # it crossed a process boundary
            error.__cause__ = RemoteTraceback(
                f"\n\nin dataloader worker {self.worker}:\n{self.traceback.rstrip()}"
            )
        raise error


def _portable(error: BaseException, text: str) -> BaseException:
    """``error`` if it survives pickling, else a RuntimeError with its type, message and
    traceback."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        return RuntimeError(f"{type(error).__name__} in a dataloader worker: {error}\n{text}")
    return error
