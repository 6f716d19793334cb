"""Stages of the data pipeline: read -> decode -> sample -> encode -> batch."""
