"""Project rules without HTTP: the flags and hours a direct caller (CLI, tests) passes are checked as over REST."""
from __future__ import annotations

import pytest

from coordserver.domain import projects
from coordserver.errors import Invalid
from tests.server.domain.conftest import KNOWN, who


@pytest.mark.parametrize("value", [None, "yes", 1])
async def test_blocking_mode_is_true_or_false(rules_store, value):
    made = await rules_store.write(projects.create_project, who("alice"), {"title": "Site", "color": "#336699"}, KNOWN)
    with pytest.raises(Invalid, match="blockingMode must be true or false"):
        await rules_store.write(projects.update_project, who("alice"), made["id"], {"blockingMode": value}, KNOWN)
    changed = await rules_store.write(projects.update_project, who("alice"), made["id"], {"blockingMode": True}, KNOWN)
    assert changed["blockingMode"] is True


async def test_work_hours_are_hours(rules_store):
    with pytest.raises(Invalid, match="workHoursStart must be an hour from 0 to 23"):
        await rules_store.write(projects.create_project, who("alice"),
                                {"title": "Site", "color": "#336699", "workHoursStart": 24}, KNOWN)
