"""Item access by field name on samples and batches: ``batch["image"]`` is ``batch.image``.

Tutorials and quick-start code index samples like dicts; stoker's samples and batches are
dataclasses, so :class:`FieldAccess` maps ``sample[name]`` onto the field. An unknown name raises
``KeyError`` listing the fields, with the closest one ("did you mean"). Samples stay
non-iterable (``iter(sample)`` raises ``TypeError`` as before): only names index them.

Example:
    >>> from stoker import TextSample
    >>> sample = TextSample(__key__="k", __restore_key__=(), text="hello")
    >>> sample["text"]
    'hello'
    >>> sample["txt"]  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    KeyError: "TextSample has no field 'txt' (did you mean 'text'?); its fields: ..."
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any


class FieldAccess:
    """``self[name]``: the dataclass field ``name`` (``KeyError`` naming the fields if none)."""

    __slots__ = ()
    #: Not iterable: ``__getitem__`` alone would make ``iter()`` try integer indices.
    __iter__ = None

    def __getitem__(self, name: str) -> Any:
        if not isinstance(name, str):
            raise TypeError(
                f"{type(self).__name__} is indexed by field name (e.g. sample['image']), "
                f"not by {type(name).__name__} {name!r}."
            )
        fields = [f.name for f in dataclasses.fields(self)]  # type: ignore[arg-type]
        if name in fields:
            return getattr(self, name)
        close = difflib.get_close_matches(name, fields, n=1)
        guess = f" (did you mean {close[0]!r}?)" if close else ""
        raise KeyError(
            f"{type(self).__name__} has no field {name!r}{guess}; its fields: {', '.join(fields)}."
        )

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in {f.name for f in dataclasses.fields(self)}  # type: ignore[arg-type]
