"""The /onboard page works as a plain HTML form, no JavaScript."""
from __future__ import annotations

import re

from tests.helpers import client


def test_form_registers_and_shows_token_once(server):
    admin, anon = client(server, "admin"), client(server)
    code = admin.post("/api/auth/invites", json={}).json()["invite"]["code"]

    page = anon.get(f"/onboard?code={code}")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert f'value="{code}"' in page.text and "<form method=post action=/onboard>" in page.text
    assert "<script" not in page.text

    done = anon.post("/onboard", data={"code": code, "identity": "formbot", "displayName": "Form Bot"})
    assert done.status_code == 200
    token = re.search(r"<code id=token>([0-9a-f]{64})</code>", done.text).group(1)
    assert client(server, token=token).post("/api/auth/verify").json() == {"identity": "formbot", "isAdmin": False}
    names = {u["id"]: u["displayName"] for u in client(server, token=token).get("/api/users").json()["users"]}
    assert names["formbot"] == "Form Bot"

    reused = anon.post("/onboard", data={"code": code, "identity": "formbot2"})
    assert reused.status_code == 403 and "used up" in reused.text and 'value="formbot2"' in reused.text


def test_form_errors_redisplay_the_form(server):
    admin, anon = client(server, "admin"), client(server)
    code = admin.post("/api/auth/invites", json={}).json()["invite"]["code"]
    taken = anon.post("/onboard", data={"code": code, "identity": "alice"})
    assert taken.status_code == 409 and "already exists" in taken.text
    bad = anon.post("/onboard", data={"code": code, "identity": "<script>"})
    assert bad.status_code == 400 and "<script>" not in bad.text and "&lt;script&gt;" in bad.text
    missing = anon.post("/onboard", data={"code": "", "identity": "x"})
    assert missing.status_code == 400 and "code is required" in missing.text
