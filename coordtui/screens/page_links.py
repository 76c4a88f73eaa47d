"""Links, the one place for them: the links of a message, chat line, task, page or Links entry, to open (o, enter)
or copy (y) (a terminal has no pointer to click them with), and server text rendered with its addresses as
terminal hyperlinks (OSC 8). Text and addresses come from other identities: shown as data, never as markup."""
from __future__ import annotations

import os
import re
import webbrowser
from dataclasses import dataclass
from typing import Any, Literal

from markdown_it import MarkdownIt
from rich.style import Style
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option


@dataclass(frozen=True)
class PageLink:
    text: str
    url: str


def page_links(markdown: str) -> list[PageLink]:
    """Every link of the page in order (inline and autolinked), each address once."""
    links: list[PageLink] = []
    seen: set[str] = set()
    for block in MarkdownIt("commonmark", {"linkify": False}).parse(markdown):
        children = block.children or []
        for index, token in enumerate(children):
            if token.type != "link_open":
                continue
            url = str(token.attrGet("href") or "")
            words = []
            for inner in children[index + 1:]:
                if inner.type == "link_close":
                    break
                words.append(inner.content)
            if url and url not in seen:
                seen.add(url)
                links.append(PageLink("".join(words) or url, url))
    return links


# printable ASCII only: a placeholder the SDK put for a control character (␛) or a backslash ends an address,
# so a hyperlink never carries what was neutralised (client/safe_text.py)
BARE_URL = re.compile(r"https?://[^\s<>()\[\]\"'`\\\x00-\x1f\x7f-\U0010ffff]+")


def text_links(text: str) -> list[PageLink]:
    """The links of a message, chat line or task: Markdown links, then bare http(s) addresses (without the
    punctuation that ends a sentence after them), each address once."""
    links = page_links(text)
    seen = {link.url for link in links}
    for match in BARE_URL.finditer(text):
        url = match.group(0).rstrip(".,;:!?")
        if url not in seen:
            seen.add(url)
            links.append(PageLink(url, url))
    return links


def linked(text: str, style: str | Style = "") -> Text:
    """Server text as a Text (never read as markup) whose http(s) addresses are terminal hyperlinks (OSC 8:
    a terminal that knows them opens the address on click; others show the text as it is)."""
    shown = Text(text, style=style)
    for match in BARE_URL.finditer(text):
        url = match.group(0).rstrip(".,;:!?")
        shown.stylize(Style(link=url), match.start(), match.start() + len(url))
    return shown


def use_links(app: App[Any], links: list[PageLink], how: Literal["open", "copy"], where: str) -> None:
    """o / y on something with links: the only one is opened or copied at once; several are offered to choose
    from (o/enter open, y copy); none is said."""
    if not links:
        app.notify(f"No links in {where}", severity="warning", timeout=3)
    elif len(links) > 1:
        app.push_screen(PageLinksScreen(links, f"Links in {where}"))
    elif how == "open":
        open_link(app, links[0].url)
    else:
        app.copy_to_clipboard(links[0].url)
        app.notify(f"{links[0].url} copied to the clipboard", timeout=3)


def browser_available() -> bool:
    """Whether this machine has a browser to open addresses with (none on a server reached over SSH). A terminal
    browser (lynx, w3m, elinks: what Python finds on a machine without a display) is none: it would run in the
    terminal coordtui draws in, unless the user named it in $BROWSER."""
    try:
        browser = webbrowser.get()
    except webbrowser.Error:
        return False
    in_terminal = type(browser) is webbrowser.GenericBrowser or isinstance(browser, webbrowser.Elinks)
    return not in_terminal or bool(os.environ.get("BROWSER"))


def open_link(app: App[Any], url: str) -> None:
    """Opens the address in the browser; where there is none it is copied instead (OSC 52 reaches the terminal the
    user sits at), and the notice says which happened: "Opened" with nothing opened would send them looking."""
    if browser_available():
        app.open_url(url)
        app.notify(f"Opened {url}", timeout=3)
    else:
        app.copy_to_clipboard(url)
        app.notify(f"No browser on this machine: {url} copied to the clipboard", timeout=4)


class PageLinksScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape", "dismiss_links", "Close"), Binding("o", "open_link", "Open"),
                Binding("y", "copy_link", "Copy")]

    def __init__(self, links: list[PageLink], heading: str = "Links on this page") -> None:
        super().__init__(classes="form-screen")
        self.links = links
        self.heading = heading

    def compose(self) -> ComposeResult:
        with Vertical(id="form"):
            yield Label(Text.assemble((self.heading, "bold"), ("  o/enter open · y copy · esc close", "dim")))
            yield OptionList(*[Option(Text.assemble(link.text, ("  " + link.url, "dim")), id=str(index))
                               for index, link in enumerate(self.links)], id="page-links")

    def selected(self) -> PageLink | None:
        index = self.query_one("#page-links", OptionList).highlighted
        return self.links[index] if index is not None and index < len(self.links) else None

    def action_open_link(self) -> None:
        link = self.selected()
        if link is not None:
            open_link(self.app, link.url)

    def action_copy_link(self) -> None:
        link = self.selected()
        if link is not None:
            self.app.copy_to_clipboard(link.url)
            self.notify(f"{link.url} copied to the clipboard", timeout=3)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.action_open_link()

    def action_dismiss_links(self) -> None:
        self.dismiss(None)
