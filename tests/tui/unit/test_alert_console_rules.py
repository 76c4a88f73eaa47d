"""The alert console's local rules, without a server: labels as typed, what a silence or snooze form refuses before
sending (the server's rules), 09:00 tomorrow in a given zone, an event's labels as the server reads them, and the
webhook form's runbook and escalation checks."""
from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from coordtui.client.models import event_labels
from coordtui.screens.silence_form import match_of, match_text, parse_labels, silence_problem
from coordtui.ops.webhooks import webhook_problem
from coordtui.screens.snooze import minutes_problem, tomorrow_morning


def test_labels_as_typed():
    assert parse_labels(" severity=warning , host = db-7 ,") == {"severity": "warning", "host": "db-7"}
    assert parse_labels("") == {}
    with pytest.raises(ValueError, match="name=value"):
        parse_labels("severity")
    assert match_of({"title": "Disk", "labels": "a=b"}) == {"title": "Disk", "labels": {"a": "b"}}
    assert match_text({"title": "Disk", "labels": {"a": "b"}}) == "title “Disk” · a=b"


@pytest.mark.parametrize("values, problem", [
    ({"title": "", "labels": "", "minutes": "60"}, "matches on a title, labels or both"),
    ({"title": "x", "labels": "oops", "minutes": "60"}, "name=value"),
    ({"title": "x", "labels": "", "minutes": "0"}, "minutes must be 1 to 43200"),
    ({"title": "x", "labels": "", "minutes": "43201"}, "minutes must be 1 to 43200"),
    ({"title": "", "labels": ",".join(f"k{n}=v" for n in range(21)), "minutes": "5"}, "At most 20 labels"),
    ({"title": "x", "labels": "", "minutes": "43200"}, None),
])
def test_what_the_silence_form_refuses(values, problem):
    found = silence_problem(values)
    assert (found is None) if problem is None else (problem in (found or "")), found


def test_snooze_minutes_and_tomorrow_morning():
    assert minutes_problem("15") is None and minutes_problem("0") and minutes_problem("1.5") and minutes_problem("")
    late = datetime(2026, 2, 17, 23, 30, tzinfo=timezone.utc)  # already the 18th in Berlin
    morning = tomorrow_morning(late, ZoneInfo("Europe/Berlin"))
    assert (morning.day, morning.hour, morning.minute) == (19, 9, 0)
    assert morning.astimezone(timezone.utc).hour == 8


def test_event_labels_as_the_server_reads_them():
    body = {"groupLabels": {"alertname": "Disk"}, "commonLabels": {"severity": "page", "n": 3, "x": None},
            "labels": {"host": "db-7"}}
    assert event_labels(body) == {"alertname": "Disk", "severity": "page", "n": "3", "host": "db-7"}
    assert event_labels("text body") == {} and event_labels(None) == {}


@pytest.mark.parametrize("values, problem", [
    ({"runbook_url": "ftp://x", "escalate_after": "", "escalate_to": ""}, "runbookUrl must be an http or https"),
    ({"runbook_url": "HTTPS://x", "escalate_after": "0", "escalate_to": "bob"}, "escalateAfterMinutes must be 1"),
    ({"runbook_url": "", "escalate_after": "10081", "escalate_to": "bob"}, "escalateAfterMinutes must be 1"),
    ({"runbook_url": "https://runbooks.example.com", "escalate_after": "15", "escalate_to": "bob"}, None),
])
def test_what_the_webhook_form_refuses(values, problem):
    found = webhook_problem(values)
    assert (found is None) if problem is None else (problem in (found or "")), found
