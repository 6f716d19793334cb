"""The loader at run time: the recipe, the streams, workers, batch transport, state and checkpoints.

Above :mod:`stoker.model` and :mod:`stoker.sources`; the entry points (``stoker.api``, the
integrations, the CLI) build on it; see ``docs/architecture.md``.
"""
