"""The collaborative TextArea against a second pycrdt peer (updates exchanged as on the wire)."""
from __future__ import annotations

from pycrdt import Doc, Text
from textual.app import App, ComposeResult

from coordtui.panes.collab import CollabTextArea


class Peer:
    def __init__(self):
        self.doc = Doc()
        self.text = Text()
        self.doc["content"] = self.text


def sync(source: Peer, target: Peer) -> None:
    target.doc.apply_update(source.doc.get_update(target.doc.get_state()))


class EditorApp(App):
    def __init__(self, peer: Peer):
        super().__init__()
        self.peer = peer

    def compose(self) -> ComposeResult:
        yield CollabTextArea("", id="editor")

    def on_mount(self) -> None:
        editor = self.query_one(CollabTextArea)
        editor.cursor_blink = False
        editor.bind(self.peer.text)
        editor.focus()


async def test_remote_edits_keep_the_cursor_and_local_typing_reaches_the_peer():
    mine, theirs = Peer(), Peer()
    with theirs.doc.transaction():
        theirs.text += "Grüße 🎉 und\nzweite Zeile"
    sync(theirs, mine)
    app = EditorApp(mine)
    async with app.run_test(size=(60, 10)) as pilot:
        editor = app.query_one(CollabTextArea)
        assert editor.text == "Grüße 🎉 und\nzweite Zeile"
        editor.move_cursor((1, 7))  # after "zweite "
        await pilot.press("é", "ß")
        assert editor.text == "Grüße 🎉 und\nzweite éßZeile"
        sync(mine, theirs)
        assert str(theirs.text) == "Grüße 🎉 und\nzweite éßZeile"

        # a remote insert before the cursor (multi-byte text before it) shifts the cursor with its text
        with theirs.doc.transaction():
            theirs.text.insert(len("Grüße ".encode()), "liebe ")
        sync(theirs, mine)
        await pilot.pause()
        assert editor.text == "Grüße liebe 🎉 und\nzweite éßZeile"
        assert editor.cursor_location == (1, 9)
        await pilot.press("x")
        sync(mine, theirs)
        assert str(theirs.text) == "Grüße liebe 🎉 und\nzweite éßxZeile"

        # a remote delete after the cursor leaves it alone
        end = len(str(theirs.text).encode())
        with theirs.doc.transaction():
            del theirs.text[end - len("Zeile".encode()):end]
        sync(theirs, mine)
        await pilot.pause()
        assert editor.text == "Grüße liebe 🎉 und\nzweite éßx"
        assert editor.cursor_location == (1, 10)


async def test_undo_touches_only_my_own_edits():
    mine, theirs = Peer(), Peer()
    app = EditorApp(mine)
    async with app.run_test(size=(60, 10)) as pilot:
        editor = app.query_one(CollabTextArea)
        await pilot.press("h", "i")
        sync(mine, theirs)
        with theirs.doc.transaction():
            theirs.text += " ünd du"
        sync(theirs, mine)
        await pilot.pause()
        assert editor.text == "hi ünd du"
        await pilot.pause(0.5)  # past the undo capture window
        await pilot.press("ctrl+z")
        await pilot.pause()
        assert editor.text == " ünd du"
        sync(mine, theirs)
        assert str(theirs.text) == " ünd du"
        await pilot.press("ctrl+y")
        await pilot.pause()
        assert editor.text == "hi ünd du"


async def test_read_only_editor_sends_nothing():
    mine = Peer()
    app = EditorApp(mine)
    async with app.run_test(size=(60, 10)) as pilot:
        editor = app.query_one(CollabTextArea)
        editor.read_only = True
        await pilot.press("a", "b")
        assert editor.text == "" and str(mine.text) == ""
