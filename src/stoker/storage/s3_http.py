"""How each S3 client's connections are made (TLS verification, TCP keep-alive), as its botocore
session resolved them: recorded by :mod:`stoker.storage.s3_client` when it makes a client, read by
:mod:`stoker.storage.s3_get` when it opens the client's connection pool."""

from __future__ import annotations

import os
import weakref
from typing import Any

#: Each client's TLS verification (True, False or a CA bundle) and whether its sockets keep
#: alive (``tcp_keepalive``), as its botocore session resolved them.
HTTP_OPTIONS: weakref.WeakKeyDictionary[Any, tuple[bool | str, bool]] = weakref.WeakKeyDictionary()


def verify_for(client: Any) -> bool | str:
    """How ``client`` verifies TLS: a CA bundle's path, True (the default bundle) or False."""
    found = HTTP_OPTIONS.get(client)
    return default_verify(None) if found is None else found[0]


def keepalive_for(client: Any) -> bool:
    """Whether ``client``'s connections use TCP keep-alive (``tcp_keepalive``)."""
    found = HTTP_OPTIONS.get(client)
    return bool(client.meta.config.tcp_keepalive or (found is not None and found[1]))


def default_verify(ca_bundle: str | None) -> bool | str:
    # As botocore: the configured bundle (ca_bundle, AWS_CA_BUNDLE), else REQUESTS_CA_BUNDLE.
    return ca_bundle or os.environ.get("REQUESTS_CA_BUNDLE") or True
