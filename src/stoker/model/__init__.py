"""What users subclass and receive: samples, ``Batch``, ``TaskEncoder``, cookers, ``WorkerConfig``.

This layer sits above :mod:`stoker.pipeline` (whose stages run the hooks defined here) and beside
:mod:`stoker.sources`; see ``docs/architecture.md``.
"""
