"""Where ``--distributed`` takes its ranks from: torchrun's variables, or SLURM's."""

from __future__ import annotations

import pytest

from stoker.errors import ConfigError
from stoker.format import distributed
from stoker.format.distributed import init_distributed

VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
SLURM = ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in VARIABLES + SLURM:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_srun_variables_become_torch_ones(clean_env: pytest.MonkeyPatch) -> None:
    import os

    clean_env.setenv("SLURM_PROCID", "5")
    clean_env.setenv("SLURM_NTASKS", "16")
    clean_env.setenv("SLURM_LOCALID", "1")
    clean_env.setenv("MASTER_ADDR", "node001")
    distributed._env_from_slurm()
    got = {name: os.environ.get(name) for name in VARIABLES}
    assert got == {"RANK": "5", "WORLD_SIZE": "16", "LOCAL_RANK": "1",
                   "MASTER_ADDR": "node001", "MASTER_PORT": "29500"}  # fmt: skip


def test_srun_without_master_addr_says_how_to_set_it(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("SLURM_PROCID", "0")
    clean_env.setenv("SLURM_NTASKS", "2")
    with pytest.raises(ConfigError, match="MASTER_ADDR") as info:
        init_distributed()
    assert "scontrol show hostnames" in (info.value.hint or "")


def test_no_launcher_is_a_config_error(clean_env: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="RANK and WORLD_SIZE") as info:
        init_distributed()
    assert "torchrun" in (info.value.hint or "")
