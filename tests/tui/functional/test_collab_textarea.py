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


async def test_control_characters_show_as_placeholders_and_the_shared_text_keeps_them():
    """Issue 31: the editor shows a placeholder for each control someone else typed, and positions stay right:
    a placeholder is one code point (like the control) but three UTF-8 bytes (the control is one), so byte
    offsets must be counted in the shared text. Pasting a control sends it as typed and shows its placeholder."""
    mine, theirs = Peer(), Peer()
    with theirs.doc.transaction():
        theirs.text += "é\x1b]0;T\x07ß\u202e🎉\x9b\nzweite"
    sync(theirs, mine)
    app = EditorApp(mine)
    async with app.run_test(size=(60, 10)) as pilot:
        editor = app.query_one(CollabTextArea)
        assert editor.text == "é␛]0;T␇ß\ufffd🎉\ufffd\nzweite"
        assert str(mine.text) == "é\x1b]0;T\x07ß\u202e🎉\x9b\nzweite"  # viewing rewrote nothing

        editor.move_cursor((0, 9))  # after the U+202E placeholder, before 🎉
        await pilot.press("x")
        sync(mine, theirs)
        assert str(theirs.text) == "é\x1b]0;T\x07ß\u202ex🎉\x9b\nzweite"

        with theirs.doc.transaction():  # a remote insert after the controls, and one holding a control
            theirs.text.insert(len("é\x1b]0;T\x07ß\u202ex🎉".encode()), "ü\x1b[2J")
        with theirs.doc.transaction():
            start = len("é\x1b]0;".encode())
            del theirs.text[start:start + len("T\x07".encode())]
        sync(theirs, mine)
        await pilot.pause()
        assert str(mine.text) == "é\x1b]0;ß\u202ex🎉ü\x1b[2J\x9b\nzweite"
        assert editor.text == "é␛]0;ß\ufffdx🎉ü␛[2J\ufffd\nzweite"
        assert editor.cursor_location == (0, 8)  # after the x still: two characters before it went

        editor.move_cursor((1, 0))
        editor.insert("\x1b]52;c;ZXZpbA==\x07")  # a paste
        sync(mine, theirs)
        assert str(theirs.text).endswith("\n\x1b]52;c;ZXZpbA==\x07zweite")
        assert editor.text.endswith("\n␛]52;c;ZXZpbA==␇zweite")
