"""An S3 protocol server on loopback for the suite's own tests: moto's, in this process.

``moto.server.ThreadedMotoServer`` serves the S3 API from a thread (moto's docs, "Server
mode"); it binds 127.0.0.1 on port 0, so the kernel picks a free port and no other test can
race for it, and its state is shared by every process that talks to it over HTTP (the rank
processes included). The start is bounded (``START_S``); the server is always stopped.

Nothing leaves loopback: the credentials are fake and given as storage options (so botocore
asks no credential provider), the instance metadata service is disabled, the AWS config files
are empty and proxies are unset in the environment handed to subprocesses.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

START_S = 30.0
"""The longest the server may take to bind and serve (it takes milliseconds)."""

BUCKET = "ckptgate-test"

LOOPBACK_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "NO_PROXY": "127.0.0.1",
}
"""Environment for a process that talks to the server (proxies are removed separately)."""

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy")


@dataclass(frozen=True)
class S3Server:
    """A running server and how to reach it."""

    endpoint_url: str
    bucket: str

    @property
    def storage_options(self) -> dict[str, Any]:
        """What s3fs needs (``S3FileSystem(key=, secret=, endpoint_url=, client_kwargs=)``)."""
        return {
            "key": "testing",
            "secret": "testing",
            "endpoint_url": self.endpoint_url,
            "client_kwargs": {"region_name": "us-east-1"},
        }

    def option_args(self) -> list[str]:
        """The same as ``--storage-option`` arguments (typed: the JSON object stays one)."""
        return [
            "--storage-option=key=testing",
            "--storage-option=secret=testing",
            f"--storage-option=endpoint_url={self.endpoint_url}",
            '--storage-option=client_kwargs={"region_name": "us-east-1"}',
        ]

    def env(self) -> dict[str, str]:
        """``os.environ`` for a subprocess: loopback only (see the module docstring)."""
        env = {k: v for k, v in os.environ.items() if k not in PROXY_VARIABLES}
        return {**env, **LOOPBACK_ENV}

    def make_bucket(self) -> None:
        """The bucket, in the default region (s3fs's mkdir sends the client's region as a
        LocationConstraint, which us-east-1 must not have; without it botocore signs for
        us-east-1)."""
        import s3fs

        options = {k: v for k, v in self.storage_options.items() if k != "client_kwargs"}
        s3fs.S3FileSystem(skip_instance_cache=True, **options).mkdir(self.bucket)

    def filesystem(self) -> Any:
        import s3fs

        return s3fs.S3FileSystem(skip_instance_cache=True, **self.storage_options)


@contextlib.contextmanager
def s3_server() -> Iterator[S3Server]:
    """Start moto's S3 server on 127.0.0.1, make the test bucket, yield; always stop it."""
    moto_server = pytest.importorskip("moto.server", reason="needs moto[server] (dev extra)")
    pytest.importorskip("s3fs", reason="needs s3fs (dev extra)")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    starter = threading.Thread(target=server.start, name="moto-start", daemon=True)
    starter.start()
    starter.join(START_S)
    if starter.is_alive():  # start() waits unbounded for a server that failed to bind
        raise RuntimeError(f"moto's S3 server did not start within {START_S:g} s")
    try:
        host, port = server.get_host_and_port()
        assert host == "127.0.0.1", host
        running = S3Server(f"http://{host}:{port}", BUCKET)
        running.make_bucket()
        yield running
    finally:
        server.stop()
