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
