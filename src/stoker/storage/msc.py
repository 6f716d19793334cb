"""``msc://profile/path``: Multi-Storage Client profiles, found where Multi-Storage Client looks.

A profile comes from the first MSC config file found (``MSC_CONFIG``, then
``$XDG_CONFIG_HOME/msc/config.{yaml,json}``, ``~/.msc_config.{yaml,json}``,
``~/.config/msc/config.{yaml,json}``, ``$XDG_CONFIG_DIRS/msc/config.*`` (default ``/etc/xdg``),
``/etc/msc_config.*``), merged with the remotes of an ``rclone.conf`` (next to the ``rclone``
executable, ``$XDG_CONFIG_HOME/rclone/rclone.conf``, ``/etc/rclone.conf``,
``~/.config/rclone/rclone.conf``, ``~/.rclone.conf``), as Multi-Storage Client and Energon do.
``${VAR}`` in MSC values is replaced by the environment variable. stoker reaches S3-compatible
profiles (``s3``, ``s8k``, ``gcs_s3``) and local ones (``file``, and the reserved
``__filesystem__``). A profile without a bucket in its ``base_path`` (the usual rclone remote)
takes the bucket from the first part of the path: ``msc://remote/bucket/key``.

Example:
    >>> profile = resolve_profile(DEFAULT_PROFILE_NAME)
    >>> profile.kind, profile.base_path
    ('file', '/')
"""

from __future__ import annotations

import configparser
import json
import os
import re
import shutil
from dataclasses import dataclass
from typing import Any

import yaml

from stoker.errors import ConfigError
from stoker.storage.config import S3Settings, load_storage_config

#: Multi-Storage Client's reserved profile for the local filesystem (Energon's default profile).
DEFAULT_PROFILE_NAME = "__filesystem__"
MSC_ENV = "MSC_CONFIG"
_S3_TYPES = ("s3", "s8k", "gcs_s3")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class MscProfile:
    """One resolved profile: ``kind`` is ``s3`` or ``file``; ``where`` is its config file."""

    name: str
    kind: str
    base_path: str
    settings: S3Settings | None = None
    where: str = ""


def msc_config_candidates() -> list[str]:
    """The MSC config files Multi-Storage Client would try, in order."""
    env = os.environ.get
    paths: list[str] = [env(MSC_ENV, "")] if env(MSC_ENV) else []
    names = ("config.yaml", "config.json")
    if env("XDG_CONFIG_HOME"):
        paths += [os.path.join(env("XDG_CONFIG_HOME", ""), "msc", n) for n in names]
    home = env("HOME")
    if home:
        paths += [os.path.join(home, ".msc_config.yaml"), os.path.join(home, ".msc_config.json")]
        paths += [os.path.join(home, ".config", "msc", n) for n in names]
    for folder in (env("XDG_CONFIG_DIRS") or "/etc/xdg").split(":"):
        if folder.strip():
            paths += [os.path.join(folder.strip(), "msc", n) for n in names]
    return [*paths, "/etc/msc_config.yaml", "/etc/msc_config.json"]


def rclone_config_candidates() -> list[str]:
    """The ``rclone.conf`` files Multi-Storage Client would try, in order."""
    paths: list[str] = []
    exe = shutil.which("rclone")
    if exe:
        paths.append(os.path.join(os.path.dirname(os.path.realpath(exe)), "rclone.conf"))
    xdg = os.environ.get("XDG_CONFIG_HOME")
    if xdg and os.path.isdir(xdg):
        paths.append(os.path.join(xdg, "rclone", "rclone.conf"))
    home = os.environ.get("HOME", "")
    paths += ["/etc/rclone.conf", os.path.join(home, ".config", "rclone", "rclone.conf")]
    return [*paths, os.path.join(home, ".rclone.conf")]


def resolve_profile(name: str) -> MscProfile:
    """The profile ``name`` from the MSC and rclone config files.

    Raises:
        ConfigError: no such profile, or one stoker cannot reach (names the files it read).
    """
    if name == DEFAULT_PROFILE_NAME:
        return MscProfile(name, "file", "/")
    msc_file, rclone_file = _first(msc_config_candidates()), _first(rclone_config_candidates())
    key = (name, _signature(msc_file), _signature(rclone_file), load_storage_config())
    hit = _CACHE.get(key)
    if hit is None:
        hit = _CACHE[key] = _resolve(name, msc_file, rclone_file)
    return hit


_CACHE: dict[tuple[Any, ...], MscProfile] = {}


def _resolve(name: str, msc_file: str | None, rclone_file: str | None) -> MscProfile:
    msc = _profiles(_read_msc(msc_file), msc_file) if msc_file else {}
    rclone = _read_rclone(rclone_file) if rclone_file else {}
    clash = sorted(set(msc) & set(rclone))
    if clash:
        raise ConfigError(
            f"profile(s) {', '.join(clash)} defined in both {msc_file} and {rclone_file}.",
            hint="Rename or remove one of them, as Multi-Storage Client requires.",
        )
    where = {**dict.fromkeys(msc, msc_file or ""), **dict.fromkeys(rclone, rclone_file or "")}
    raw = {**msc, **rclone}.get(name)
    if raw is None:
        implicit = _implicit(name)
        if implicit is not None:
            return implicit
        checked = f"{msc_file or 'no MSC config file'} and {rclone_file or 'no rclone.conf'}"
        raise ConfigError(
            f"no MSC profile {name!r}.",
            hint=f"Profiles defined: {', '.join(sorted(where)) or 'none'} (read {checked}). "
            f"Set {MSC_ENV} to a YAML file with a 'profiles' mapping, or add an rclone remote.",
        )
    return _profile(name, _interpolate(raw or {}, where[name]), where[name])


