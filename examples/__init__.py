"""Worked examples: a tiny vision-language model trained through stoker's integrations.

- ``train_vlm_lightning.py``: Lightning, ``StokerDataModule``, checkpoint, crash, exact resume.
- ``train_vlm_megatron.py``: a Megatron-style loop over ``MultiModalDataModule``.
- ``vlm_data.py`` / ``tiny_vlm.py``: the demo dataset, an offline tokenizer, an image processor,
  and the model, shared by both (and by the tests of ``stoker.integrations``).
"""
