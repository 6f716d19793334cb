"""Cookers: the task encoder's functions that turn crude samples into typed samples.

A crude dataset (``__class__: CrudeWebdataset``, or a JSONL file) yields :class:`CrudeSample`
dicts. The first :class:`Cooker` in ``TaskEncoder.cookers`` whose ``has_subflavors`` all match
the sample's ``__subflavors__`` cooks it: ``cook(sample, **aux)``, where ``aux`` holds the
metadataset's aux stores by name, plus ``primary=`` (the sample's own dataset, see
:func:`cooker`) and ``cache=`` where the cooker asks for them. Names follow Energon.

Example:
    >>> from stoker import TextSample
    >>> def cook_text(sample):
    ...     return TextSample(**basic_sample_keys(sample), text=sample["txt"])
    >>> cookers = [Cooker(cook_text, has_subflavors={"kind": "text"})]
    >>> select_cooker(cookers, {"kind": "text", "lang": "en"}).cook is cook_text
    True
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, overload

from stoker.errors import SampleError
from stoker.model.samples import CrudeSample, Sample, SourceInfo

T_sample = TypeVar("T_sample", covariant=True)
F = TypeVar("F", bound=Callable[..., Any])

# Energon's markers on a cook function; Cooker reads them (kept for API compatibility).
_NEED_CACHE = "__cooker_need_cache__"
_NEED_PRIMARY = "__cooker_need_primary__"


@overload
def cooker(fn: F) -> F: ...


@overload
def cooker(
    fn: None = None, *, need_cache: bool = False, need_primary: bool = False
) -> Callable[[F], F]: ...


def cooker(
    fn: F | None = None, *, need_cache: bool = False, need_primary: bool = False
) -> F | Callable[[F], F]:
    """Mark a cook function; ask for extra keyword arguments when it is called.

    Args:
        need_primary: Also pass ``primary=``: a :class:`~stoker.sources.aux.FileStore` over the
            sample's own dataset; a name starting with ``.`` is a part of the current sample
            (``primary.get(".jpg")``).
        need_cache: Also pass ``cache=``: a :class:`~stoker.model.cache_pool.CachePool` (``get``,
            ``get_lazy``, ``to_cache``): the loader's ``cache_pool`` (e.g. a
            :class:`~stoker.FileStoreCachePool`), else one that reads when asked.

    Example:
        >>> @cooker(need_primary=True)
        ... def cook(sample, primary):
        ...     return primary.get(".txt", sample)
        >>> Cooker(cook).need_primary
        True
    """
    if fn is None:
        return functools.partial(cooker, need_cache=need_cache, need_primary=need_primary)
    inner = fn

    @functools.wraps(inner)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return inner(*args, **kwargs)

    setattr(wrapper, _NEED_CACHE, need_cache)
    setattr(wrapper, _NEED_PRIMARY, need_primary)
    return wrapper


@dataclass
class Cooker(Generic[T_sample]):
    """A cook function and the subflavors a crude sample must have for it.

    Args:
        cook: ``(sample, **aux) -> Sample``; see :func:`cooker` for ``primary`` and ``cache``.
        has_subflavors: Every key must be in the sample's ``__subflavors__`` with this value;
            ``None`` cooks any crude sample.
        part_filter: ``(part) -> bool``: the crude sample this cooker gets keeps only the parts
            (a Parquet dataset's columns) it accepts, and its ``__`` keys (Energon #227).

    Example:
        >>> Cooker(print, has_subflavors={"kind": "ocr"}).is_match({"kind": "ocr", "x": 1})
        True
    """

    cook: Callable[..., T_sample]
    has_subflavors: dict[str, Any] | None = None
    part_filter: Callable[[str], bool] | None = None

    @property
    def need_primary(self) -> bool:
        return bool(getattr(self.cook, _NEED_PRIMARY, False))

    @property
    def need_cache(self) -> bool:
        return bool(getattr(self.cook, _NEED_CACHE, False))

    def is_match(self, subflavors: dict[str, Any] | None) -> bool:
        """Whether a sample with these subflavors is for this cooker."""
        have = subflavors or {}
        wanted = self.has_subflavors or {}
        return all(k in have and have[k] == v for k, v in wanted.items())

    def keep_parts(self, sample: Any) -> Any:
        """``sample`` with only the parts :attr:`part_filter` accepts (itself without one).

        Example:
            >>> Cooker(print, part_filter=lambda p: p == "txt").keep_parts(
            ...     {"__key__": "a", "txt": "hi", "jpg": b"..."})
            {'__key__': 'a', 'txt': 'hi'}
        """
        keep = self.part_filter
        if keep is None:
            return sample
        return type(sample)((k, v) for k, v in sample.items() if k.startswith("__") or keep(k))

    def describe(self) -> str:
        """The cook function's name and its condition, for error messages."""
        name = getattr(self.cook, "__qualname__", None) or repr(self.cook)
        return f"{name} (has_subflavors={self.has_subflavors!r})"


def select_cooker(cookers: Sequence[Cooker[Any]], subflavors: dict[str, Any] | None) -> Cooker[Any]:
    """The first cooker matching ``subflavors``; a :class:`SampleError` naming all if none."""
    for candidate in cookers:
        if candidate.is_match(subflavors):
            return candidate
    conditions = "; ".join(c.describe() for c in cookers) or "none"
    raise SampleError(
        f"no cooker matches the crude sample's subflavors {subflavors!r}. "
        f"The task encoder's cookers: {conditions}.",
        hint="Add a Cooker whose has_subflavors match, or set the subflavors of this dataset "
        "in the metadataset.",
    )


#: The names of :class:`Sample`'s fields: the metadata keys a cooked sample takes over.
_FIELDS = tuple(f.name for f in dataclasses.fields(Sample))
#: Whether they are the four :func:`basic_sample_keys` takes in one expression.
_FOUR = _FIELDS == ("__key__", "__restore_key__", "__subflavors__", "__sources__")
#: The crude sample types :func:`basic_sample_keys` reads in one expression (where
#: :data:`_FOUR`).
_PLAIN = (CrudeSample, dict) if _FOUR else ()


def basic_sample_keys(
    crude_sample: dict[str, Any], additional_source_info: tuple[SourceInfo, ...] = ()
) -> dict[str, Any]:
    """The metadata keys (``__key__``, ``__restore_key__``, ...) to pass on to a cooked sample.

    ``additional_source_info`` is appended to ``__sources__``.

    Example:
        >>> basic_sample_keys({"__key__": "k", "__restore_key__": (), "txt": "hi"})
        {'__key__': 'k', '__restore_key__': ()}
    """
    # The common case, called once per cooked sample: a plain crude sample with all of them,
    # taken in one dict display (a subclass's __missing__ could answer any key: not here).
    if type(crude_sample) in _PLAIN and not additional_source_info:
        try:
            return {
                "__key__": crude_sample["__key__"],
                "__restore_key__": crude_sample["__restore_key__"],
                "__subflavors__": crude_sample["__subflavors__"],
                "__sources__": crude_sample["__sources__"],
            }
        except KeyError:
            pass
    out: dict[str, Any] = {}
    for name in _FIELDS:  # a loop, not a comprehension: one frame less per sample
        if name in crude_sample:
            out[name] = crude_sample[name]
    if additional_source_info:
        out["__sources__"] = (*(crude_sample.get("__sources__") or ()), *additional_source_info)
    return out


__all__ = ["Cooker", "basic_sample_keys", "cooker", "select_cooker"]