def _profile(name: str, raw: dict[str, Any], where: str) -> MscProfile:
    if "storage_provider" not in raw:  # stoker's own form: S3 settings plus base_path
        settings = load_storage_config().default.merged(raw, where)
        return MscProfile(name, "s3", str(raw.get("base_path", "")).strip("/"), settings, where)
    provider = raw["storage_provider"] or {}
    kind = str(provider.get("type", "")).lower()
    options = provider.get("options") or {}
    if kind == "file":
        return MscProfile(name, "file", str(options.get("base_path") or "/"), None, where)
    if kind not in _S3_TYPES:
        raise ConfigError(
            f"MSC profile {name!r} has storage provider type {kind!r}, which stoker cannot reach.",
            path=where,
            hint=f"stoker reads profiles of type {', '.join(_S3_TYPES)} and file.",
        )
    mapped: dict[str, Any] = {}
    for ours, theirs in (("endpoint_url", "endpoint_url"), ("region", "region_name")):
        if options.get(theirs):
            mapped[ours] = options[theirs]
    if options.get("profile_name"):
        mapped["profile"] = options["profile_name"]
    credentials = (raw.get("credentials_provider") or {}).get("options") or {}
    for ours, theirs in (
        ("access_key_id", "access_key"),
        ("secret_access_key", "secret_key"),
        ("session_token", "session_token"),
    ):
        if credentials.get(theirs):
            mapped[ours] = credentials[theirs]
    settings = load_storage_config().default.merged(mapped, where)
    return MscProfile(name, "s3", str(options.get("base_path") or "").strip("/"), settings, where)


def _implicit(name: str) -> MscProfile | None:
    """Multi-Storage Client's implicit ``_s3-bucket`` profiles (the AWS chain's credentials)."""
    protocol, _, bucket = name[1:].partition("-") if name.startswith("_") else ("", "", "")
    if protocol == "s3" and bucket:
        return MscProfile(name, "s3", bucket, load_storage_config().for_bucket(bucket))
    if protocol == "file":
        return MscProfile(name, "file", "/" + bucket.lstrip("/"))
    return None


def _profiles(raw: Any, where: str) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not isinstance(raw.get("profiles") or {}, dict):
        raise ConfigError("an MSC config must be a mapping with a 'profiles' mapping.", path=where)
    return dict(raw.get("profiles") or {})


def _read_msc(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f) if path.endswith(".json") else yaml.safe_load(f)
    except OSError as e:
        raise ConfigError(f"cannot read the MSC config ({e.strerror}).", path=path) from None
    except (yaml.YAMLError, json.JSONDecodeError) as e:
        raise ConfigError(f"malformed MSC config: {e}.", path=path) from None


def _read_rclone(path: str) -> dict[str, Any]:
    """rclone remotes as MSC profiles (the keys Multi-Storage Client maps)."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except configparser.Error as e:
        raise ConfigError(f"malformed rclone.conf: {e}.", path=path) from None
    profiles: dict[str, Any] = {}
    for name in parser.sections():
        section = parser[name]
        kind = section.get("type", "").lower()
        options = {"base_path": section.get("base_path", "")}
        if kind in _S3_TYPES:
            for theirs, ours in (("endpoint", "endpoint_url"), ("region", "region_name")):
                if theirs in section:
                    options[ours] = section[theirs]
            credentials = {
                ours: section[theirs]
                for theirs, ours in (
                    ("access_key_id", "access_key"),
                    ("secret_access_key", "secret_key"),
                    ("session_token", "session_token"),
                )
                if section.get(theirs)
            }
            profile: dict[str, Any] = {"storage_provider": {"type": kind, "options": options}}
            if credentials:
                profile["credentials_provider"] = {"options": credentials}
            profiles[name] = profile
        elif kind:
            profiles[name] = {"storage_provider": {"type": kind, "options": dict(section)}}
    return profiles


def _interpolate(value: Any, where: str) -> Any:
    if isinstance(value, dict):
        return {k: _interpolate(v, where) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, where) for v in value]
    if isinstance(value, str):
        return _VAR.sub(lambda m: _env(m.group(1), where), value)
    return value


def _env(name: str, where: str) -> str:
    if name not in os.environ:
        raise ConfigError(
            f"the MSC config refers to ${{{name}}}, which is not set.",
            path=where,
            hint=f"Set the environment variable {name}.",
        )
    return os.environ[name]


def _first(paths: list[str]) -> str | None:
    for path in paths:
        if os.path.isfile(path):
            return os.path.abspath(path)
    return None


def _signature(path: str | None) -> tuple[Any, ...]:
    """What the profile depends on: the file's content (small; a rewrite within one mtime tick
    still counts) and, for ``${VAR}``, the environment."""
    if path is None:
        return ()
    with open(path, "rb") as f:
        content = f.read()
    return (path, content, tuple(sorted(os.environ.items())))
