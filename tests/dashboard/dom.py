"""A small HTML tree from the standard library's parser, to assert on pages by id, class and
attribute (what the page contract names) instead of on raw strings."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser

__all__ = ["Element", "parse"]

_VOID = {
    "area",
    "base",
    "br",
    "col",
    "embed",
    "hr",
    "img",
    "input",
    "link",
    "meta",
    "source",
    "wbr",
}


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    children: list[Element | str] = field(default_factory=list)

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def text(self) -> str:
        """The text content (entities decoded), whitespace collapsed and trimmed."""
        return " ".join(self.raw_text().split())

    def raw_text(self) -> str:
        return "".join(c if isinstance(c, str) else c.raw_text() for c in self.children)

    def iter(self) -> Iterator[Element]:
        yield self
        for c in self.children:
            if isinstance(c, Element):
                yield from c.iter()

    def find_all(
        self,
        tag: str | None = None,
        *,
        id: str | None = None,
        cls: str | None = None,
        where: Callable[[Element], bool] | None = None,
        **attrs: str,
    ) -> list[Element]:
        found = []
        for e in self.iter():
            if tag is not None and e.tag != tag:
                continue
            if id is not None and e.attrs.get("id") != id:
                continue
            if cls is not None and cls not in e.classes:
                continue
            if any(e.attrs.get(k.replace("_", "-")) != v for k, v in attrs.items()):
                continue
            if where is not None and not where(e):
                continue
            found.append(e)
        return found

    def one(self, tag: str | None = None, **kwargs: str) -> Element:
        found = self.find_all(tag, **kwargs)  # type: ignore[arg-type]
        assert len(found) == 1, f"expected one {tag or ''} {kwargs}, found {len(found)}"
        return found[0]

    def by_id(self, id: str) -> Element:
        return self.one(id=id)


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(element)
        if tag not in _VOID:
            self.stack.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Element(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(html: str) -> Element:
    builder = _Builder()
    builder.feed(html)
    builder.close()
    return builder.root
