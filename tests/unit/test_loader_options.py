"""LoaderOptions: validated fields, environment variables as their defaults, one-line errors."""

from __future__ import annotations

from typing import Any

import pytest

from stoker import LoaderOptions
from stoker.errors import ConfigError
from stoker.storage.options import ENV, activate, current, defaults, from_env, retry_policy
from stoker.storage.retry import RetryBudget

BAD_VALUES: list[tuple[str, Any]] = [
    ("prefetch_bytes", -1),
    ("prefetch_bytes", 1.5),
    ("prefetch_bytes", "256M"),
    ("prefetch_threads", 0),
    ("prefetch_threads", True),
    ("batch_slots_mb", -2),
    ("batch_slots_mb", float("nan")),
    ("cache_dir", ""),
    ("cache_dir", 3),
    ("cache_max_bytes", -1),
    ("row_group_cache_bytes", 2.5),
    ("cache_fresh_seconds", "soon"),
    ("retry_seconds", 0),
    ("retry_seconds", float("inf")),
    ("storage_config", ""),
]
BAD_ENV: list[tuple[str, str]] = [
    ("STOKER_PREFETCH_BYTES", "lots"),
    ("STOKER_PREFETCH_BYTES", "-5"),
    ("STOKER_PREFETCH_THREADS", "0"),
    ("STOKER_PREFETCH_THREADS", "2.5"),
    ("STOKER_BATCH_SLOTS_MB", "big"),
    ("STOKER_CACHE_MAX_BYTES", "-1"),
    ("STOKER_ROW_GROUP_CACHE_BYTES", "half"),
    ("STOKER_CACHE_FRESH_SECONDS", "soon"),
]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ENV.values():
        monkeypatch.delenv(var, raising=False)


@pytest.mark.parametrize(("name", "value"), BAD_VALUES)
def test_a_bad_option_is_a_one_line_error_naming_it(name: str, value: Any) -> None:
    with pytest.raises(ConfigError) as error:
        LoaderOptions(**{name: value})
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(f"LoaderOptions.{name}={value!r} must be")
    assert name not in ENV or ENV[name] in message  # where its default comes from


@pytest.mark.parametrize(("var", "text"), BAD_ENV)
def test_a_bad_environment_value_is_a_one_line_error_naming_it(
    var: str, text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(var, text)
    field = next(name for name, v in ENV.items() if v == var)
    for make in (LoaderOptions, from_env, current):
        with pytest.raises(ConfigError) as error:
            make()
        message = str(error.value)
        assert "\n" not in message
        assert message.startswith(f"{var}={text!r} is not")
        assert f"LoaderOptions.{field}" in message


def test_the_environment_sets_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    built_in = LoaderOptions()
    assert (built_in.prefetch_bytes, built_in.prefetch_threads) == (256 << 20, 8)
    assert (built_in.batch_slots_mb, built_in.retry_seconds) == (None, None)  # None: sized
    environ = {
        "STOKER_PREFETCH_BYTES": "1048576",
        "STOKER_PREFETCH_THREADS": "3",
        "STOKER_BATCH_SLOTS_MB": "0.5",
        "STOKER_CACHE_DIR": "/tmp/c",
        "STOKER_CACHE_MAX_BYTES": "1e6",
        "STOKER_CACHE_FRESH_SECONDS": "0",
        "STOKER_STORAGE_CONFIG": "/etc/s.yaml",
        "STOKER_ROW_GROUP_CACHE_BYTES": "2e9",
    }
    assert from_env(environ) == LoaderOptions(
        prefetch_bytes=1 << 20, prefetch_threads=3, batch_slots_mb=0.5, cache_dir="/tmp/c",
        cache_max_bytes=1_000_000, cache_fresh_seconds=0.0, storage_config="/etc/s.yaml",
        row_group_cache_bytes=2_000_000_000,
    )  # fmt: skip
    assert from_env({"STOKER_CACHE_DIR": "off"}).cache_dir is None
    assert from_env({"XDG_CACHE_HOME": "/x"}).cache_dir == "/x/stoker"
    for var, text in environ.items():
        monkeypatch.setenv(var, text)
    assert LoaderOptions() == from_env(environ)  # unset fields default to the environment
    assert LoaderOptions(prefetch_threads=5).prefetch_threads == 5  # a field given wins
    monkeypatch.setenv("STOKER_PREFETCH_THREADS", "4")
    assert defaults().prefetch_threads == 4  # a changed environment is parsed again


def test_activated_options_are_the_process_options() -> None:
    options = LoaderOptions(prefetch_threads=3, retry_seconds=2.0)
    previous = activate(options)
    try:
        assert current() is options
        policy = retry_policy(RetryBudget(max_attempts=5, max_seconds=120))
        assert (policy.max_attempts, policy.max_seconds) == (5, 2.0)
    finally:
        activate(previous)
    assert current() == defaults()
    assert retry_policy(RetryBudget(max_seconds=120)).max_seconds == 120  # storage config's
