"""Kubernetes manifests read from YAML text safely, remembering where every field came from (pure:
text in, documents out; `gitops.source.files` reads the files).

Users fix YAML in an editor, so every problem `trainops check` (and the GitOps pre-flight)
reports carries the file and line of the offending field. PyYAML's safe loader builds plain
data and forgets positions; this module composes each document's node tree first, records the
line of every mapping key and list item under its path (`("spec", "replicaSpecs", 1,
"template")`), then constructs the data from the same nodes.

Bad input never raises and never hangs:
- syntax errors become `LoadError(file, line, message)`;
- a document over 3 MiB (the API server's request limit) is refused;
- alias bombs ("billion laughs") are refused by counting the nodes the aliases would expand to,
  before anything walks the data; recursive aliases are refused too;
- duplicate mapping keys are recorded (PyYAML keeps the last silently; a server with
  `fieldValidation=Strict` refuses them).

Values are converted the way Kubernetes' YAML-to-JSON step does: timestamps stay strings and
mapping keys become strings, so the result is JSON-like data.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

from gitops.engine import limits as repo_limits

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "MAX_EXPANDED_NODES",
    "Document",
    "DuplicateKey",
    "LoadError",
    "expand_lists",
    "load_text",
]

MAX_DOCUMENT_BYTES = 3 * 1024 * 1024
"""The API server refuses request bodies over 3 MiB; so do we, per document."""
MAX_EXPANDED_NODES = 1_000_000
"""More nodes than this after alias expansion is an alias bomb, not a manifest."""
PRESCAN_CHARS = 64 * 1024
"""A text longer than this is scanned as a stream of parser events against a revision's depth
and objects limits before its documents are composed (`_prescan`)."""

PathParts = tuple[str | int, ...]


@dataclass(frozen=True)
class DuplicateKey:
    """A mapping key given twice; `path` is the duplicate key's own path."""

    path: PathParts
    line: int


@dataclass(frozen=True)
class Document:
    """One YAML document: its data and the line of each field (1-based)."""

    file: str
    index: int
    line: int
    obj: Any
    lines: dict[PathParts, int] = field(repr=False, default_factory=dict)
    duplicates: tuple[DuplicateKey, ...] = ()

    def line_of(self, parts: Iterable[str | int]) -> int:
        """The line of the field at `parts`, or of its nearest ancestor in the file."""
        path = tuple(parts)
        while path:
            line = self.lines.get(path)
            if line is not None:
                return line
            path = path[:-1]
        return self.line


@dataclass(frozen=True)
class LoadError:
    """A file that could not be read or parsed, with the line when known."""

    file: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: {self.message}"


def expand_lists(documents: Iterable[Document]) -> list[Document]:
    """Documents with each `kind: List` (kubectl's `v1/List`) replaced by its items.

    Each item keeps its own lines: its paths are re-rooted at the item.
    """
    out: list[Document] = []
    for doc in documents:
        obj = doc.obj
        items = obj.get("items") if isinstance(obj, dict) and obj.get("kind") == "List" else None
        if not isinstance(items, list):
            out.append(doc)
            continue
        for i, item in enumerate(items):
            prefix = ("items", i)
            lines = {k[2:]: v for k, v in doc.lines.items() if k[:2] == prefix}
            dups = tuple(
                DuplicateKey(d.path[2:], d.line) for d in doc.duplicates if d.path[:2] == prefix
            )
            line = doc.lines.get(prefix, doc.line)
            out.append(Document(doc.file, doc.index, line, item, lines, dups))
    return out


_TOO_DEEP = "document is nested too deeply to load"


