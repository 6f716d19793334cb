"""Cooking: a source's crude samples turned into typed ones by the task encoder's cookers, with
the aux stores they ask for (:class:`Kitchen`, one per source and worker)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

from stoker.errors import SampleError, StokerError
from stoker.model.cache_pool import current_cache_pool
from stoker.model.cooking import Cooker, select_cooker
from stoker.model.samples import CrudeSample
from stoker.pipeline.decode import SampleDecoder
from stoker.pipeline.sample_failure import SkipSample, wrap_failure
from stoker.sources.aux import (
    DecodeFileStore,
    FileStore,
    JsonlFileStore,
    PrimaryFileStore,
    WebdatasetFileStore,
    open_aux,
)
from stoker.sources.source import DataSource

if TYPE_CHECKING:
    from stoker.model.task import TaskEncoder


class Kitchen:
    """Cooks the crude samples of one source: picks the cooker, passes the aux stores.

    Stores open on first use (in the worker) and stay open. Without cookers, crude samples stay
    crude (``TaskEncoder.cookers`` is empty by default).
    """

    def __init__(
        self,
        source: DataSource,
        task_encoder: TaskEncoder[Any, Any, Any, Any],
        decoder: SampleDecoder | None,
    ) -> None:
        self.source = source
        self.task_encoder = task_encoder
        self.cookers: tuple[Cooker[Any], ...] = tuple(task_encoder.cookers)
        #: The first cooker where it matches every sample (no ``has_subflavors``).
        first = self.cookers[0] if self.cookers else None
        self._always = first if isinstance(first, Cooker) and not first.has_subflavors else None
        #: Whether :attr:`_always` gets no stores (no aux, no primary, no cache).
        self._bare = (
            self._always is not None
            and not source.aux
            and not self._always.need_primary
            and not self._always.need_cache
        )
        #: (need_primary, need_cache) of each cooker used, by its id (read once).
        self._needs: dict[int, tuple[bool, bool]] = {}
        #: The task encoder's cook_crude_sample (bound once).
        self.cook_crude = task_encoder.cook_crude_sample
        #: The one cook function where cook_crude_sample would just call it without stores:
        #: a loop over many samples may call it itself, with :meth:`reraise` for a failure.
        self.direct = (
            self._always.cook
            if self._bare
            and self._always is not None
            and self._always.part_filter is None
            and not task_encoder._is_overridden(task_encoder.cook_crude_sample)
            else None
        )
        self.decoder = decoder
        self._aux: dict[str, FileStore] | None = None
        self._primary: FileStore | None = None

    def cook(self, sample: CrudeSample) -> Any:
        """``cook(sample, **aux)`` of the first matching cooker, as a typed sample."""
        try:
            if self.direct is not None:  # the common case: the cooker's function, at once
                return self.direct(sample)
            cooker = self._always or select_cooker(self.cookers, sample.get("__subflavors__"))
            if getattr(cooker, "part_filter", None) is not None:  # Energon's duck-typed cookers too
                sample = cooker.keep_parts(sample)
            if self._bare:  # the one cooker gets no store
                return self.cook_crude(sample, cooker, {})
            needs = self._needs.get(id(cooker))
            if needs is None:
                needs = self._needs[id(cooker)] = (cooker.need_primary, cooker.need_cache)
            aux: dict[str, Any] = dict(self.aux()) if self.source.aux else {}
            if needs[0]:
                aux["primary"] = PrimaryFileStore(self.primary(), str(sample.get("__key__")))
            if needs[1]:
                aux["cache"] = current_cache_pool()
            return self.cook_crude(sample, cooker, aux)
        except Exception as e:
            self.reraise(e, sample)

    def reraise(self, e: Exception, sample: CrudeSample) -> NoReturn:
        """Raise what :meth:`cook` raises where cooking ``sample`` raised ``e`` (call it while
        handling ``e``): ``e`` itself, or a :class:`SampleError` naming the sample, caused by
        ``e``."""
        if isinstance(e, SkipSample):
            raise e
        if isinstance(e, SampleError):
            if e.key is not None:
                raise e
            raise SampleError(e.problem, key=sample.get("__key__"), part=e.part, hint=e.hint) from e
        if isinstance(e, StokerError):
            raise e  # a configuration problem, not this sample's
        raise wrap_failure(e, sample, "cook")  # (wrap_failure sets the cause)

    def aux(self) -> dict[str, FileStore]:
        """The source's aux stores by name (opened on first use)."""
        if self._aux is None:
            self._aux = {
                name: self._decoded(open_aux(ref)) for name, ref in self.source.aux.items()
            }
        return self._aux

    def primary(self) -> FileStore:
        """The source's own dataset as a store (for cookers with ``need_primary``)."""
        if self._primary is None:
            source = self.source
            store = (
                JsonlFileStore(source.path) if source.jsonl else WebdatasetFileStore(source.path)
            )
            self._primary = self._decoded(store)
        return self._primary

    def _decoded(self, store: FileStore) -> FileStore:
        return store if self.decoder is None else DecodeFileStore(store, decoder=self.decoder)


__all__ = ["Kitchen"]
