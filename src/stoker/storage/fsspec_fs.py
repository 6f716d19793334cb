"""fsspec filesystems for stoker: which protocols can be opened here, and one filesystem per
process and protocol.

A filesystem is made lazily in each process: fsspec's async filesystems (HTTP, GCS, Azure) run
their requests on an event-loop thread that a forked dataloader worker does not inherit, so a
worker makes its own, as :mod:`stoker.storage.s3` does with its client. Options come from
fsspec's own configuration (``FSSPEC_<PROTOCOL>_<OPTION>`` variables or its config folder);
HTTP gets connect and read timeouts from stoker's storage settings, so a stalled server cannot
hang the loader.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from stoker.errors import ConfigError, MissingDependencyError
from stoker.storage.config import S3Settings

_FILESYSTEMS: dict[tuple[int, str], Any] = {}
_LOCK = threading.Lock()


def protocol_of(location: str) -> str:
    """The scheme of a URL, lower-case: ``gs`` for ``gs://bucket/path``."""
    return location.split("://", 1)[0].lower()


def check_protocol(location: str) -> None:
    """Fail with a :class:`ConfigError` unless fsspec can open ``location`` here.

    Raises:
        ConfigError: fsspec is not installed, does not know the protocol, or the protocol's
            package (gcsfs, adlfs, aiohttp, ...) is missing; the message says what to install.
    """
    protocol = protocol_of(location)
    try:
        import fsspec  # type: ignore[import-untyped]
    except ImportError:
        raise MissingDependencyError.for_module("fsspec", f"reading {protocol}:// URLs") from None
    try:
        fsspec.get_filesystem_class(protocol)
    except ValueError:
        raise ConfigError(
            f"URL scheme {protocol!r} is not supported.",
            path=location,
            hint="Use a local path, s3://bucket/path, msc://profile/path, or a protocol fsspec "
            "knows (gs://, az://, http(s)://, ...).",
        ) from None
    except ImportError as e:
        missing = MissingDependencyError.from_import_error(e, f"reading {protocol}:// URLs")
        if missing is not None:
            raise missing from None
        raise ConfigError(
            f"{protocol}:// URLs need a package that is not installed ({e}).",
            path=location,
            hint="Install the package the message names (e.g. pip install gcsfs).",
        ) from None


def filesystem_for(protocol: str, settings: S3Settings) -> Any:
    """The fsspec filesystem of this process for ``protocol`` (made on first use)."""
    key = (os.getpid(), protocol)
    fs = _FILESYSTEMS.get(key)
    if fs is not None:
        return fs
    with _LOCK:
        if key not in _FILESYSTEMS:
            # A parent's filesystems are left alone (not closed here): their sessions belong
            # to the parent's event loop, and a forked worker exits without finalizing them.
            _FILESYSTEMS[key] = _make_filesystem(protocol, settings)
        return _FILESYSTEMS[key]


def _make_filesystem(protocol: str, settings: S3Settings) -> Any:
    import fsspec
    import fsspec.config  # type: ignore[import-untyped]

    options: dict[str, Any] = {"skip_instance_cache": True}
    if protocol in ("http", "https") and "client_kwargs" not in fsspec.config.conf.get(
        protocol, {}
    ):
        import aiohttp

        # Without a read timeout a stalled server would hang the loader (aiohttp waits 5 min).
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=settings.connect_timeout, sock_read=settings.read_timeout
        )
        options["client_kwargs"] = {"timeout": timeout}
    return fsspec.filesystem(protocol, **options)
