"""The catalogue of sample types a ``dataset.yaml`` may name, with their fields.

This is plain data so that ``prepare`` and ``lint`` can check field maps without importing torch;
the sample classes themselves (``stoker.model.task``) are checked against it by the tests.
"""

from __future__ import annotations

from dataclasses import dataclass

#: ``__module__`` values that mean "stoker's own classes" (Energon's name is accepted as alias).
BUILTIN_MODULES = ("stoker", "megatron.energon")
CRUDE_CLASS = "CrudeWebdataset"


@dataclass(frozen=True)
class FieldSpec:
    name: str
    type: str
    required: bool


def _f(spec: str) -> tuple[FieldSpec, ...]:
    out = []
    for item in spec.split(";"):
        name, _, type_ = item.strip().partition(":")
        required = not type_.endswith("?")
        out.append(FieldSpec(name.strip(), type_.strip().rstrip("?"), required))
    return tuple(out)


#: Sample type name -> its data fields (not counting ``__key__`` and the other meta fields).
SAMPLE_TYPES: dict[str, tuple[FieldSpec, ...]] = {
    "CaptioningSample": _f("image: Tensor; caption: str"),
    "ImageSample": _f("image: Tensor"),
    "ImageClassificationSample": _f("image: Tensor; label: int?; label_name: str?"),
    "TextSample": _f("text: str"),
    "VQASample": _f("image: Tensor; context: str; answers: list[str]?; answer_weights: Tensor?"),
    "MultiChoiceVQASample": _f(
        "image: Tensor; context: str; choices: list[str]?; correct_choice_idx: int?"
    ),
    "OCRSample": _f(
        "image: Tensor; text: str; block_boxes: Tensor?; block_classes: Tensor | list[str]?; "
        "block_text: list[str]?; lines_boxes: Tensor?; lines_text: list[str]?; "
        "words_boxes: Tensor?; words_text: list[str]?; chars_boxes: Tensor?; "
        "chars_text: list[str]?"
    ),
    "VQAOCRSample": _f(
        "image: Tensor; context: str; text: str; answers: list[str]?; answer_weights: Tensor?; "
        "words_boxes: Tensor?; words_text: list[str]?"
    ),
    "InterleavedSample": _f("sequence: list[Tensor | str]"),
    "SimilarityInterleavedSample": _f(
        "images: list[Tensor]; texts: list[str]; audio: list[Tensor]?; video: list[Tensor]?; "
        "similarity_matrix: Tensor?; matched_text_indices: list[int]?"
    ),
    "VidQASample": _f(
        "video: AVDecoder; context: str; answers: list[str]?; answer_weights: Tensor?"
    ),
}

#: Energon's deprecated per-type dataset classes (``__class__: CaptioningWebdataset``).
LEGACY_DATASET_CLASSES = {name.replace("Sample", "Webdataset"): name for name in SAMPLE_TYPES} | {
    "VQAOCRWebdataset": "VQAOCRSample"
}
