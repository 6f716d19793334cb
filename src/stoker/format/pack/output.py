"""The output folder of ``pack``: checked before, written under temporary names, then published.

:func:`check_out` refuses an output that is a file, inside the source or holding it, or already
holds shards (unless overwriting); :class:`Output` hands out temporary shard paths and either
publishes them all at once (replacing the shards an earlier ``pack`` recorded in its manifest,
their indexes and ``.nv-meta``) or discards them, so a failed run leaves the folder as it was.
Files ``pack`` did not write are never removed or replaced.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Sequence

from stoker.errors import ConfigError
from stoker.format.meta import META_DIR
from stoker.format.pack.manifest import MANIFEST, read_manifest, write_manifest
from stoker.format.pending import TMP_MARK
from stoker.format.prepare import SHARD_SUFFIXES
from stoker.format.tar_index import tar_index_name


class Output:
    """Shards written into ``out`` under temporary names; published or discarded as a whole."""

    def __init__(self, out: str, prefix: str, token: str | None = None, clean: bool = True) -> None:
        self.out = out
        self.prefix = prefix
        self.created = not os.path.isdir(out)
        self.names: list[str] = []
        #: Part of every temporary name; ranks of a distributed pack share one.
        self.token = token or uuid.uuid4().hex[:12]
        os.makedirs(out, exist_ok=True)
        for name in os.listdir(out) if clean else ():  # left behind by a killed run
            if TMP_MARK in name and name.startswith(prefix):
                os.remove(os.path.join(out, name))

    def new_shard(self) -> str:
        """The temporary path of the next shard."""
        self.names.append(shard_name(self.prefix, len(self.names)))
        return self._tmp(self.names[-1])

    def _tmp(self, name: str) -> str:
        return os.path.join(self.out, f"{name}{TMP_MARK}{self.token}")

    def discard(self) -> None:
        """Remove every temporary file (and ``out`` if this run created it)."""
        for name in self.names:
            if os.path.exists(self._tmp(name)):
                os.remove(self._tmp(name))
        if self.created:
            with contextlib.suppress(OSError):  # not empty: leave it
                os.rmdir(self.out)

    def publish(self, old: Sequence[str]) -> None:
        """Replace the old shards (our own), their indexes and ``.nv-meta`` with the new shards."""
        write_manifest(self.out, set(old) | set(self.names))  # a crash below forgets nothing
        meta = os.path.join(self.out, META_DIR)
        if os.path.isdir(meta):
            shutil.rmtree(meta)
        for name in old:
            index = os.path.join(self.out, tar_index_name(name))
            if os.path.exists(index):
                os.remove(index)
        for name in self.names:
            os.replace(self._tmp(name), os.path.join(self.out, name))
        for name in set(old) - set(self.names):
            os.remove(os.path.join(self.out, name))
        write_manifest(self.out, self.names)


def shard_name(prefix: str, index: int) -> str:
    """The file name of shard ``index``: ``shard-000000.tar``, ..."""
    return f"{prefix}{index:06d}.tar"


def check_names(out: str, names: Sequence[str], owned: Sequence[str]) -> None:
    """Refuse to replace a file in ``out`` that ``pack`` did not write (not in ``owned``)."""
    own = set(owned)
    foreign = [
        entry
        for name in names
        for entry in (name, tar_index_name(name))
        if entry.removesuffix(".idx") not in own and os.path.lexists(os.path.join(out, entry))
    ]
    if foreign:
        raise ConfigError(
            f"the output folder holds {', '.join(foreign[:3])}"
            f"{' and more' if len(foreign) > 3 else ''}, which stoker pack did not write (not in "
            f"{MANIFEST}); it would be overwritten.",
            path=out,
            hint="Move or delete those files yourself, choose another --shard-prefix, or choose "
            "another output folder.",
        )


def _existing_shards(out: str) -> list[str]:
    found = []
    for dirpath, dirnames, filenames in os.walk(out):
        dirnames[:] = [d for d in dirnames if d != META_DIR]
        rel = os.path.relpath(dirpath, out)
        for name in filenames:
            if name.endswith(SHARD_SUFFIXES) and TMP_MARK not in name:
                found.append(os.path.normpath(os.path.join(rel, name)))
    return sorted(found)


def check_out(src: str, out: str, overwrite: bool) -> list[str]:
    """The shards an earlier ``pack`` wrote in ``out`` (to replace); raises unless ``out`` may be
    written. Only shards listed in ``out``'s manifest are returned: others are never touched."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise ConfigError(
            "the output exists and is not a folder.",
            path=out,
            hint="Pass a folder (it is created if missing).",
        )
    real_src, real_out = os.path.realpath(src), os.path.realpath(out)
    if os.path.isdir(src) and (real_out + os.sep).startswith(real_src + os.sep):
        raise ConfigError(
            "the output folder is the source folder or inside it.",
            path=out,
            hint="Choose an output folder outside the source, or the shards would become samples.",
        )
    if (real_src + os.sep).startswith(real_out + os.sep):
        raise ConfigError(
            "the source is inside the output folder.",
            path=src,
            hint=f"Choose an output folder that does not contain the source ({out}), so that "
            "overwriting it can never touch the source.",
        )
    old = _existing_shards(out) if os.path.isdir(out) else []
    has_meta = os.path.isdir(os.path.join(out, META_DIR))
    if (old or has_meta) and not overwrite:
        what = f"{len(old)} shard(s)" if old else f"a {META_DIR} folder"
        raise ConfigError(
            f"the output folder already holds {what}.",
            path=out,
            hint="Pass --force-overwrite (overwrite=True) to replace them, or choose another "
            "folder.",
        )
    if not overwrite:
        return []
    owned = read_manifest(out) if os.path.isdir(out) else None
    if has_meta and owned is None:
        raise ConfigError(
            f"the output folder holds a {META_DIR} folder, and no {MANIFEST} shows that stoker "
            "pack wrote there.",
            path=out,
            hint=f"Delete {META_DIR} yourself if it may go, or choose another output folder.",
        )
    return [name for name in owned or [] if os.path.isfile(os.path.join(out, name))]
