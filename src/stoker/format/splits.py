"""Split the shards of a dataset into parts (train, val, test, ...) by ratio or by name pattern.

Pure functions over shard names: :func:`parse_split_ratio` reads the ``--split-ratio`` text,
:func:`split_by_ratio` cuts the (optionally shuffled) shard list by cumulative ratio and
:func:`split_by_patterns` assigns shards by brace-expanded regexes. ``prepare`` writes the result
to ``split.yaml``.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence

from stoker.errors import ConfigError
from stoker.format.brace import expand

SPLIT_NAMES = ("train", "val", "test")


def parse_split_ratio(text: str) -> list[tuple[str, float]]:
    """``"8,1,1"`` or ``"train=0.9,val=0.1"`` -> [(split, ratio), ...]."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    try:
        if all("=" in item or ":" in item for item in items):
            pairs = [re.split(r"[=:]", item, maxsplit=1) for item in items]
            ratios = [(name.strip(), float(value)) for name, value in pairs]
        elif len(items) == len(SPLIT_NAMES):
            ratios = [(n, float(v)) for n, v in zip(SPLIT_NAMES, items, strict=True)]
        else:
            raise ValueError
    except ValueError:
        raise ConfigError(
            f"invalid split ratio {text!r}.",
            hint="Give three numbers for train,val,test (e.g. '8,1,1' or '0.8,0.1,0.1') or "
            "named parts (e.g. 'train=0.9,val=0.1').",
        ) from None
    if not all(math.isfinite(r) for _, r in ratios) or not math.isfinite(sum(r for _, r in ratios)):
        raise ConfigError(
            f"invalid split ratio {text!r}: every ratio must be a finite number.",
            hint="Use plain numbers such as '8,1,1' (no nan, inf or huge exponents).",
        )
    if any(r < 0 for _, r in ratios) or sum(r for _, r in ratios) <= 0:
        raise ConfigError(f"invalid split ratio {text!r}: ratios must be >= 0 and not all 0.")
    names = [name for name, _ in ratios]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated or not all(names):
        raise ConfigError(
            f"invalid split ratio {text!r}: "
            + (
                f"split {', '.join(repeated)} is given more than once."
                if repeated
                else "a split has no name."
            ),
            hint="Name each split once, e.g. 'train=0.9,val=0.1'.",
        )
    return ratios


def split_by_ratio(
    shards: Sequence[str], ratios: Sequence[tuple[str, float]], seed: int | None
) -> dict[str, list[str]]:
    """Cut the (optionally shuffled) shard list by cumulative ratio.

    As Energon does, except that float rounding never drops the last shards.
    """
    order = list(shards)
    if seed is not None:
        random.Random(seed).shuffle(order)
    total = sum(r for _, r in ratios)
    out, cumulative, start = {}, 0.0, 0
    for name, ratio in ratios:
        cumulative += ratio / total
        end = int(len(order) * cumulative + 1e-9)
        out[name] = order[start:end]
        start = end
    return out


def split_by_patterns(
    shards: Sequence[str], patterns: Sequence[tuple[str, str]]
) -> dict[str, list[str]]:
    """Assign shards to splits by brace-expanded regex patterns matched at the start."""
    compiled = compile_split_patterns(patterns)
    return {
        name: [s for s in shards if any(r.match(s) for r in regexes)] for name, regexes in compiled
    }


def compile_split_patterns(
    patterns: Sequence[tuple[str, str]],
) -> list[tuple[str, list[re.Pattern[str]]]]:
    """The regexes of each ``(split, pattern)``; a :class:`ConfigError` for an invalid one.

    Example:
        >>> [(name, len(rs)) for name, rs in compile_split_patterns([("val", "val-{0..1}")])]
        [('val', 2)]
    """
    out = []
    for name, pattern in patterns:
        regexes = []
        for regex in expand([pattern]):
            try:
                regexes.append(re.compile(regex))
            except re.error as e:
                raise ConfigError(
                    f"invalid --split-parts pattern {pattern!r} for split {name!r}: {regex!r} is "
                    f"not a regular expression ({e}).",
                    hint="Escape regex characters such as ( [ + * ? with a backslash, e.g. "
                    "'val:val-00\\(1\\).tar'.",
                ) from None
        out.append((name, regexes))
    return out
