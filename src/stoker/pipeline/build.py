"""From raw parts to a sample: filter parts, decode them, apply the field map or sample loader."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stoker.pipeline.decode import SampleDecoder
from stoker.pipeline.field_map import build_sample, load_part_filter, load_sample_loader
from stoker.pipeline.read import RawSample
from stoker.samples import SourceInfo
from stoker.sources import DataSource


class SampleBuilder:
    """Builds the samples of one source; made once per worker (it may load user code)."""

    def __init__(self, source: DataSource, decoder: SampleDecoder | None) -> None:
        self.source = source
        self.decoder = decoder
        config = source.config
        self.sample_loader = (
            load_sample_loader(source.root, config.sample_loader, source.trust_sample_loader)
            if config.sample_loader
            else None
        )
        self.part_filter: Callable[[str], bool] | None
        if config.field_map is not None:
            # Decode only what the field map reads: other parts cost nothing.
            self.part_filter = frozenset(config.parts_used()).__contains__
        else:
            self.part_filter = load_part_filter(
                source.root, config.part_filter, source.trust_sample_loader
            )

    def build(self, raw: RawSample, ref: int) -> Any:
        """The sample (typed or crude) for ``raw``, which is global sample ``ref`` of the split."""
        parts = raw.parts
        if self.part_filter is not None:
            parts = {name: data for name, data in parts.items() if self.part_filter(name)}
        decoded = self.decoder.decode(raw.key, parts) if self.decoder is not None else dict(parts)
        source = self.source
        sources = (
            SourceInfo(
                dataset_path=source.path,
                index=ref,
                shard_name=raw.shard,
                file_names=raw.file_names,
            ),
        )
        return build_sample(
            source.config,
            decoded,
            key=raw.key,
            restore_key=("Webdataset", source.path, ref),
            subflavors=source.subflavors,
            sources=sources,
            sample_loader=self.sample_loader,
        )
