"""The example FastAPI service (examples/service/app.py) as a uvicorn subprocess, for tests and benchmarks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from servers import free_port, terminate

REPO = Path(__file__).resolve().parent.parent
START_TIMEOUT = 60.0


class ServiceProcess:
    """``uvicorn examples.service.app:app`` on a free 127.0.0.1 port.

    Parameters
    ----------
    datasets : dict
        ``AZARR_DATASETS``: name -> ``{"url", "storage_options", "path"}``.
    config : dict, optional
        ``AZARR_CONFIG``: `azarr.config.set` settings for the service process.
    deadline : float
        ``AZARR_DEADLINE``: seconds per request before a 504.
    max_bytes : int, optional
        ``AZARR_MAX_BYTES``: bytes of a streamed result the service holds at once.
    env : dict, optional
        More environment variables (``AZARR_RESPONSE_BUDGET``, ``AZARR_SEND_TIMEOUT``,
        ``AZARR_CLIENT_REQUESTS``...).
    """

    def __init__(
        self,
        datasets: dict[str, Any],
        *,
        config: dict[str, Any] | None = None,
        deadline: float = 30.0,
        max_bytes: int | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        extra, env = env or {}, dict(os.environ)
        env.update(
            AZARR_DATASETS=json.dumps(datasets),
            AZARR_CONFIG=json.dumps(config or {}),
            AZARR_DEADLINE=str(deadline),
            AWS_EC2_METADATA_DISABLED="true",
        )
        if max_bytes is not None:
            env["AZARR_MAX_BYTES"] = str(max_bytes)
        env.update(extra)
        fd, log = tempfile.mkstemp(prefix="azarr-service-", suffix=".log")
        self.log_path = Path(log)
        argv = [
            sys.executable,
            "-m",
            "uvicorn",
            "examples.service.app:app",
            "--app-dir",
            str(REPO),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--no-access-log",
            "--log-level",
            "warning",
        ]
        with os.fdopen(fd, "wb") as out:
            self.proc = subprocess.Popen(
                argv, cwd=REPO, env=env, stdout=out, stderr=out, start_new_session=True
            )
        deadline_at = time.monotonic() + START_TIMEOUT
        while True:
            try:
                self.health()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline_at:
                    self.stop()
                    raise RuntimeError(f"service did not start:\n{self.log_tail()}") from None
                time.sleep(0.1)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def health(self, *, reset: bool = False) -> dict[str, Any]:
        """The service's ``/health`` counters (requests in flight, cancelled, loop tasks, the
        longest event-loop stall; ``reset`` starts a new stall measurement)."""
        query = "?reset=true" if reset else ""
        with urllib.request.urlopen(self.url + "/health" + query, timeout=5) as response:
            result: dict[str, Any] = json.loads(response.read())
            return result

    def rss(self) -> int:
        """Resident set size of the service process in bytes."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS")

    def log_tail(self, nbytes: int = 4000) -> str:
        return self.log_path.read_bytes()[-nbytes:].decode("utf-8", "replace")

    def stop(self) -> None:
        terminate(self.proc, 10.0)
        self.log_path.unlink(missing_ok=True)
