"""Where an object store is and how to reach it: endpoint, addressing, credentials, retry budget.

Without any configuration, boto3's standard chain applies (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL``, ``AWS_REGION``, ``AWS_PROFILE``, the shared
config files). A YAML file named by ``STOKER_STORAGE_CONFIG`` overrides it, globally and per
bucket::

    endpoint_url: http://127.0.0.1:8333
    path_style: true
    access_key_id: KEY            # optional; else the AWS chain
    secret_access_key: SECRET
    retry: {max_attempts: 10, max_seconds: 120, connect_timeout: 5, read_timeout: 30}
    buckets:
      other-bucket: {endpoint_url: https://s3.example.com, profile: other}

``msc://profile/path`` names a Multi-Storage Client profile (:mod:`stoker.storage.msc`); a
profile may also be written directly as the mapping above plus ``base_path``.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

import yaml

from stoker.errors import ConfigError
from stoker.storage.options import current

CONFIG_ENV = "STOKER_STORAGE_CONFIG"

_KEYS = {
    "endpoint_url",
    "region",
    "path_style",
    "access_key_id",
    "secret_access_key",
    "session_token",
    "profile",
    "retry",
}
_RETRY_KEYS = {
    "max_attempts",
    "max_seconds",
    "connect_timeout",
    "read_timeout",
    "base_delay",
    "max_delay",
}


@dataclass(frozen=True)
class S3Settings:
    """How to reach one bucket; hashable, so that it keys the per-process client cache."""

    endpoint_url: str | None = None
    region: str | None = None
    path_style: bool = True
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None
    profile: str | None = None
    #: Retry budget: attempts per request and seconds per request, whichever ends first.
    max_attempts: int = 10
    max_seconds: float = 120.0
    base_delay: float = 0.1
    max_delay: float = 5.0
    connect_timeout: float = 5.0
    read_timeout: float = 30.0

    def merged(self, raw: dict[str, Any], where: str) -> S3Settings:
        """These settings with the keys of a YAML mapping applied."""
        unknown = set(raw) - _KEYS - {"buckets", "base_path"}
        if unknown:
            raise ConfigError(
                f"unknown storage setting(s) {', '.join(sorted(unknown))}.",
                path=where,
                hint=f"Valid settings: {', '.join(sorted(_KEYS | {'buckets'}))}.",
            )
        changes = {k: v for k, v in raw.items() if k in _KEYS - {"retry"}}
        retry = raw.get("retry") or {}
        if not isinstance(retry, dict) or set(retry) - _RETRY_KEYS:
            raise ConfigError(
                f"invalid retry settings {retry!r}.",
                path=where,
                hint=f"Use a mapping with keys among {', '.join(sorted(_RETRY_KEYS))}.",
            )
        changes.update(retry)
        try:
            return dataclasses.replace(self, **changes)
        except TypeError as e:
            raise ConfigError(f"invalid storage settings ({e}).", path=where) from None


@dataclass(frozen=True)
class StorageConfig:
    """The explicit configuration: defaults plus per-bucket overrides."""

    default: S3Settings = S3Settings()
    buckets: tuple[tuple[str, S3Settings], ...] = ()

    def for_bucket(self, bucket: str) -> S3Settings:
        return dict(self.buckets).get(bucket, self.default)


def parse_storage_config(raw: Any, where: str) -> StorageConfig:
    """A :class:`StorageConfig` from the YAML mapping ``raw`` read from ``where``."""
    if raw is None:
        return StorageConfig()
    if not isinstance(raw, dict):
        raise ConfigError("the storage configuration must be a mapping.", path=where)
    default = S3Settings().merged(raw, where)
    buckets = raw.get("buckets") or {}
    if not isinstance(buckets, dict):
        raise ConfigError("'buckets' must map bucket names to settings.", path=where)
    return StorageConfig(
        default,
        tuple((name, default.merged(over or {}, where)) for name, over in sorted(buckets.items())),
    )


def load_storage_config() -> StorageConfig:
    """The configuration file ``LoaderOptions.storage_config`` names (its default:
    ``STOKER_STORAGE_CONFIG``), or the defaults."""
    path = current().storage_config
    if not path:
        return StorageConfig()
    return parse_storage_config(
        _read_yaml(path, f"LoaderOptions.storage_config ({CONFIG_ENV})"), path
    )


def _read_yaml(path: str, env: str) -> Any:
    try:
        with open(os.path.expanduser(path), encoding="utf-8") as f:
            return yaml.safe_load(f)
    except OSError as e:
        raise ConfigError(
            f"cannot read the storage configuration ({e.strerror}).",
            path=path,
            hint=f"Check the file that {env} names.",
        ) from None
    except yaml.YAMLError as e:
        raise ConfigError(f"invalid YAML: {e}.", path=path) from None
