"""Time until a request gives up on an S3 endpoint that refuses connections (nobody listens).

It waits for the whole retry budget (120 s by default): ``STOKER_STORAGE_RETRY_SECONDS=10
python benchmarks/bench_retry_budget.py`` for a shorter run.
"""

from __future__ import annotations

import os
import socket
import time

from stoker.errors import StorageError
from stoker.storage import open_store


def main() -> None:
    with socket.socket() as s:  # a free port: connections to it are refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}", AWS_ACCESS_KEY_ID="test",
                      AWS_SECRET_ACCESS_KEY="test", AWS_REGION="us-east-1")  # fmt: skip
    os.environ.pop("STOKER_STORAGE_CONFIG", None)
    store = open_store("s3://bucket/prefix")
    start = time.monotonic()
    try:
        store.read_range("shard.tar", 0, 100)
    except StorageError as e:
        print(f"gave up after {time.monotonic() - start:.1f} s:\n{e}")


if __name__ == "__main__":
    main()
