"""Where an object store is and how to reach it: endpoint, addressing, credentials, retry budget.

Without any configuration, boto3's standard chain applies (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL``, ``AWS_REGION``, ``AWS_PROFILE``, the shared
config files). A YAML file named by ``STOKER_STORAGE_CONFIG`` overrides it, globally and per
bucket::

    endpoint_url: http://127.0.0.1:8333
    path_style: true
    access_key_id: KEY            # optional; else the AWS chain
    secret_access_key: SECRET
    retry: {max_seconds: 120, max_delay: 4, connect_timeout: 5, read_timeout: 30}
    buckets:
      other-bucket: {endpoint_url: https://s3.example.com, profile: other}

``msc://profile/path`` names a Multi-Storage Client profile (:mod:`stoker.storage.msc`); a
profile may also be written directly as the mapping above plus ``base_path``.

The retry budget (:class:`~stoker.storage.retry.RetryBudget`) defaults to 120 s per request, or
the seconds ``STOKER_STORAGE_RETRY_SECONDS`` gives; the ``retry`` mapping overrides both.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

import yaml

from stoker.errors import ConfigError
from stoker.storage.options import STORAGE_RETRY_SECONDS_ENV, current, env_storage_retry_seconds
from stoker.storage.retry import CONFIG_ENV as CONFIG_ENV
from stoker.storage.retry import RetryBudget

#: Seconds of the default retry budget (where no ``retry: {max_seconds: ...}`` is configured).
RETRY_SECONDS_ENV = STORAGE_RETRY_SECONDS_ENV

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
_BUDGET_KEYS = {f.name for f in dataclasses.fields(RetryBudget)}
_TIMEOUT_KEYS = {"connect_timeout", "read_timeout"}
_RETRY_KEYS = _BUDGET_KEYS | _TIMEOUT_KEYS


def default_retry_budget() -> RetryBudget:
    """The retry budget where none is configured: 120 s, or ``STOKER_STORAGE_RETRY_SECONDS``.

    Raises:
        ConfigError: the variable is not a number of seconds >= 0.
    """
    value = env_storage_retry_seconds()
    if not value:
        return RetryBudget()
    try:
        return RetryBudget(max_seconds=float(value))
    except (ValueError, ConfigError):
        raise ConfigError(
            f"{RETRY_SECONDS_ENV}={value!r} is not a number of seconds >= 0.",
            hint=f"E.g. {RETRY_SECONDS_ENV}=600 to keep retrying a request for 10 minutes.",
        ) from None


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
    #: How long each request keeps trying (the ``retry`` mapping's budget keys).
    retry: RetryBudget = dataclasses.field(default_factory=default_retry_budget)
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
        changes.update({k: v for k, v in retry.items() if k in _TIMEOUT_KEYS})
        budget = {k: v for k, v in retry.items() if k in _BUDGET_KEYS}
        try:
            if budget:
                changes["retry"] = dataclasses.replace(self.retry, **budget)
            return dataclasses.replace(self, **changes)
        except ConfigError as e:
            raise ConfigError(e.problem, path=where, hint=e.hint) from None
        except TypeError as e:
            raise ConfigError(f"invalid storage settings ({e}).", path=where) from None


@dataclass(frozen=True)
class StorageConfig:
    """The explicit configuration: defaults plus per-bucket overrides."""

    default: S3Settings = dataclasses.field(default_factory=S3Settings)
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
