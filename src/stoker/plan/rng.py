"""Keyed, counter-based random generators: one independent stream per purpose and key.

Every random decision of the planner draws from ``keyed_rng(seed, PURPOSE, *key)``: the integers
are hashed by :class:`numpy.random.SeedSequence` and feed a counter-based
:class:`numpy.random.Philox`. Different keys give statistically independent streams, so
``(seed, epoch)`` never collides with ``(seed + 1, epoch - 1)`` the way ``seed + epoch`` does.

Keys are small non-negative integers: a purpose tag (one of the constants below), then the
dataset id, the stream (virtual worker) and the epoch or window number. A new kind of decision
takes a new tag; existing tags never change meaning (that would change every saved plan).
"""

from __future__ import annotations

from typing import Final

import numpy as np

# numpy loads these on first use (np.random.Generator; np.unique checks np.ma.is_masked): ~0.2 s
# that would land on the first batch of every dataloader worker. Loaded with the planner instead.
import numpy.ma
import numpy.random

from stoker.errors import ConfigError

#: Order of the slices of a stream in an epoch (or a group of epochs).
SLICE_ORDER: Final = 1
#: Permutation of one shuffle window of a stream's epoch.
WINDOW: Final = 2
#: Jitter of the blend schedule's due times (:mod:`stoker.plan.blend`).
BLEND: Final = 3
#: Seed of the choice of sub-datasets of a mix of whole batches (:mod:`stoker.runtime.mix_batch`).
MIX_BATCH: Final = 4


def keyed_rng(seed: int, *key: int) -> np.random.Generator:
    """A generator determined by ``seed`` and ``key`` only, independent across keys.

    Example:
        >>> a = keyed_rng(42, SLICE_ORDER, 0, 3, 7).permutation(5)
        >>> b = keyed_rng(42, SLICE_ORDER, 0, 3, 7).permutation(5)
        >>> bool((a == b).all())
        True
    """
    words = [int(w) for w in (seed, *key)]
    if min(words) < 0:
        raise ConfigError(
            f"keyed_rng needs non-negative integers, got words={(seed, *key)}; use a seed >= 0."
        )
    # SeedSequence turns each integer of a list into its 32-bit words, one numpy array per
    # integer; integers below 2**32 are one word each, the words of one uint32 array: the same
    # entropy, hashed the same, at a third of the cost of the generator.
    entropy = np.array(words, np.uint32) if max(words) < _WORD else words
    return np.random.Generator(np.random.Philox(np.random.SeedSequence(entropy)))


_WORD = 1 << 32
