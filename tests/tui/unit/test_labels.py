"""Labels fit and read right: tab labels fit the width they are given, counts are singular for one."""
from coordtui.unread import tab_labels

TITLES = ["Wake", "Inbox", "Chat", "Swarm", "Who", "Doctor", "Notes", "Links", "Buzz"]


def width(labels):
    return sum(len(label) + 1 for label in labels)


def test_labels_are_full_when_they_fit():
    labels = tab_labels(TITLES, [3, 2, 1] + [None] * 6, 80)
    assert labels[:3] == ["1 Wake (3)", "2 Inbox (2)", "3 Chat (1)"] and labels[3] == "4 Swarm"
    assert tab_labels(TITLES, [123, 45, 6] + [None] * 6, 120)[0] == "1 Wake (123)"


def test_badges_tighten_then_digits_lose_their_space_at_80_columns():
    two_digits = tab_labels(TITLES, [13, 12, 10] + [None] * 6, 80)
    assert two_digits[:3] == ["1 Wake(13)", "2 Inbox(12)", "3 Chat(10)"] and width(two_digits) <= 80
    big = tab_labels(TITLES, [1234, 150, 100] + [None] * 6, 80)
    assert big[:4] == ["1Wake(99+)", "2Inbox(99+)", "3Chat(99+)", "4Swarm"] and width(big) <= 80


def test_counts_are_singular_for_one():
    from coordtui.client.models import counted
    assert [counted(n, "event") for n in (0, 1, 2, 1500)] == ["0 events", "1 event", "2 events", "1,500 events"]
    assert counted(1, "entry", "entries") == "1 entry" and counted(3, "entry", "entries") == "3 entries"
