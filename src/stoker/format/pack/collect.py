"""Collect the samples of a source: a folder of loose files, a JSONL file, or Parquet rows.

Files are grouped by Energon's rule (:func:`stoker.format.tar.split_name`): the key is the
relative path up to the first dot of the base name, the part is the rest. Hidden files, reserved
folders, files without an extension and links to folders are skipped, each with a reason; a
JSONL file gives one ``json`` sample per non-blank line, keyed by its line number.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator

from stoker.errors import ConfigError, FormatError, StorageError
from stoker.format.pack.parquet_rows import is_parquet_source, parquet_samples
from stoker.format.pack.samples import ENCODING, Part, Sample, SkippedFile
from stoker.format.tar import SKIP_META_RE, split_name

#: Minimum width of the zero-padded line-number keys of JSONL samples (``00000042``).
JSONL_KEY_WIDTH = 8


def _skip_reason(rel: str, name: str) -> str | None:
    if name.startswith("."):
        return "hidden file"
    if SKIP_META_RE.match(rel):
        return "reserved folder (__*__): readers ignore its members"
    split = split_name(rel)
    if split is None or not split[1]:
        return "no extension: the part name comes from the extension (e.g. 000001.jpg)"
    try:
        rel.encode(ENCODING)
    except UnicodeEncodeError:
        return "the file name is not valid UTF-8"
    return None


def _walk(root: str, skipped: list[SkippedFile]) -> Iterator[tuple[str, str]]:
    """(relative path, absolute path) of every candidate file under ``root``, sorted."""
    for dirpath, dirnames, filenames in os.walk(root, onerror=_raise_walk_error):
        rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
        prefix = "" if rel_dir == "." else f"{rel_dir}/"
        keep = []
        for d in sorted(dirnames):
            if d.startswith("."):
                skipped.append(SkippedFile(f"{prefix}{d}/", "hidden folder"))
            elif os.path.islink(os.path.join(dirpath, d)):
                skipped.append(SkippedFile(f"{prefix}{d}/", "link to a folder: not followed"))
            else:
                keep.append(d)
        dirnames[:] = keep
        for name in sorted(filenames):
            yield f"{prefix}{name}", os.path.join(dirpath, name)


def _raise_walk_error(e: OSError) -> None:
    raise StorageError(f"cannot list the folder ({e.strerror or e}).", path=e.filename) from e


def _regular_file_size(path: str) -> int | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def _folder_samples(root: str) -> tuple[list[Sample], list[SkippedFile]]:
    skipped: list[SkippedFile] = []
    groups: dict[str, list[Part]] = {}
    for rel, full in _walk(root, skipped):
        reason = _skip_reason(rel, rel.rpartition("/")[2])
        size = _regular_file_size(full) if reason is None else None
        if size is None:
            skipped.append(SkippedFile(rel, reason or "not a regular file, or a broken link"))
            continue
        key, part = split_name(rel) or ("", "")
        groups.setdefault(key, []).append(Part(part, full, 0, size))
    samples = [Sample(k, tuple(sorted(groups[k], key=lambda p: p.name))) for k in sorted(groups)]
    return samples, skipped


def _jsonl_samples(path: str) -> list[Sample]:
    lines: list[tuple[int, int, int]] = []  # (line number, offset, size)
    offset = 0
    with open(path, "rb") as f:
        for number, line in enumerate(f, start=1):
            body = line.rstrip(b"\r\n")
            if body.strip():
                try:
                    json.loads(body)
                except ValueError as e:
                    raise FormatError(
                        f"line {number} is not valid JSON ({e}).",
                        path=path,
                        offset=offset,
                        hint="Fix or remove that line: each non-blank line must be one JSON value.",
                    ) from None
                lines.append((number, offset, len(body)))
            offset += len(line)
    width = max(JSONL_KEY_WIDTH, len(str(lines[-1][0]))) if lines else JSONL_KEY_WIDTH
    return [Sample(f"{n:0{width}d}", (Part("json", path, o, s),)) for n, o, s in lines]


def collect_samples(src: str) -> tuple[list[Sample], list[SkippedFile]]:
    """The samples of ``src`` (a folder, a ``.jsonl`` file, or a ``.parquet`` file or folder of
    them: :mod:`~stoker.format.pack.parquet_rows`) sorted by key, and skipped files.

    Raises:
        ConfigError: ``src`` is missing, of the wrong kind, or holds no samples.
        FormatError: a JSONL line is not valid JSON.
    """
    if is_parquet_source(src):
        samples, skipped = parquet_samples(src), list[SkippedFile]()
    elif os.path.isdir(src):
        samples, skipped = _folder_samples(src)
    elif os.path.isfile(src) and src.lower().endswith(".jsonl"):
        samples, skipped = _jsonl_samples(src), []
    elif os.path.exists(src):
        raise ConfigError(
            "the source is neither a folder nor a .jsonl or .parquet file.",
            path=src,
            hint="Pass a folder of files (000001.jpg, 000001.txt, ...), a .jsonl file, or "
            "Parquet files.",
        )
    else:
        raise ConfigError("the source does not exist.", path=src, hint="Check the path.")
    if not samples:
        raise ConfigError(
            f"no samples found ({len(skipped)} file(s) skipped).",
            path=src,
            hint="Samples are files named <key>.<part> (e.g. 000001.jpg + 000001.txt), or "
            "non-blank lines of a .jsonl file; hidden files and files without an extension "
            "are skipped.",
        )
    return samples, skipped
