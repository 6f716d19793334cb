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

``msc://profile/path`` names a profile of a Multi-Storage Client file (``MSC_CONFIG``, else
``~/.msc_config.yaml`` or ``~/.config/msc/config.yaml``), whose ``storage_provider`` must be of
type ``s3``; a profile may also be written directly as the mapping above plus ``base_path``.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

import yaml

from stoker.errors import ConfigError

CONFIG_ENV = "STOKER_STORAGE_CONFIG"
MSC_ENV = "MSC_CONFIG"
MSC_DEFAULT_FILES = ("~/.msc_config.yaml", "~/.config/msc/config.yaml", "/etc/msc_config.yaml")

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
    """The configuration named by ``STOKER_STORAGE_CONFIG``, or the defaults."""
    path = os.environ.get(CONFIG_ENV)
    if not path:
        return StorageConfig()
    return parse_storage_config(_read_yaml(path, CONFIG_ENV), path)


def resolve_msc(location: str) -> tuple[S3Settings, str, str]:
    """``msc://profile/path`` -> (settings, bucket, key prefix)."""
    profile, _, path = location[len("msc://") :].partition("/")
    where = _msc_file()
    profiles = (_read_yaml(where, MSC_ENV) or {}).get("profiles") or {}
    if profile not in profiles:
        raise ConfigError(
            f"no MSC profile {profile!r}.",
            path=where,
            hint=f"Profiles defined: {', '.join(sorted(profiles)) or 'none'}.",
        )
    raw = profiles[profile] or {}
    if "storage_provider" in raw:
        raw = _from_msc(raw, where)
    settings = load_storage_config().default.merged(raw, where)
    base = str(raw.get("base_path", "")).strip("/")
    bucket, _, prefix = base.partition("/")
    if not bucket:
        raise ConfigError(f"MSC profile {profile!r} has no base_path (bucket).", path=where)
    return settings, bucket, "/".join(p for p in (prefix, path.strip("/")) if p)


def _from_msc(raw: dict[str, Any], where: str) -> dict[str, Any]:
    provider = raw["storage_provider"] or {}
    if provider.get("type") not in ("s3", "s8k"):
        raise ConfigError(
            f"MSC storage provider type {provider.get('type')!r} is not supported.",
            path=where,
            hint="stoker reads S3-compatible profiles (type: s3).",
        )
    options = provider.get("options") or {}
    out: dict[str, Any] = {"base_path": options.get("base_path", "")}
    if "endpoint_url" in options:
        out["endpoint_url"] = options["endpoint_url"]
    if "region_name" in options:
        out["region"] = options["region_name"]
    credentials = ((raw.get("credentials_provider") or {}).get("options")) or {}
    if "access_key" in credentials:
        out["access_key_id"] = credentials["access_key"]
        out["secret_access_key"] = credentials.get("secret_key")
        out["session_token"] = credentials.get("session_token")
    return out


def _msc_file() -> str:
    explicit = os.environ.get(MSC_ENV)
    if explicit:
        return explicit
    for candidate in MSC_DEFAULT_FILES:
        if os.path.isfile(os.path.expanduser(candidate)):
            return os.path.expanduser(candidate)
    raise ConfigError(
        "msc:// paths need a Multi-Storage Client profile file.",
        hint=f"Set {MSC_ENV} to a YAML file with a 'profiles' mapping.",
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
