"""One rank of the distributed pack + prepare test; run by ``torchrun`` from
``test_distributed_prepare.py``: ``torchrun --nproc-per-node 4 _prepare_ranks.py ROOT``.

Each rank runs the ``stoker`` commands a user would, with ``--distributed``, in-process:
``pack`` of a folder of images, ``prepare`` of its shards with media metadata, and
``pack --prepare`` of a JSONL file.
"""

from __future__ import annotations

import sys

from stoker.cli.main import cli


def commands(root: str, distributed: list[str]) -> list[list[str]]:
    return [
        ["pack", f"{root}/raw", f"{root}/images", "--samples-per-shard", "2", *distributed],
        [
            "prepare",
            f"{root}/images",
            "--non-interactive",
            "--split-ratio",
            "1,0,0",
            "--sample-type",
            "CaptioningSample",
            "--field-map",
            '{"image": "jpg", "caption": "txt"}',
            "--media-metadata-by-extension",
            "--num-workers",
            "1",
            *distributed,
        ],
        [
            "pack",
            f"{root}/texts.jsonl",
            f"{root}/texts",
            "--samples-per-shard",
            "3",
            "--prepare",
            "--split-ratio",
            "1,0,0",
            "--num-workers",
            "1",
            *distributed,
        ],
    ]


def main(root: str, distributed: bool) -> None:
    flags = ["--no-progress", "--distributed"] if distributed else ["--no-progress"]
    for args in commands(root, flags):
        cli.main(args, prog_name="stoker", standalone_mode=False)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] == ["--distributed"])
