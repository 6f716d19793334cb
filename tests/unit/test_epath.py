"""EPath (Energon's path class) on local folders, and msc:// profiles from MSC and rclone configs.

Remote reads and writes through a real S3 server are in tests/integration/test_msc_rclone.py.
"""

from __future__ import annotations

import json
import multiprocessing
import pickle
from pathlib import Path

import pytest

from stoker import DEFAULT_PROFILE_NAME, EPath
from stoker.errors import ConfigError
from stoker.storage import open_store
from stoker.storage.local import LocalStore
from stoker.storage.msc import resolve_profile


@pytest.fixture(autouse=True)
def no_configs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private HOME and XDG dirs: no MSC or rclone file from the machine leaks in."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_CONFIG_DIRS", str(tmp_path / "xdg_dirs"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no rclone executable with a config beside it
    for name in ("MSC_CONFIG", "STOKER_STORAGE_CONFIG", "NVDATASET_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    return home


def test_names_and_joins_are_resolved_lexically(tmp_path: Path) -> None:
    p = EPath("/data/coco") / "parts" / ".." / "./train-0.tar"
    assert str(p) == p.url == "/data/coco/train-0.tar"
    assert (p.name, p.stem, p.suffix) == ("train-0.tar", "train-0", ".tar")
    assert str(p.parent) == "/data/coco" and str(p.parent.parent.parent) == "/"
    assert str(p.with_suffix(".idx")) == "/data/coco/train-0.idx"
    assert p.relative_to(EPath("/data")) == "coco/train-0.tar"
    assert p / "/abs/other" == EPath("/abs/other")
    assert p / EPath("msc://lake/x") == EPath("msc://lake/x")
    assert repr(p) == "EPath('/data/coco/train-0.tar')"
    with pytest.raises(ValueError, match="above root"):
        EPath("/a") / ".." / ".."


def test_relative_path_and_pathlib_and_file_url_are_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert str(EPath("x/../y.txt")) == str(tmp_path / "y.txt")
    assert str(EPath("")) == str(tmp_path) == str(EPath("."))
    assert str(EPath(Path("y.txt"))) == str(tmp_path / "y.txt")
    assert EPath(f"file://{tmp_path}/y.txt") == EPath(tmp_path / "y.txt")
    assert EPath(f"msc://{DEFAULT_PROFILE_NAME}{tmp_path}/y.txt") == EPath(tmp_path / "y.txt")
    assert EPath(EPath("y.txt")) == EPath("y.txt")
    with pytest.raises(TypeError, match="EPath takes"):
        EPath(3)  # type: ignore[arg-type]


def test_value_semantics_and_pickle_keep_no_secrets() -> None:
    a, b = EPath("msc://lake/a/1.tar"), EPath("msc://lake/a/0.tar")
    assert sorted([a, b]) == [b, a] and len({a, EPath("msc://lake/a/1.tar")}) == 1
    assert a != EPath("msc://sea/a/1.tar") and a != "msc://lake/a/1.tar"
    with pytest.raises(ValueError, match="different profiles"):
        _ = a < EPath("/a/1.tar")
    with pytest.raises(ValueError, match="different profiles"):
        a.relative_to(EPath("/a"))
    back = pickle.loads(pickle.dumps(a))
    assert back == a and str(back) == "msc://lake/a/1.tar"
    assert pickle.loads(pickle.dumps(EPath("s3://bucket/k/x"))).url == "s3://bucket/k/x"


def test_rclone_protocol_is_deprecated_spelling_of_msc() -> None:
    with pytest.warns(DeprecationWarning, match="deprecated"):
        p = EPath("rclone://s3/tmp/path/.././subpath.txt")
    assert str(p) == "msc://s3/tmp/subpath.txt"


def test_local_read_write_size_and_delete(tmp_path: Path) -> None:
    p = EPath(tmp_path) / "new" / "deeper" / "f.bin"
    assert not p.is_file() and not p.exists() and not p.parent.is_dir()
    with p.open("wb") as f:  # parents are made, as Energon's writes do
        f.write(b"0123456789")
    assert p.is_file() and p.exists() and p.parent.is_dir() and p.size() == 10
    with p.open("rb") as f:
        f.seek(4)
        assert f.read(3) == b"456"
    (p.parent / "t.txt").write_text("héllo")
    assert (p.parent / "t.txt").read_text() == "héllo"
    with (p.parent / "t.txt").open("r") as f:
        assert f.read() == "héllo"
    assert p.read_bytes() == b"0123456789"
    st = p.stat()
    assert st.content_length == 10 and st.type == "file" and st.last_modified is not None
    assert p.is_local() and p.local_path() == tmp_path / "new" / "deeper" / "f.bin"
    p.unlink()
    assert not p.is_file()
    with pytest.raises(ValueError, match="mode"):
        p.open("a")  # type: ignore[call-overload]


def test_copy_and_move_files_and_folders(tmp_path: Path) -> None:
    src = EPath(tmp_path / "src")
    (src / "a.txt").write_text("a")
    (src / "sub" / "b.txt").write_text("b")
    src.copy(EPath(tmp_path / "copy"))
    assert (EPath(tmp_path / "copy") / "sub" / "b.txt").read_text() == "b"
    (src / "a.txt").move(EPath(tmp_path / "moved" / "a.txt"))
    assert not (src / "a.txt").is_file()
    assert (tmp_path / "moved" / "a.txt").read_text() == "a"
    EPath(tmp_path / "made" / "x").mkdir(parents=True)
    assert (tmp_path / "made" / "x").is_dir()


def test_glob_and_walk_follow_symlinks_and_list_only_files(tmp_path: Path) -> None:
    root = EPath(tmp_path)
    for name in ("file.txt", "sub/file2.txt", "sub/file3.blob", "sub/deep/x.txt"):
        (root / name).write_text("x")
    for i in range(5):
        (root / f"part_{i}.bin").write_bytes(b"")
    (tmp_path / "link").symlink_to(tmp_path / "sub", target_is_directory=True)
    rel = sorted(p.relative_to(root) for p in root.walk())
    assert rel == sorted(
        ["file.txt", "sub/file2.txt", "sub/file3.blob", "sub/deep/x.txt", "link/file2.txt"]
        + ["link/file3.blob", "link/deep/x.txt"]
        + [f"part_{i}.bin" for i in range(5)]
    )
    assert [p.name for p in root.glob("part_[0-2].bin")] == [f"part_{i}.bin" for i in range(3)]
    assert sorted(p.relative_to(root) for p in root.glob("**/*.txt")) == [
        "file.txt", "link/deep/x.txt", "link/file2.txt", "sub/deep/x.txt", "sub/file2.txt",
    ]  # fmt: skip
    assert [p.relative_to(root) for p in root.glob("link/*.txt")] == ["link/file2.txt"]
    assert list(root.glob("sub")) == []  # folders never match
    assert all(isinstance(p, EPath) and p.is_file() for p in root.glob("**/*"))


def _child_reads(p: EPath, queue: multiprocessing.Queue[str]) -> None:
    queue.put(p.read_text())


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_an_epath_crosses_into_a_subprocess(tmp_path: Path, method: str) -> None:
    p = EPath(tmp_path / "f.txt")
    p.write_text("from the parent")
    ctx = multiprocessing.get_context(method)
    queue: multiprocessing.Queue[str] = ctx.Queue()
    proc = ctx.Process(target=_child_reads, args=(p, queue))
    proc.start()
    assert queue.get(timeout=60) == "from the parent"
    proc.join(60)
    assert proc.exitcode == 0


def test_dss_paths_lie_under_the_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    images = tmp_path / "cache" / "charts@x" / "v0" / "images"
    images.mkdir(parents=True)
    (images / "0.jpg").write_bytes(b"jpg")
    monkeypatch.setenv("NVDATASET_CACHE_DIR", str(tmp_path / "cache"))
    root = EPath("dss://charts@x@v0")
    assert root.display_name == "charts@x@v0" and str(root / "images") == "dss://charts@x@v0/images"
    assert [str(p) for p in root.glob("**/*.jpg")] == ["dss://charts@x@v0/images/0.jpg"]
    assert root.local_path() == tmp_path / "cache" / "charts@x" / "v0"
    with pytest.raises(AssertionError, match="version separated by '@'"):
        EPath("dss://charts")


# -- msc:// profiles ------------------------------------------------------------------------------
def test_msc_file_profile_from_xdg_config_home(tmp_path: Path, no_configs: Path) -> None:
    data = tmp_path / "data"
    (data / "ds").mkdir(parents=True)
    (data / "ds" / "a.txt").write_text("local through a profile")
    config = no_configs / ".config" / "msc" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(
        f"profiles:\n  disk:\n    storage_provider:\n      type: file\n"
        f"      options: {{base_path: {data}}}\n"
    )
    p = EPath("msc://disk/ds/a.txt")
    assert p.read_text() == "local through a profile" and p.is_local()
    assert p.local_path() == data / "ds" / "a.txt"
    assert [str(x) for x in EPath("msc://disk/ds").glob("*.txt")] == ["msc://disk/ds/a.txt"]
    store = open_store("msc://disk/ds")
    assert isinstance(store, LocalStore) and store.read_text("a.txt") == "local through a profile"


def test_msc_config_search_order_json_and_environment_variables(
    tmp_path: Path, no_configs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home_json = no_configs / ".msc_config.json"
    home_json.write_text(
        json.dumps(
            {
                "profiles": {
                    "lake": {
                        "storage_provider": {
                            "type": "s3",
                            "options": {
                                "base_path": "bucket/prefix",
                                "endpoint_url": "${LAKE_ENDPOINT}",
                                "region_name": "eu-1",
                            },
                        },
                        "credentials_provider": {
                            "type": "S3Credentials",
                            "options": {"access_key": "${LAKE_KEY}", "secret_key": "sec"},
                        },
                    }
                }
            }
        )
    )
    monkeypatch.setenv("LAKE_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("LAKE_KEY", "key-from-env")
    profile = resolve_profile("lake")
    assert (profile.kind, profile.base_path, profile.where) == (
        "s3",
        "bucket/prefix",
        str(home_json),
    )
    assert profile.settings is not None
    assert profile.settings.endpoint_url == "http://127.0.0.1:9"
    assert profile.settings.access_key_id == "key-from-env" and profile.settings.region == "eu-1"
    # MSC_CONFIG wins over the files in HOME.
    explicit = tmp_path / "explicit.yaml"
    explicit.write_text("profiles:\n  lake:\n    endpoint_url: http://other:1\n    base_path: b2\n")
    monkeypatch.setenv("MSC_CONFIG", str(explicit))
    assert resolve_profile("lake").base_path == "b2"
    monkeypatch.delenv("LAKE_KEY")
    monkeypatch.delenv("MSC_CONFIG")
    with pytest.raises(ConfigError, match=r"\$\{LAKE_KEY\}"):
        resolve_profile("lake")


def test_rclone_remote_is_a_profile_whose_path_starts_with_the_bucket(no_configs: Path) -> None:
    conf = no_configs / ".config" / "rclone" / "rclone.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text(
        "[s3]\ntype = s3\nenv_auth = false\naccess_key_id = AK\nsecret_access_key = SK%\n"
        "region = us-east-1\nendpoint = http://127.0.0.1:9\n\n[drive]\ntype = drive\n"
    )
    profile = resolve_profile("s3")
    assert profile.settings is not None and profile.where == str(conf)
    assert (profile.settings.access_key_id, profile.settings.secret_access_key) == ("AK", "SK%")
    store = open_store("msc://s3/bucket/data/ds")
    assert (store.bucket, store.prefix) == ("bucket", "data/ds")  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="names no bucket"):
        open_store("msc://s3")
    with pytest.raises(ConfigError, match="type 'drive'"):
        open_store("msc://drive/x")
    # Picklable without the secrets of the profile.
    assert b"SK%" not in pickle.dumps(EPath("msc://s3/bucket/data"))


def test_a_profile_in_both_files_and_an_unknown_profile_are_errors(no_configs: Path) -> None:
    (no_configs / ".msc_config.yaml").write_text("profiles:\n  dup: {base_path: a}\n  one: {}\n")
    conf = no_configs / ".rclone.conf"
    conf.write_text("[dup]\ntype = s3\n")
    with pytest.raises(ConfigError, match="defined in both"):
        resolve_profile("one")
    conf.unlink()
    with pytest.raises(ConfigError, match=r"no MSC profile 'nope'.*Profiles defined: dup, one"):
        resolve_profile("nope")
    assert resolve_profile("_s3-mybucket").base_path == "mybucket"  # MSC's implicit profile
    assert resolve_profile(DEFAULT_PROFILE_NAME).kind == "file"


def test_config_changes_are_seen_without_restarting(no_configs: Path) -> None:
    config = no_configs / ".msc_config.yaml"
    config.write_text("profiles:\n  p: {base_path: bucketA}\n")
    assert resolve_profile("p").base_path == "bucketA"
    config.write_text("profiles:\n  p: {base_path: bucketB}\n")  # same size, same tick
    assert resolve_profile("p").base_path == "bucketB"


def test_other_protocols_use_the_same_remote_code_paths(tmp_path: Path) -> None:
    """``memory://`` (fsspec, in this process) stands for any store that is not local."""
    root = EPath("memory://epath-test/root")
    f = root / "dir" / "a.txt"
    f.write_text("héllo\nworld")
    assert f.url == "memory://epath-test/root/dir/a.txt" and not f.is_local()
    assert f.is_file() and not f.is_dir() and (root / "dir").is_dir() and f.size() == 12
    with f.open("r") as text:
        assert text.read() == "héllo\nworld"
    with f.open("rb") as raw:
        raw.seek(1)
        assert raw.read(2) == "é".encode()
    assert f.stat().content_length == 12 and f.stat().type == "file"
    (tmp_path / "up.bin").write_bytes(b"up")
    EPath(tmp_path / "up.bin").copy(root / "up.bin")
    assert [p.relative_to(root) for p in root.walk()] == ["dir/a.txt", "up.bin"]
    assert [p.name for p in root.glob("*/*.txt")] == ["a.txt"]
    (root / "up.bin").copy(EPath(tmp_path / "down.bin"))
    assert (tmp_path / "down.bin").read_bytes() == b"up"
    with pytest.raises(ValueError, match="not local"):
        f.local_path()
    for p in list(root.walk()):
        p.unlink()
    assert not f.exists() and list(root.walk()) == []
