"""``python -m stoker.energon_alias``: unmodified programs that import ``megatron.energon``, run
with real dataloader worker processes (spawned and forked), module mode, torchrun, and
megatron-core beside the alias."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import stoker
from stoker import prepare_dataset
from tests.conftest import make_dataset

SCRIPT = """
import json, multiprocessing, os, sys

from megatron.energon import WorkerConfig, get_loader, get_train_dataset

from encoders import TagWorker  # a module of the program, imported in the workers too


if __name__ == "__main__":
    multiprocessing.set_start_method(sys.argv[2])
    ds = get_train_dataset(
        sys.argv[1],
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=2),
        batch_size=2,
        shuffle_buffer_size=None,
        max_samples_per_sequence=None,
        task_encoder=TagWorker(),
    )
    texts = [t for _, batch in zip(range(6), get_loader(ds)) for t in batch.text]
    base = TagWorker.__mro__[1]
    print(json.dumps({"main": os.getpid(), "texts": texts, "base": base.__module__}))
"""

ENCODERS = """
import os, sys

from megatron.energon import DefaultTaskEncoder
from megatron.energon.task_encoder.base import stateless


class TagWorker(DefaultTaskEncoder):
    @stateless
    def encode_sample(self, sample):
        served_by = type(sys.modules["megatron.energon"]).__module__
        sample.text = f"{sample.text}|{os.getpid()}|{served_by}"
        return sample
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A prepared text dataset and a program that loads it through ``megatron.energon``."""
    root = tmp_path_factory.mktemp("alias")
    dataset = make_dataset(root / "ds")
    prepare_dataset(
        str(dataset),
        split_ratio="1,0,0",
        dataset_yaml={
            "sample_type": {"__module__": "megatron.energon", "__class__": "TextSample"},
            "field_map": {"text": "txt"},
        },
    )
    (root / "train.py").write_text(SCRIPT)
    (root / "encoders.py").write_text(ENCODERS)
    return root


def run(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "STOKER_ENERGON_ALIAS"}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("start_method", ["spawn", "fork"])
def test_launcher_serves_energon_in_workers(program: Path, start_method: str) -> None:
    done = run(
        [sys.executable, "-m", "stoker.energon_alias", "train.py", "ds", start_method], program
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["base"] == "stoker.model.task"  # the program's class subclasses stoker's
    texts = report["texts"]
    assert sorted(t.split("|")[0] for t in texts) == sorted(
        f"caption s{s}_{i}" for s in range(3) for i in range(4)
    )
    workers = {t.split("|")[1] for t in texts}
    assert len(workers) == 2 and str(report["main"]) not in workers
    assert {t.split("|")[2] for t in texts} == {"stoker.energon_alias.modules"}


@pytest.mark.parametrize("no_site", [False, True])
def test_install_alone_reaches_spawned_children(tmp_path: Path, no_site: bool) -> None:
    """A spawned child that loads a module importing megatron.energon before anything else;
    with ``-S`` it finds stoker only on the parent's sys.path."""
    (tmp_path / "child.py").write_text(
        "import sys\nimport megatron.energon\n\n"
        "def check():\n"
        "    served_by = type(sys.modules['megatron.energon']).__module__\n"
        "    sys.exit(0 if served_by == 'stoker.energon_alias.modules' else 3)\n"
    )
    src = Path(stoker.__file__).resolve().parents[1]
    (tmp_path / "main.py").write_text(
        textwrap.dedent(
            f"""
            import multiprocessing, sys

            if __name__ == "__main__":
                sys.path.insert(0, {str(src)!r})
                import stoker.energon_alias

                stoker.energon_alias.install()
                import child  # the spawned child imports it before it runs anything of ours

                multiprocessing.set_start_method("spawn")
                p = multiprocessing.Process(target=child.check)
                p.start()
                p.join()
                sys.exit(p.exitcode)
            """
        )
    )
    done = run([sys.executable, *(["-S"] if no_site else []), "main.py"], tmp_path)
    assert done.returncode == 0, done.stderr


def test_module_mode_and_megatron_core(tmp_path: Path) -> None:
    package = tmp_path / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text(
        "import sys\nimport megatron.core\nimport megatron.energon\nimport stoker\n"
        "from megatron.energon.task_encoder.base import stateless\n"
        "assert stateless is stoker.stateless\n"
        "print('ok', sys.argv[1:], megatron.core.__name__)\n"
    )
    done = run(
        [sys.executable, "-W", "ignore", "-m", "stoker.energon_alias", "-m", "mypkg", "x"], tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "ok ['x'] megatron.core"


def test_torchrun_two_gloo_ranks(tmp_path: Path) -> None:
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    assert torchrun is not None, "torch installs torchrun next to this Python"
    (tmp_path / "ranks.py").write_text(
        textwrap.dedent(
            """
            import sys
            import torch.distributed as dist
            from megatron.energon import WorkerConfig

            dist.init_process_group("gloo")
            config = WorkerConfig.default_worker_config(num_workers=0)
            served_by = type(sys.modules["megatron.energon"]).__module__
            with open(f"rank{config.rank}.txt", "w") as out:  # ranks' stdout may interleave
                out.write(f"rank {config.rank}/{config.world_size} {served_by}")
            dist.destroy_process_group()
            """
        )
    )
    done = run(
        [torchrun, "--nproc-per-node", "2", "-m", "stoker.energon_alias", "ranks.py"], tmp_path
    )
    assert done.returncode == 0, done.stderr
    lines = [(tmp_path / f"rank{r}.txt").read_text() for r in range(2)]
    assert lines == [f"rank {r}/2 stoker.energon_alias.modules" for r in range(2)]