def load_text(
    text: str,
    file: str = "<stdin>",
    *,
    limits: repo_limits.Limits | None = None,
    objects_before: int = 0,
) -> tuple[list[Document], list[LoadError]]:
    """Every non-empty document in `text`; loading stops at the first syntax error.

    With `limits` (a repository revision's, `gitops.engine.limits`), a document nested deeper
    than `limits.depth`, or objects (after `kind: List` expansion) beyond `limits.objects`
    counting `objects_before` of the files read before, raise `LimitExceeded` — checked on
    each document's node tree, before its data is built."""
    documents: list[Document] = []
    errors: list[LoadError] = []
    text, oversized = _blank_oversized(text, file)
    if limits is not None and len(text) > PRESCAN_CHARS:
        _prescan(text, file, limits, objects_before)
    try:
        loader = _Loader(text)
    except UnicodeError:  # lone surrogates, e.g. from a decoding with errors="surrogateescape"
        return [], [LoadError(file, None, "not valid Unicode text")]
    index = 0
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            start = node.start_mark.line + 1
            doc_index, index = index, index + 1
            problem, depth = _size_problem(text, node), 0
            if not problem:
                problem, depth = _alias_problem(node)
            if problem:
                errors.append(LoadError(file, start, problem))
                continue
            if limits is not None:
                objects_before += _objects_in(node)
                exceeded = (
                    repo_limits.Exceeded("depth", file, limits.depth, start)
                    if depth > limits.depth
                    else repo_limits.check_objects(objects_before, file, limits, start)
                )
                if exceeded is not None:
                    raise repo_limits.LimitExceeded(exceeded)
            lines: dict[PathParts, int] = {}
            duplicates: list[DuplicateKey] = []
            _record_lines(node, (), lines, duplicates, set())
            obj = loader.construct_document(node)
            if obj is None:
                continue
            documents.append(Document(file, doc_index, start, obj, lines, tuple(duplicates)))
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else None
        if "exceeded maximum nesting depth" in str(e.problem):
            # PyYAML >= 6.0.4 stops at its own depth limit where older ones hit RecursionError
            # below: one message for both.
            errors.append(LoadError(file, line, _TOO_DEEP))
        else:
            errors.append(LoadError(file, line, f"YAML syntax error: {_describe(e, text)}"))
    except yaml.YAMLError as e:
        errors.append(LoadError(file, None, f"YAML error: {e}"))
    except RecursionError:
        errors.append(LoadError(file, None, _TOO_DEEP))
    except UnicodeError:
        errors.append(LoadError(file, None, "not valid Unicode text"))
    except (ValueError, TypeError) as e:
        errors.append(LoadError(file, None, f"YAML error: {e}"))
    finally:
        loader.dispose()
    if oversized:
        errors = sorted([*oversized, *errors], key=lambda e: e.line or 0)
    return documents, errors


# --- loader -----------------------------------------------------------------------------------

