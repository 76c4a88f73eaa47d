"""A JavaScript Yjs editor (node, the yjs, y-protocols and ws packages) for interop tests: the documented
JSON frames spoken by the real Yjs library, driven line by line (js/notebook_peer.js)."""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

import pytest

NODE_PACKAGES = ("yjs", "y-protocols", "ws")
JS_DIR = Path(__file__).parent / "js"


def yjs_modules() -> str | None:
    """node_modules holding the NODE_PACKAGES (COORD_YJS_NODE_PATH, or /tmp/coord-yjs, installed there once)."""
    if shutil.which("node") is None:
        return None
    path = Path(os.environ.get("COORD_YJS_NODE_PATH") or "/tmp/coord-yjs/node_modules")
    missing = [name for name in NODE_PACKAGES if not (path / name).exists()]
    if missing and shutil.which("npm") and not os.environ.get("COORD_YJS_NODE_PATH"):
        try:
            subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(path.parent), *NODE_PACKAGES],
                           capture_output=True, timeout=90)
        except (OSError, subprocess.SubprocessError):
            return None
    return str(path) if all((path / name).exists() for name in NODE_PACKAGES) else None


def require_yjs_modules() -> str:
    modules = yjs_modules()
    if modules is None:
        pytest.fail("node with the yjs, y-protocols and ws packages is not available: apt-get install nodejs npm "
                    "(bash .ci/run does)")
    return modules


class JsEditor:
    """One node process editing a page: `state` is its latest report {"synced", "text", "others"}."""

    def __init__(self, process: asyncio.subprocess.Process):
        self.process = process
        self.state: dict[str, Any] = {"synced": False, "text": "", "others": {}}
        self._reader = asyncio.ensure_future(self._read())

    @classmethod
    async def start(cls, ws_url: str) -> "JsEditor":
        process = await asyncio.create_subprocess_exec(
            "node", str(JS_DIR / "notebook_peer.js"), ws_url, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "NODE_PATH": require_yjs_modules()})
        editor = cls(process)
        await editor.until(lambda s: s["synced"])
        return editor

    async def _read(self) -> None:
        assert self.process.stdout is not None
        async for line in self.process.stdout:
            self.state = json.loads(line)

    @property
    def text(self) -> str:
        return str(self.state["text"])

    @property
    def others(self) -> list[dict[str, Any]]:
        return list(self.state["others"].values())

    async def send(self, command: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write((json.dumps(command) + "\n").encode())
        await self.process.stdin.drain()

    async def until(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate(self.state):
            if self.process.returncode is not None or time.monotonic() > deadline:
                stderr = await self.process.stderr.read() if self.process.stderr and self.process.returncode is not None else b""
                raise AssertionError(f"JS editor: condition not reached; last state {self.state} {stderr.decode()}")
            await asyncio.sleep(0.02)

    async def leave(self) -> None:
        await self.send({"leave": True})
        await asyncio.wait_for(self.process.wait(), 10)
        await asyncio.gather(self._reader, return_exceptions=True)

    async def kill(self) -> None:
        """Gone without a word (a crash, a lost network): the server must say it for this editor."""
        if self.process.returncode is None:
            self.process.kill()
        await self.process.wait()
        await asyncio.gather(self._reader, return_exceptions=True)
