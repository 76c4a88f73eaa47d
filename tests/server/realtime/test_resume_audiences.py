"""Resume (Last-Event-ID) from the id of an event of every audience kind the log holds
(events/log.py: `to=None` everyone, a list of identities, an empty audience such as a control row's
`to=()`), on SQLite and PostgreSQL: the stream replays each later event the identity is entitled to
exactly once, never the resume point's own event, then goes live.

Last-Event-ID is sent in its plain integer form (v1's, which stays valid), and frames are told apart by
their data, not by the form of their ids. "Nothing more" is shown by a marker sent after everything
else: the frames before it are exactly the expected ones (no fixed sleep)."""
from __future__ import annotations

import pytest

from tests.conftest import backend_server
from tests.sse_helpers import emit, open_stream

KINDS = {  # audience kind -> the `to` of event_log.append
    "broadcast": None,
    "bob only": ["bob"],
    "several, bob among them": ["alice", "bob", "carol"],
    "others only": ["carol"],
    "nobody (empty audience)": [],
    "control row": (),
}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def srv(request, tmp_path_factory):
    with backend_server(request, tmp_path_factory) as server:
        yield server


def _event(n: int, kind: str) -> tuple[str, dict, list[str] | tuple | None]:
    if kind == "control row":  # a revocation of a token no one holds: the hub reads it and does nothing
        return "token_revoked", {"tokenIds": [10**9 + n], "identity": "nobody", "reason": "revoked",
                                 "wholeIdentity": False, "n": n}, ()
    return "probe", {"type": "probe", "n": n, "kind": kind}, KINDS[kind]


def _bob_hears(kind: str) -> bool:
    return kind in ("broadcast", "bob only", "several, bob among them")


async def _replayed_until_marker(srv, last_event_id: int, marker: int) -> list[int]:
    """The `n` of every logged frame a stream resumed from `last_event_id` shows before the live marker."""
    async with open_stream(srv, "bob", last_event_id=last_event_id) as bob:
        emit(srv, "probe", {"type": "probe", "n": marker, "kind": "marker"}, ["bob"])
        seen = []
        while True:
            frame = await bob.logged()
            seen.append(frame.data["n"])
            if frame.data["n"] == marker:
                return seen[:-1]


@pytest.mark.parametrize("kind", list(KINDS))
async def test_resume_from_each_audience_kind_replays_each_later_event_once(srv, kind):
    """Log an event of `kind`, then one of every kind; resume from the first one's id."""
    base = 100 * list(KINDS).index(kind)
    resume_id = emit(srv, *_event(base, kind))
    later = [(base + 1 + i, k) for i, k in enumerate(KINDS)]
    for n, k in later:
        emit(srv, *_event(n, k))
    expected = [n for n, k in later if _bob_hears(k)]
    assert await _replayed_until_marker(srv, resume_id, base + 99) == expected
