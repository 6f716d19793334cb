"""The boto3 client of each process: a worker forked by the loader takes the spare its parent
made (see stoker.storage.s3_client)."""

from __future__ import annotations

import os
from typing import Any

import pytest

pytest.importorskip("boto3")

import stoker.storage.s3_client as s3_client
from stoker.storage.config import S3Settings
from stoker.storage.s3_client import client_for, expect_client, spare_for_children
from stoker.storage.s3_get import getter_for

KEYS = S3Settings(endpoint_url="http://127.0.0.1:9", access_key_id="k", secret_access_key="s")


@pytest.fixture(autouse=True)
def fresh_clients(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """No client, session or spare left by another test; no AWS configuration of the machine."""
    for name in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    for cache in ("_CLIENTS", "_SESSIONS", "_SPARES", "_EXPECTED"):
        monkeypatch.setattr(s3_client, cache, {})


def as_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """Continue as if in a child forked from this process (a new process id)."""
    pid = os.getpid() + 1_000_000
    monkeypatch.setattr(s3_client.os, "getpid", lambda: pid)


def test_a_forked_child_takes_the_spare_its_parent_never_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    own = client_for(KEYS)
    getter_for(own)._url("bucket", "shard.tar")  # the parent presigned (and read) an object
    spare_for_children()
    spare_for_children()  # one spare per settings, however often the loader forks
    assert len(s3_client._SPARES) == 1
    (_, spare), = s3_client._SPARES.values()  # fmt: skip
    assert spare is not own and client_for(KEYS) is own  # the parent never uses it
    assert getter_for(spare)._urls == {}  # its GET transport is made, nothing presigned
    as_child(monkeypatch)
    assert client_for(KEYS) is spare and client_for(KEYS) is spare
    assert not s3_client._SPARES  # used here now: never handed to this process's children
    spare_for_children()  # a child forking in turn makes a spare of its own
    (_, grandchildren), = s3_client._SPARES.values()  # fmt: skip
    assert grandchildren is not spare


def test_no_spare_where_the_credentials_refresh_or_the_chain_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chain = S3Settings(endpoint_url="http://127.0.0.1:9")  # credentials from the AWS chain
    monkeypatch.setattr(s3_client, "_fork_safe", lambda session, settings: settings is KEYS)
    client_for(chain)
    spare_for_children()
    assert not s3_client._SPARES  # refreshing credentials: each child makes its own client
    client_for(KEYS)
    spare_for_children()
    (_, spare), = s3_client._SPARES.values()  # fmt: skip
    monkeypatch.setenv("AWS_REGION", "eu-west-3")  # another client for the child, not the spare
    as_child(monkeypatch)
    assert client_for(KEYS) is not spare


def test_a_store_opened_but_never_asked_still_gets_a_spare_for_the_children(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # All of a dataset's metadata came from the metadata cache: the parent opened the store
    # and made no client, yet each worker it forks will read shards.
    spare_for_children()
    assert not s3_client._SPARES  # nothing opened: nothing to make
    expect_client(KEYS)
    spare_for_children()
    assert not s3_client._CLIENTS  # the parent still has no client of its own
    (_, spare), = s3_client._SPARES.values()  # fmt: skip
    as_child(monkeypatch)
    assert client_for(KEYS) is spare
