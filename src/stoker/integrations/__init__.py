"""stoker inside training frameworks.

Each framework has its own module, imported on its own so that stoker never imports a framework
you do not use:

- :mod:`stoker.integrations.megatron`: ``MultiModalDataModule`` (alias
  ``EnergonMultiModalDataModule``), a drop-in for Megatron-Bridge's Energon data module, taking
  current Bridge's arguments and Bridge 0.3's (:mod:`stoker.integrations.bridge_args`);
- :mod:`stoker.integrations.lightning`: ``StokerDataModule``, a ``LightningDataModule`` whose
  checkpoints carry the loader position (``pip install 'stoker[lightning]'``);
- :mod:`stoker.integrations.task_encoder`: ``MultiModalTaskEncoder``, tokenizer + image processor
  into fixed-length, optionally packed, sequences;
- :mod:`stoker.integrations.loaders`: the resumable / restarting loader wrappers and
  ``cyclic_iter`` that both data modules use;
- :mod:`stoker.integrations.topology`: the pure data-parallel rank under model parallelism.

See ``docs/integrations.md``.
"""
