"""Onboarding, tokens and webhook config over real HTTP."""
from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from coordserver.domain import identities
from coordserver.timeutil import FrozenClock
from tests.helpers import async_client, client, eventually


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def make_invite(admin, **body) -> dict:
    response = admin.post("/api/auth/invites", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def test_onboarding_end_to_end(server):
    admin, anon = client(server, "admin"), client(server)
    assert admin.post("/api/auth/verify").json() == {"identity": "admin", "isAdmin": True}

    created = make_invite(admin, identityHint="newbot")
    invite = created["invite"]
    assert len(invite["code"]) == 48 and invite["maxUses"] == 1 and invite["useCount"] == 0
    assert created["onboardUrl"] == f"http://coord.test/onboard?code={invite['code']}"

    registered = anon.post("/api/auth/register", json={"code": invite["code"], "identity": "newbot"})
    assert registered.status_code == 200, registered.text
    body = registered.json()
    assert body["identity"] == "newbot" and body["isAdmin"] is False and len(body["token"]) == 64
    assert "only once" in body["message"]

    verified = anon.post("/api/auth/verify", headers=bearer(body["token"]))
    assert verified.json() == {"identity": "newbot", "isAdmin": False}

    again = anon.post("/api/auth/register", json={"code": invite["code"], "identity": "newbot"})
    assert again.status_code == 403 and "used up" in again.json()["error"]
    listed = admin.get("/api/auth/invites").json()["invites"]
    assert next(i for i in listed if i["id"] == invite["id"])["useCount"] == 1
    # ours: each listed invite carries its onboarding URL, to hand it out again
    assert next(i for i in listed if i["id"] == invite["id"])["onboardUrl"] == created["onboardUrl"]
    users = client(server, token=body["token"]).get("/api/users").json()["users"]
    assert any(u["id"] == "newbot" for u in users)


def test_invite_use_count_and_hint(server):
    admin, anon = client(server, "admin"), client(server)
    invite = make_invite(admin, maxUses=2)["invite"]
    for name in ("multi1", "multi2"):
        assert anon.post("/api/auth/register", json={"code": invite["code"], "identity": name}).status_code == 200
    third = anon.post("/api/auth/register", json={"code": invite["code"], "identity": "multi3"})
    assert third.status_code == 403

    hinted = make_invite(admin, identityHint="onlyme")["invite"]
    wrong = anon.post("/api/auth/register", json={"code": hinted["code"], "identity": "someoneelse"})
    assert wrong.status_code == 400 and "onlyme" in wrong.json()["error"]


def test_register_refuses_existing_identity_and_bad_input(server):
    admin, anon = client(server, "admin"), client(server)
    invite = make_invite(admin, maxUses=5)["invite"]
    for existing in ("alice", "admin"):
        response = anon.post("/api/auth/register", json={"code": invite["code"], "identity": existing})
        assert response.status_code == 409, response.text
    assert anon.post("/api/auth/register", json={"identity": "x1"}).status_code == 400
    assert anon.post("/api/auth/register", json={"code": invite["code"]}).status_code == 400
    bad = anon.post("/api/auth/register", json={"code": invite["code"], "identity": "Bad Name!"})
    assert bad.status_code == 400 and "identity" in bad.json()["error"]
    unknown = anon.post("/api/auth/register", json={"code": "nope", "identity": "fresh"})
    assert unknown.status_code == 403
    # refused attempts did not consume the invite
    assert next(i for i in admin.get("/api/auth/invites").json()["invites"] if i["id"] == invite["id"])["useCount"] == 0


def test_expired_invite_and_token(make_server):
    clock = FrozenClock()
    srv = make_server(clock=clock)
    admin, anon = client(srv, "admin"), client(srv)
    invite = make_invite(admin, expiresInHours=1)["invite"]
    clock.advance(hours=2)
    expired = anon.post("/api/auth/register", json={"code": invite["code"], "identity": "late"})
    assert expired.status_code == 403 and "expired" in expired.json()["error"]

    token, plaintext = srv.call(lambda: srv.coord.store.write(
        identities.issue_token, "temp", False, "short-lived", "admin", clock.now() + timedelta(minutes=10)))
    assert anon.post("/api/auth/verify", headers=bearer(plaintext)).status_code == 200
    clock.advance(minutes=11)
    srv.coord.services.tokens.invalidate()
    refused = anon.post("/api/auth/verify", headers=bearer(plaintext))
    assert refused.status_code == 401 and refused.json() == {"error": "Invalid key"}


def refused(request) -> bool:
    """`request()` answers 401, waiting for it: the other workers' token caches drop a revoked token when
    its NOTIFY arrives (milliseconds; COORD_TEST_WORKERS), the answering process's at once."""
    return eventually(lambda: request().status_code, lambda status: status == 401) == 401


def test_revoke_rotate_and_token_list(server):
    admin, anon = client(server, "admin"), client(server)
    invite = make_invite(admin)["invite"]
    token = anon.post("/api/auth/register", json={"code": invite["code"], "identity": "rotor"}).json()["token"]
    record = next(t for t in admin.get("/api/auth/tokens").json()["tokens"] if t["identity"] == "rotor")
    assert "token" not in record and record["label"] == "Onboarded via invite"
    assert record["lastUsedAt"] is None or record["lastUsedAt"].endswith("Z")

    rotated = client(server, token=token).post(f"/api/auth/tokens/{record['id']}/rotate")
    assert rotated.status_code == 200, rotated.text
    new = rotated.json()
    assert new["previousTokenId"] == record["id"] and new["newToken"]["identity"] == "rotor"
    assert refused(lambda: anon.post("/api/auth/verify", headers=bearer(token)))
    assert anon.post("/api/auth/verify", headers=bearer(new["newToken"]["token"])).json()["identity"] == "rotor"
    assert refused(lambda: client(server, token=token).post(f"/api/auth/tokens/{record['id']}/rotate"))
    assert admin.post(f"/api/auth/tokens/{record['id']}/rotate").status_code == 400  # already revoked

    revoked = admin.post(f"/api/auth/tokens/{new['newToken']['id']}/revoke")
    assert revoked.status_code == 200 and revoked.json()["revokedAt"] is not None
    assert refused(lambda: anon.post("/api/auth/verify", headers=bearer(new["newToken"]["token"])))
    assert admin.post("/api/auth/tokens/999999/revoke").status_code == 404
    assert client(server, "bob").get("/api/auth/tokens").status_code == 403


def test_someone_else_cannot_rotate(server):
    admin, anon = client(server, "admin"), client(server)
    invite = make_invite(admin)["invite"]
    anon.post("/api/auth/register", json={"code": invite["code"], "identity": "victim"})
    record = next(t for t in admin.get("/api/auth/tokens").json()["tokens"] if t["identity"] == "victim")
    assert client(server, "bob").post(f"/api/auth/tokens/{record['id']}/rotate").status_code == 403


def test_database_token_wins_over_environment(make_server, tmp_path):
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    first = make_server(database_url=url)
    _, plaintext = first.call(lambda: first.coord.store.write(identities.issue_token, "dbident", False, None, "t"))
    first.stop()
    second = make_server(database_url=url, env={"SERVICE_TOKEN_ENVIDENT": plaintext})
    assert client(second, token=plaintext).post("/api/auth/verify").json()["identity"] == "dbident"
    assert client(second, "bob").post("/api/auth/verify").json() == {"identity": "bob", "isAdmin": False}


def test_missing_and_unknown_tokens(server):
    anon = client(server)
    missing = anon.get("/api/users")
    assert missing.status_code == 401 and "error" in missing.json()
    assert anon.post("/api/auth/verify", headers=bearer("nope")).json() == {"error": "Invalid key"}
    assert client(server, "alice").post("/api/auth/invites", json={}).status_code == 403


def test_token_patch_backup_agent(server):
    admin = client(server, "admin")
    invite = make_invite(admin)["invite"]
    client(server).post("/api/auth/register", json={"code": invite["code"], "identity": "primary"})
    record = next(t for t in admin.get("/api/auth/tokens").json()["tokens"] if t["identity"] == "primary")
    patched = admin.patch(f"/api/auth/tokens/{record['id']}", json={"backupAgent": "bob", "staleTriggerHours": 6})
    assert patched.status_code == 200 and patched.json()["backupAgent"] == "bob"
    assert patched.json()["staleTriggerHours"] == 6
    assert admin.patch(f"/api/auth/tokens/{record['id']}", json={"backupAgent": "ghost"}).status_code == 400
    assert admin.patch(f"/api/auth/tokens/{record['id']}", json={"staleTriggerHours": 0}).status_code == 400
    assert admin.patch("/api/auth/tokens/424242", json={"label": "x"}).status_code == 404
    assert client(server, "bob").patch(f"/api/auth/tokens/{record['id']}", json={"label": "x"}).status_code == 403
    stored = next(t for t in admin.get("/api/auth/tokens").json()["tokens"] if t["id"] == record["id"])
    assert stored == patched.json()  # the refused PATCHes changed nothing


def test_webhook_config(make_server):
    srv = make_server(env={"SERVICE_WEBHOOK_ALLOWED_HOSTS": "hooks.internal"})
    bob = client(srv, "bob")
    assert bob.get("/api/auth/webhook").json()["configured"] is False
    for refused in ("http://127.0.0.1/x", "http://10.1.2.3/x", "http://localhost:8080/", "ftp://example.com/",
                    "http://[::1]/", "http://169.254.169.254/latest", "http://svc.internal/x"):
        response = bob.post("/api/auth/webhook", json={"url": refused})
        assert response.status_code == 400, refused
        assert response.json()["error"]
    allowed = bob.post("/api/auth/webhook", json={"url": "http://hooks.internal/agent"})
    assert allowed.status_code == 200 and len(allowed.json()["webhookToken"]) == 64
    registered = bob.post("/api/auth/webhook", json={"url": "https://gw.example.net/hooks/agent"}).json()
    assert registered == {"ok": True, "identity": "bob", "webhookUrl": "https://gw.example.net/hooks/agent",
                          "message": "Webhook registered"}
    state = bob.get("/api/auth/webhook").json()
    assert state["configured"] and state["deliveries"]["pending"] == 0
    # bob's token is an environment one: not listed (tests/server/api/test_webhook_secrets.py lists
    # database tokens that have webhook secrets and holds the masking)
    assert client(srv, "admin").get("/api/auth/tokens").json()["tokens"] == []
    cleared = bob.post("/api/auth/webhook", json={"url": None}).json()
    assert cleared["webhookUrl"] is None and cleared["message"] == "Webhook cleared"


@pytest.mark.parametrize("path", ["/api/users", "/api/auth/webhook"])
def test_presence_side_effect_sets_last_seen(server, path):
    client(server, "carol").get(path)

    def carol_seen():
        return next(u for u in client(server, "alice").get("/api/users").json()["users"] if u["id"] == "carol")
    assert eventually(carol_seen, lambda carol: carol["lastSeenAt"] is not None)["lastSeenAt"] is not None


def test_concurrent_changes_to_one_token_or_webhook_never_undo_each_other(make_server, database_url):
    """PostgreSQL runs writes on several threads. A label PATCH racing a revoke must not bring the
    token back (a lost update would write the old revokedAt over the new one); PATCHes of different
    fields of one Buzz webhook must all stick; two first webhook registrations must not collide."""
    srv = make_server(database_url=database_url)

    async def race():
        async with async_client(srv, "admin") as admin:
            tokens = []
            for i in range(12):
                invite = (await admin.post("/api/auth/invites", json={})).json()["invite"]
                registered = await admin.post("/api/auth/register", json={"code": invite["code"], "identity": f"racer{i}"})
                tokens.append(registered.json()["token"])
            records = {t["identity"]: t["id"] for t in (await admin.get("/api/auth/tokens")).json()["tokens"]}
            calls = []
            for i in range(12):
                token_id = records[f"racer{i}"]
                calls += [admin.patch(f"/api/auth/tokens/{token_id}", json={"label": f"label {n}"}) for n in range(4)]
                calls.insert(len(calls) - 2, admin.post(f"/api/auth/tokens/{token_id}/revoke"))
            assert {r.status_code for r in await asyncio.gather(*calls)} == {200}
            for token in tokens:
                assert (await admin.post("/api/auth/verify", headers=bearer(token))).status_code == 401

            hooks = [(await admin.post("/api/broadcast/webhooks", json={"appName": f"h{i}", "title": "t"})).json()
                     for i in range(12)]
            changes = [{"title": "renamed"}, {"enabled": False}, {"forUsers": "alice"}, {"appName": "moved"}]
            await asyncio.gather(*(admin.patch(f"/api/broadcast/webhooks/{hook['id']}", json=change)
                                   for hook in hooks for change in changes))
            for row in (await admin.get("/api/broadcast/webhooks")).json()["webhooks"]:
                if row["id"] in {hook["id"] for hook in hooks}:
                    assert (row["title"], row["enabled"], row["forUsers"], row["appName"]) == \
                        ("renamed", False, "alice", "moved")

        async with async_client(srv, "carol") as carol:
            first = await asyncio.gather(*(carol.post("/api/auth/webhook", json={"url": "https://hooks.example.com/c"})
                                          for _ in range(6)))
            assert {r.status_code for r in first} == {200}
    asyncio.run(race())