_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_Base):
    """Safe loading (libyaml when present) with Kubernetes' YAML-to-JSON conversions."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[str, Any]:
        # Keys become strings as they are read: as Python values `1` and `true` would collide.
        self.flatten_mapping(node)
        mapping: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                # JSON, and so Kubernetes, has string keys only; a list or mapping as a key
                # (`? [a, b]`) is refused when converting YAML to JSON, as here.
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    "found a mapping key that is a list or a mapping; keys must be strings",
                    key_node.start_mark,
                )
            key = _key_text(self.construct_object(key_node, deep=True))
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping

    def construct_yaml_set(self, node: yaml.MappingNode) -> Any:
        # `!!set {a, b}` is a mapping to nulls once converted to JSON, not a Python set.
        yield self.construct_mapping(node)


def _construct_as_text(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> str:
    return str(loader.construct_scalar(node))


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _construct_as_text)
_Loader.add_constructor("tag:yaml.org,2002:binary", _construct_as_text)
_Loader.add_constructor("tag:yaml.org,2002:set", _Loader.construct_yaml_set)


def _key_text(key: Any) -> str:
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(key)


# --- node walks -------------------------------------------------------------------------------


_DOCUMENT_MARKER = re.compile(r"^(?:---|\.\.\.)(?=[ \t\r\n]|$)", re.MULTILINE)


def _blank_oversized(text: str, file: str) -> tuple[str, list[LoadError]]:
    """`text` with every document over the limit blanked out (its lines kept, so later lines
    keep their numbers), and an error for each; checked on the raw text, before composing.

    Composing a huge document into nodes costs ~30 times its size in memory and seconds of
    time, only to refuse it afterwards. Document markers (`---`, `...` at column 0) cannot
    occur inside any scalar, so splitting on them finds the same documents the parser would.
    """
    if len(text) <= MAX_DOCUMENT_BYTES // 4:  # at most 4 bytes a character: surely small
        return text, []
    starts = [0, *(m.start() for m in _DOCUMENT_MARKER.finditer(text) if m.start() > 0)]
    chunks = [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]
    errors: list[LoadError] = []
    line = 1
    for i, chunk in enumerate(chunks):
        newlines = chunk.count("\n")
        if len(chunk) > MAX_DOCUMENT_BYTES // 4:
            size = len(chunk.encode("utf-8", "surrogatepass"))
            if size > MAX_DOCUMENT_BYTES:
                errors.append(LoadError(file, line + _content_offset(chunk), _too_big(size)))
                chunks[i] = "\n" * newlines
        line += newlines
    return ("".join(chunks) if errors else text), errors


def _content_offset(chunk: str) -> int:
    """Lines from the start of `chunk` to its first content line (past a bare `---`, blank
    lines and comments), so the error names the line the parser would give the document."""
    for offset, line in enumerate(chunk.split("\n", 64)[:64]):
        bare = line.strip()
        if bare and bare not in ("---", "...") and not bare.startswith("#"):
            return offset
    return 0


def _too_big(size: int) -> str:
    return f"document is {size} bytes, over the {MAX_DOCUMENT_BYTES}-byte (3 MiB) limit"


def _size_problem(text: str, node: yaml.Node) -> str:
    begin, end = node.start_mark.index, node.end_mark.index
    if end - begin < MAX_DOCUMENT_BYTES // 4:
        return ""
    size = len(text[begin:end].encode("utf-8"))
    if size <= MAX_DOCUMENT_BYTES:
        return ""
    return _too_big(size)


def _alias_problem(root: yaml.Node) -> tuple[str, int]:
    """Refuse recursive aliases and documents that expand to too many nodes; and the depth
    of the document (mappings and lists nested: 0 for a scalar), when it is not refused."""
    sizes: dict[int, int] = {}
    depths: dict[int, int] = {}
    active: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            active.discard(key)
            sizes[key] = 1 + sum(sizes[id(c)] for c in _children(node))
            nested = max((depths[id(c)] for c in _children(node)), default=0)
            depths[key] = nested if isinstance(node, yaml.ScalarNode) else 1 + nested
            if sizes[key] > MAX_EXPANDED_NODES:
                return (
                    f"document expands to over {MAX_EXPANDED_NODES} nodes through YAML aliases "
                    "(an alias bomb); refusing to load it"
                ), 0
            continue
        if key in sizes:
            continue
        if key in active:
            return "document contains a recursive YAML alias; refusing to load it", 0
        active.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in active:
                return "document contains a recursive YAML alias; refusing to load it", 0
            if id(child) not in sizes:
                stack.append((child, False))
    return "", depths.get(id(root), 0)


def _prescan(text: str, file: str, limits: repo_limits.Limits, objects_before: int) -> None:
    """Raise `LimitExceeded` when a document of `text` is nested deeper than `limits.depth`,
    or its objects (a List's items) take the count past `limits.objects`, from parser events
    only — no node tree — and as soon as it is known: a 3 MiB List of 600,000 items composes
    to ~300 MB of nodes, and is refused here after its first 20,001 items (when `kind` comes
    before `items`; else at the document's end, still before any node is built). Never more
    than `_alias_problem` and `_objects_in` count on the nodes (aliases are not followed, a
    scalar document counts no object), so a text passing here is judged again on its nodes;
    a syntax error is left to the load."""
    try:
        loader = _Loader(text)
    except UnicodeError:
        return
    objects, scan = objects_before, _Scan()
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, yaml.DocumentStartEvent):
                scan = _Scan(line=_line(event.start_mark, scan.line))
            elif isinstance(event, yaml.DocumentEndEvent):
                objects += scan.objects()
                _raise_if(repo_limits.check_objects(objects, file, limits, scan.line))
            elif isinstance(event, yaml.CollectionEndEvent):
                scan.end()
            elif isinstance(event, yaml.NodeEvent):
                scan.node(event)
                if scan.depth > limits.depth:
                    _raise_if(repo_limits.Exceeded("depth", file, limits.depth, scan.line))
                if scan.kind == "List" and scan.items is not None:
                    total = objects + scan.items
                    _raise_if(repo_limits.check_objects(total, file, limits, scan.line))
    except yaml.YAMLError:
        return
    finally:
        loader.dispose()


def _line(mark: Any, default: int) -> int:
    return int(mark.line) + 1 if mark is not None else default


def _raise_if(exceeded: repo_limits.Exceeded | None) -> None:
    if exceeded is not None:
        raise repo_limits.LimitExceeded(exceeded)


@dataclass
class _Scan:
    """One document's parser events so far (`_prescan`)."""

    line: int = 1
    depth: int = 0
    """Collections open."""
    collection: bool = False
    """Whether the document is a collection (a scalar gives no object here)."""
    mapping: bool = False
    key: str | None = None
    """The root mapping's key whose value comes (None: a key comes)."""
    awaiting_value: bool = False
    kind: str | None = None
    items: int | None = None
    """Nodes directly in the root's `items`, when it is a sequence."""
    in_items: bool = False

    def node(self, event: yaml.NodeEvent) -> None:
        opens = isinstance(event, yaml.CollectionStartEvent)
        if self.depth == 0:
            self.line = _line(event.start_mark, self.line)
            self.mapping = isinstance(event, yaml.MappingStartEvent)
            self.collection = self.mapping or isinstance(event, yaml.SequenceStartEvent)
        elif self.depth == 1 and not self.mapping:
            pass  # an item of a root list: no keys
        elif self.depth == 1 and not self.awaiting_value:  # a key of the root mapping
            self.key = event.value if isinstance(event, yaml.ScalarEvent) else None
            self.awaiting_value = True
        elif self.depth == 1:  # its value
            self.awaiting_value = False
            if self.key == "kind" and isinstance(event, yaml.ScalarEvent):
                self.kind = event.value
            self.in_items = self.key == "items" and isinstance(event, yaml.SequenceStartEvent)
            if self.in_items:
                self.items = 0
        elif self.depth == 2 and self.in_items and self.items is not None:
            self.items += 1
        if opens:
            self.depth += 1

    def end(self) -> None:
        self.depth -= 1
        if self.depth == 1:
            self.in_items = False  # the root's value (its `items`, or another) ended

    def objects(self) -> int:
        if self.kind == "List" and self.items is not None:
            return self.items
        return 1 if self.collection else 0


def _objects_in(node: yaml.Node) -> int:
    """The entries a document gives after `kind: List` expansion (`expand_lists`): its items
    for a List whose `items` is a list, else one."""
    if not isinstance(node, yaml.MappingNode):
        return 0 if node.tag == "tag:yaml.org,2002:null" else 1
    kind = items = None
    for key, value in node.value:
        if isinstance(key, yaml.ScalarNode) and key.value == "kind":
            kind = value
        elif isinstance(key, yaml.ScalarNode) and key.value == "items":
            items = value
    listed = isinstance(kind, yaml.ScalarNode) and kind.value == "List"
    return len(items.value) if listed and isinstance(items, yaml.SequenceNode) else 1


def _children(node: yaml.Node) -> Iterator[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            yield key
            yield value
    elif isinstance(node, yaml.SequenceNode):
        yield from node.value


def _record_lines(
    node: yaml.Node,
    path: PathParts,
    lines: dict[PathParts, int],
    duplicates: list[DuplicateKey],
    seen: set[int],
) -> None:
    """The line of every key and item below `node`; aliased subtrees are walked once."""
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        keys: set[str] = set()
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            if key_node.tag == "tag:yaml.org,2002:merge":
                _record_lines(value_node, path, lines, duplicates, seen)
                continue
            key = key_node.value
            child = (*path, key)
            line = key_node.start_mark.line + 1
            if key in keys:
                duplicates.append(DuplicateKey(child, line))
                continue
            keys.add(key)
            lines[child] = line
            _record_lines(value_node, child, lines, duplicates, seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[(*path, i)] = item.start_mark.line + 1
            _record_lines(item, (*path, i), lines, duplicates, seen)


def _describe(error: yaml.MarkedYAMLError, text: str) -> str:
    parts = [p for p in (error.context, error.problem) if p]
    mark = error.problem_mark
    if mark is not None and _character_at(text, mark) == "\t":
        # libyaml's wording ("found character that cannot start any token") hides the usual
        # cause: an editor inserted a tab where YAML allows only spaces.
        return f"a tab character at column {mark.column + 1}; YAML indents with spaces"
    return ", ".join(parts) if parts else "invalid YAML"


def _character_at(text: str, mark: Any) -> str:
    if mark is None:
        return ""
    lines = text.split("\n", mark.line + 1)
    if mark.line >= len(lines):
        return ""
    return lines[mark.line][mark.column : mark.column + 1]
