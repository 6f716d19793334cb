"""Where samples come from: data sources, their sample construction, joins, aux stores and blends.

Beside :mod:`stoker.model` and above :mod:`stoker.pipeline`; see ``docs/architecture.md``.
"""
