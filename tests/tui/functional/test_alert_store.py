"""The client's alert store on its own: what it keeps, what it saves, what it survives."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from coordtui.alerts import AlertStore, store_path
from coordtui.client.models import Wake, WakeItem

NOW = datetime(2026, 11, 23, 9, 0, tzinfo=timezone.utc)


def alert(n: int, summary: str = "Disk full") -> WakeItem:
    return WakeItem("buzz", n, f"{summary} {n}", "look", "high", "0m", app_name="pager", ephemeral=True)


def wake(*items: WakeItem) -> Wake:
    return Wake(list(items), None, None, None)


def test_keeps_only_one_shot_items_once():
    store = AlertStore()
    mail = WakeItem("message", 7, "From bob", "read it", "normal", "1m")
    assert store.absorb(wake(alert(1), mail), NOW)
    assert not store.absorb(wake(alert(1)), NOW + timedelta(minutes=5)), "the same alert twice is not new"
    assert [a.item.key for a in store.alerts()] == ["buzz:1"]
    assert store.alerts()[0].shown(NOW + timedelta(hours=2, minutes=15)).age == "2h 15m"
    store.absorb(wake(WakeItem("buzz", 9, "Old", "look", "high", "1d 4h", ephemeral=True)), NOW)
    assert store.alerts()[1].shown(NOW + timedelta(minutes=30)).age == "1d 4h", "ages run on from the server's"


def test_a_dismissed_alert_is_never_kept_again():
    """The server delivers a Buzz item once: met again, it is an answer from before the dismissal."""
    store = AlertStore()
    store.absorb(wake(alert(1), alert(2)), NOW)
    assert store.dismiss("buzz:1")
    assert store.without_dismissed(wake(alert(1), alert(2))).items == [alert(2)]
    assert not store.absorb(wake(alert(1)), NOW + timedelta(seconds=1))
    assert [a.item.key for a in store.alerts()] == ["buzz:2"]
    assert not store.dismiss("buzz:7"), "a key dismissed before it was kept"
    assert store.without_dismissed(wake(alert(7))).items == []
    assert not store.absorb(wake(alert(7)), NOW)


def test_saved_alerts_survive_a_new_store_and_dismissal_is_saved(tmp_path):
    path = tmp_path / "alerts.json"
    first = AlertStore(path)
    first.absorb(wake(alert(1, "Disk fülle ✓"), alert(2)), NOW)
    first.dismiss("buzz:2")
    second = AlertStore()
    second.attach(path)
    assert [(a.item.key, a.item.summary, a.since) for a in second.alerts()] == [
        ("buzz:1", "Disk fülle ✓ 1", NOW)]
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_alerts_that_arrive_before_the_identity_is_known_join_the_saved_ones(tmp_path):
    path = tmp_path / "alerts.json"
    AlertStore(path).absorb(wake(alert(1)), NOW)
    store = AlertStore()
    store.absorb(wake(alert(2)), NOW + timedelta(minutes=1))
    store.attach(path)
    assert [a.item.key for a in store.alerts()] == ["buzz:1", "buzz:2"]
    reread = AlertStore()
    reread.attach(path)
    assert len(reread) == 2


def test_an_unreadable_file_is_ignored_not_fatal(tmp_path):
    path = tmp_path / "alerts.json"
    path.write_text("{not json")
    store = AlertStore()
    store.attach(path)
    assert len(store) == 0
    path.write_text('[{"item": {"source": "buzz"}}, 5, {"item": {"source": "buzz", "id": 3, "summary": "s",'
                    ' "action": "a", "priority": "high", "age": "0m", "ephemeral": true, "future": 1},'
                    ' "since": "2026-11-23T09:00:00"}]')
    store.attach(path)
    assert [a.item.key for a in store.alerts()] == ["buzz:3"]


def test_one_file_per_server_and_identity(tmp_path, monkeypatch):
    monkeypatch.setenv("COORD_STATE_DIR", str(tmp_path))
    paths = {store_path("http://a", "bob"), store_path("http://a/", "bob"), store_path("http://a", "carol"),
             store_path("http://b", "bob")}
    assert len(paths) == 3 and all(p.parent == tmp_path for p in paths)


def test_alerts_saved_with_raw_control_characters_come_back_neutralised(tmp_path):
    """Issue 31: a file written by a coordtui that kept the server's text raw must not drive the terminal."""
    path = tmp_path / "alerts.json"
    path.write_text(json.dumps([{"item": {"source": "buzz", "id": 1, "summary": "x\x1b]0;PWNED\x07\x9b\u202e",
                                          "action": "look", "priority": "high", "age": "0m", "ephemeral": True},
                                 "since": NOW.isoformat()}]), encoding="utf-8")
    store = AlertStore()
    store.attach(path)
    assert [a.item.summary for a in store.alerts()] == ["x␛]0;PWNED␇\ufffd\ufffd"]
