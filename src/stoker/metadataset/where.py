"""Where a value sits in a metadataset file (``splits.train.blend[1].weight``), and checks on it.

Every check raises a :class:`~stoker.errors.ConfigError` that names the file and the key path, so
a user can go straight to the line to fix.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NoReturn

from stoker.errors import ConfigError, did_you_mean


@dataclass(frozen=True)
class Where:
    """A key path inside one file.

    Example:
        >>> Where("/cfg/mix.yaml", "splits").key("train").index(1).key("weight").key_path
        'splits.train[1].weight'
    """

    file: str
    key_path: str = ""

    def key(self, name: str) -> Where:
        return Where(self.file, f"{self.key_path}.{name}" if self.key_path else name)

    def index(self, i: int) -> Where:
        return Where(self.file, f"{self.key_path}[{i}]")

    def fail(self, problem: str, hint: str | None = None) -> NoReturn:
        text = f"{self.key_path}: {problem}" if self.key_path else problem
        raise ConfigError(text, path=self.file, hint=hint)


def check_keys(raw: dict[str, Any], allowed: Iterable[str], where: Where, what: str) -> None:
    """Fail on keys outside ``allowed``, listing the valid ones."""
    valid = sorted(allowed)
    unknown = sorted(str(k) for k in raw if k not in valid)
    if unknown:
        where.fail(
            f"unknown key(s) {', '.join(map(repr, unknown))} in {what}.",
            hint=did_you_mean(unknown[0], valid) + f"Valid keys: {', '.join(valid)}.",
        )


def mapping(value: object, where: Where, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        where.fail(f"{what} must be a mapping, got {type(value).__name__} {value!r}.")
    for k in value:
        if not isinstance(k, str):
            where.fail(f"keys of {what} must be strings, got {k!r}.")
    return value


def string(value: object, where: Where) -> str:
    if not isinstance(value, str) or not value:
        where.fail(f"expected a non-empty string, got {value!r}.")
    return value


def optional_string(raw: dict[str, Any], name: str, where: Where) -> str | None:
    value = raw.get(name)
    return None if value is None else string(value, where.key(name))


def non_negative(value: object, where: Where) -> float:
    """A finite number >= 0 (weights, repetitions); booleans and strings are refused."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        where.fail(f"expected a number, got {value!r}.")
    if value < 0:
        where.fail(f"must not be negative, got {value!r}.")
    return float(value)


def shuffle_multiplier(raw: dict[str, Any], where: Where) -> int | None:
    """``shuffle_over_epochs_multiplier``: a positive int, -1 (no replacement) or null (off)."""
    if "shuffle_over_epochs_multiplier" not in raw:
        return 1
    value = raw["shuffle_over_epochs_multiplier"]
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not (value == -1 or value >= 1):
        where.key("shuffle_over_epochs_multiplier").fail(
            f"expected a positive integer, -1 or null, got {value!r}."
        )
    return value


def subflavors(raw: dict[str, Any], where: Where) -> dict[str, Any]:
    value = raw.get("subflavors")
    if value is None:
        return {}
    return dict(mapping(value, where.key("subflavors"), "subflavors"))
