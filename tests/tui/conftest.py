from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def isolated_config(tmp_path, monkeypatch):
    """Profiles and kept alerts go to a temporary directory; the environment's COORD_URL/COORD_TOKEN are ignored."""
    monkeypatch.setenv("COORD_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("COORD_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("COORD_URL", raising=False)
    monkeypatch.delenv("COORD_TOKEN", raising=False)
    return tmp_path / "config"


@pytest.fixture
def opened(monkeypatch) -> list[str]:
    """The addresses the app opened in a browser (there is one, for the test; page_links.browser_available)."""
    from textual.app import App

    from coordtui.screens import page_links
    urls: list[str] = []
    monkeypatch.setattr(App, "open_url", lambda self, url, new_tab=True: urls.append(url))
    monkeypatch.setattr(page_links, "browser_available", lambda: True)
    return urls


@pytest.fixture(autouse=True)
def pilot_waits_end_with_the_app(monkeypatch):
    """Pilot waits for the app's animations after every key it presses. An app whose task has ended completes none
    of them: twice in one CI run a press of ctrl+q waited so until pytest-timeout, run_test's task for the app gone
    and its widgets' pumps still open, and what ended it (run_test raises it on leaving) was never seen. The wait
    now ends when the app's task has ended or the app failed, so such a test fails with the app's own error."""
    import asyncio

    from textual._animator import Animator

    async def wait_until_complete(self) -> None:
        app = self.app
        while not self._complete_event.is_set():
            ended = app._task is not None and app._task.done()  # run_test's task for the app
            if ended or app._exception is not None:
                return  # run_test raises what ended it when the test leaves it
            completed = asyncio.ensure_future(self._complete_event.wait())
            try:
                await asyncio.wait({completed}, timeout=0.25)
            finally:
                completed.cancel()
    monkeypatch.setattr(Animator, "wait_until_complete", wait_until_complete)
