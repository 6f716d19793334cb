"""Metadatasets blending small JSONL sources whose samples name their source, for loading tests."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from stoker import DefaultTaskEncoder, stateless
from stoker.format.jsonl import prepare_jsonl

V2 = "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n"


class Source(DefaultTaskEncoder):  # type: ignore[type-arg]
    """Each sample becomes the name of its source; a batch is the list of those names."""

    @stateless
    def encode_sample(self, sample: Any) -> str:
        return str(sample["json"]["src"])

    def batch(self, samples: list[Any]) -> list[str]:
        return samples


def jsonl_blend(folder: Path, sizes: Mapping[str, int], name: str, train: str) -> Path:
    """``folder/name``: a V2 metadataset whose train split is ``train`` (YAML, indented by 4)
    over ``{source}.jsonl`` files of ``sizes[source]`` lines ``{"src": source, "i": i}``."""
    for source, n in sizes.items():
        lines = [json.dumps({"src": source, "i": i}) + "\n" for i in range(n)]
        (folder / f"{source}.jsonl").write_text("".join(lines))
        prepare_jsonl(str(folder / f"{source}.jsonl"))
    path = folder / name
    path.write_text(V2 + train)
    return path
