"""The on-disk format, byte-compatible with Megatron-Energon: shards, indexes and meta files."""
