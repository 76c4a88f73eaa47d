"""`coordtui --serve`: the bundled server, in-process on a loopback port (the real Hypercorn, as `coordserver serve`)."""
from __future__ import annotations

import os
import socket
from pathlib import Path

from coordserver.server import ServerThread
from coordserver.settings import Settings

from .config import TOKEN_FILE, default_data_dir

LOCAL_ADMIN = "admin"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])




class EmbeddedServer:
    """Starts the server on 127.0.0.1:<free port> with data in `data_dir`, and a local admin token kept in a 0600 file."""

    def __init__(self, data_dir: Path | str | None = None, port: int = 0, env: dict[str, str] | None = None):
        self.data_dir = Path(data_dir) if data_dir else default_data_dir()
        self.port = port
        self.env = env
        self.thread: ServerThread | None = None
        self.token: str | None = None

    @property
    def database_url(self) -> str:
        return f"sqlite:///{self.data_dir / 'coord.db'}"

    @property
    def url(self) -> str:
        assert self.thread is not None, "server not started"
        return self.thread.url

    def start(self) -> "EmbeddedServer":
        self.data_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ if self.env is None else self.env)
        env.update({"COORD_DATABASE_URL": self.database_url, "COORD_RATE_LIMITS": "off"})
        port = self.port = self.port or _free_port()
        env["COORD_BASE_URL"] = f"http://127.0.0.1:{port}"  # links in wake and skill docs point here
        self.thread = ServerThread(Settings.from_env(env), port=port).start()
        self.token = self._local_admin_token()
        return self

    def _local_admin_token(self) -> str:
        path = self.data_dir / TOKEN_FILE
        if path.exists():
            token = path.read_text(encoding="utf-8").strip()
            if token and self._token_valid(token):
                return token
        from coordserver.domain import identities
        thread = self._running()
        store = thread.coord.store
        issued: tuple[object, str] = thread.call(lambda: store.write(
            identities.issue_token, LOCAL_ADMIN, True, "coordtui --serve local admin", "coordtui"))
        plaintext = issued[1]
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(plaintext + "\n")
        os.chmod(path, 0o600)
        return plaintext

    def _token_valid(self, token: str) -> bool:
        import httpx

        from .client.api import tls_for
        try:
            url = self._running().url
            response = httpx.post(f"{url}/api/auth/verify", headers={"Authorization": f"Bearer {token}"},
                                  timeout=10, verify=tls_for(url))
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    def _running(self) -> ServerThread:
        if self.thread is None:
            raise RuntimeError("server not started")
        return self.thread

    def stop(self) -> None:
        if self.thread is not None:
            self.thread.stop()
            self.thread = None

    def __enter__(self) -> "EmbeddedServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
