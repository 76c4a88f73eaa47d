"""Several Stores in one process (tests run two servers side by side) each keep their own database."""
from __future__ import annotations

from coordserver import db
from coordserver.db import Store
from coordserver.models import User
from coordserver.timeutil import to_db


def add_user(name: str) -> None:
    now = to_db(db.now())
    User.create(id=name, display_name=name, created_at=now, updated_at=now)


def user_ids() -> list[str]:
    return [u.id for u in User.select().order_by(User.id)]


async def test_two_stores_in_one_process_write_and_read_their_own_files(tmp_path):
    first, second = Store(f"sqlite:///{tmp_path / 'a.db'}"), Store(f"sqlite:///{tmp_path / 'b.db'}")
    first.open()
    second.open()  # initialised last: threads that bound nothing would now see this one
    try:
        await first.write(add_user, "ann")
        await second.write(add_user, "ben")
        await first.write(add_user, "amy")
        assert await first.read(user_ids) == ["amy", "ann"]
        assert await second.read(user_ids) == ["ben"]
        assert first.run_sync(user_ids) == ["amy", "ann"]
    finally:
        first.close()
        second.close()
