"""Crude samples of a run of JSONL lines: the one place a run of lines becomes samples.

:class:`LineAssembly` (a part of :class:`~stoker.runtime.build.SampleBuilder`) takes the lines
of a run, as raw samples (:meth:`LineAssembly._jsonl_run`) or cut in one go
(:meth:`LineAssembly.assemble_lines`), and makes a line's crude sample in a Python loop, line
by line (:meth:`LineAssembly._crude_lines`). Where every line of the run is UTF-8 with
one JSON value and nothing around it (what :func:`~stoker.pipeline.decode.scan_json` takes),
:func:`scanned_lines` makes the same samples with the decoding, scanning and ``SourceInfo``
steps each in one ``map`` over the run (for ~500-byte lines, about a tenth less work per
line); any other run goes line by line, which decodes or reports each line as before.

Example:
    >>> [s] = scanned_lines("/d/a.jsonl", {}, ["0"], [b'{"a": 1}'], ["a.jsonl"], [7])
    >>> s["json"], s["__key__"], s["__restore_key__"], s["__sources__"][0].file_names
    ({'a': 1}, '0', ('Webdataset', '/d/a.jsonl', 7), ('0.json',))
    >>> scanned_lines("/d/a.jsonl", {}, ["0"], [b' {"a": 1}'], ["a.jsonl"], [7]) is None
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from stoker.model.samples import CrudeSample
from stoker.model.source_info import source_info, source_infos
from stoker.pipeline.decode import JSON_SCANNER
from stoker.pipeline.read import LineRaws, RawSample

if TYPE_CHECKING:
    from stoker.sources.source import DataSource

#: ``data.decode("utf-8")`` as a function (UTF-8 and strict errors are ``bytes.decode``'s
#: defaults).
_utf8 = bytes.decode
#: A raw sample's key and shard (its fields 0 and 2).
_first, _third = itemgetter(0), itemgetter(2)


def _json_part(raw: RawSample) -> bytes | None:
    """The bytes of ``raw``'s ``json`` part where it is its only part, else None."""
    parts = raw[1]
    return parts.get("json") if len(parts) == 1 else None


class LineAssembly:
    """Makes the crude samples of runs of JSONL lines (a mixin of the sample builder, which
    owns the attributes)."""

    source: DataSource
    #: The samples' subflavors (one dict all samples of the source carry).
    subflavors: dict[str, Any]

    if TYPE_CHECKING:

        def _plain_run(self, raws: list[RawSample], refs: list[int], out: list[Any]) -> None:
            """The samples of ``raws`` (:class:`~stoker.runtime.build_runs.RunAssembly`)."""

    def _jsonl_run(self, raws: list[RawSample], refs: list[int], out: list[Any]) -> None:
        """Crude samples of JSONL lines (each one ``json`` part) into ``out``, as
        :meth:`_plain_run` makes them (:meth:`_crude_lines`)."""
        keys, lines = list(map(_first, raws)), list(map(_json_part, raws))
        self._crude_lines(keys, lines, list(map(_third, raws)), raws, refs, out)

    def assemble_lines(self, raws: LineRaws, refs: list[int]) -> tuple[list[Any], Exception | None]:
        """:meth:`assemble_run` of JSONL lines cut in one go (where :attr:`jsonl_crude`): the
        crude samples made straight from the lines' bytes, a raw sample made only for a line
        that :func:`scan_json` does not take."""
        out: list[Any] = []
        keys, shards = list(map(str, raws.indices)), [raws.shard] * len(raws)
        try:
            self._crude_lines(keys, raws.lines, shards, raws, refs, out)
        except Exception as e:
            return out, e
        return out, None

    def _crude_lines(
        self,
        keys: list[str],
        lines: Sequence[bytes | None],
        shards: list[str],
        raws: Sequence[RawSample],
        refs: list[int],
        out: list[Any],
    ) -> None:
        """Crude samples of JSONL lines of ``raws`` (their keys, the ``json`` parts' bytes or
        None, and shards) into ``out``: all in C loops where every line is one JSON value
        (:func:`scanned_lines`), else in a loop without a call per part, where a line that
        :func:`scan_json` does not take goes through :meth:`_plain_run` (which decodes or
        reports it)."""
        path, subflavors = self.source.path, self.subflavors
        run = scanned_lines(path, subflavors, keys, lines, shards, refs)
        if run is not None:
            out.extend(run)
            return
        append, new, info, scan = out.append, CrudeSample, source_info, JSON_SCANNER
        items = zip(keys, lines, shards, refs, strict=False)
        for at, (key, data, shard, ref) in enumerate(items):
            try:  # scan_json, inline: the common case (UTF-8, one value, nothing around)
                text = data.decode("utf-8")  # type: ignore[union-attr]  # (None: to _plain_run)
                value, end = scan(text, 0)
                scanned = end == len(text)
            except Exception:
                scanned = False
            if not scanned:
                self._plain_run([raws[at]], [ref], out)
                continue
            sample = new(json=value)
            sample["__key__"], sample["__restore_key__"] = key, ("Webdataset", path, ref)
            sample["__subflavors__"] = subflavors
            sample["__sources__"] = (info(path, ref, shard, (key + ".json",)),)
            append(sample)


def scanned_lines(
    path: str,
    subflavors: dict[str, Any] | None,
    keys: Sequence[str],
    lines: Sequence[bytes | None],
    shards: Sequence[str],
    refs: Sequence[int],
) -> list[CrudeSample] | None:
    """The crude samples of ``lines`` (the ``json`` parts of samples ``keys``, global samples
    ``refs`` of the dataset ``path``, in files ``shards``), as the line-by-line loop makes them,
    where every line is UTF-8 with one JSON value and nothing around it; else None.
    """
    count = len(lines)
    if count == 0 or not len(keys) == len(shards) == len(refs) == count:
        return None
    try:  # a line that is not bytes, not UTF-8, or no JSON value raises
        texts = list(map(_utf8, lines))  # type: ignore[arg-type]
        scanned = list(map(JSON_SCANNER, texts, repeat(0, count)))
    except Exception:
        return None
    if len(scanned) != count:  # the scanner's StopIteration (no value at 0) ends map() early
        return None
    values, ends = zip(*scanned, strict=True)
    if ends != tuple(map(len, texts)):  # something after the value
        return None
    names = [(key + ".json",) for key in keys]
    infos = source_infos(count, [path] * count, list(refs), list(shards), names)
    new = CrudeSample
    return [
        new(
            json=value, __key__=key, __restore_key__=("Webdataset", path, ref),
            __subflavors__=subflavors, __sources__=(info,),
        )
        for value, key, ref, info in zip(values, keys, refs, infos, strict=True)
    ]  # fmt: skip


__all__ = ["LineAssembly", "scanned_lines"]
