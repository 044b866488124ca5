"""The DOT language, read as data: a Graphviz file's nodes, edges and subgraphs with their
attributes (what a label says is capture/graph/dot_labels.py's; what the statements mean
for a CUDA graph, dot_reader.py's).

Nothing is executed or looked up: text tokenized by one regular expression, parsed with an
explicit stack (no recursion), nesting and size bounded. Whatever cannot be read is one
`DotSyntaxError` naming the line, never a partial result. The subset read:
docs/compare.md, "What a dump holds"."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from graph_harness.capture.errors import UsageError

MAX_DEPTH = 64  # subgraphs inside subgraphs (and braces inside a record label: dot_labels)
# tokens in one file: a verbose dump writes about 15 per node (a label is one), so this
# holds a million-node graph; a crafted file stops here, not after minutes
MAX_TOKENS = 20_000_000


class DotSyntaxError(UsageError, ValueError):
    """A file that is not DOT this reader can read; the message names the line."""


_TOKEN = re.compile(
    r"""
    (?P<space>[ \t\r\n\f\v]+)
  | (?P<comment>//[^\n]*|/\*.*?\*/|(?<![^\n])\#[^\n]*)
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<edge>->|--)
  | (?P<punct>[{}\[\];,=:+])
  | (?P<number>-?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?))
  | (?P<id>[A-Za-z_\x80-\U0010ffff][A-Za-z_0-9\x80-\U0010ffff]*)
  """,
    re.VERBOSE | re.DOTALL,
)


@dataclass
class Token:
    kind: str  # "string", "id" (numbers too), "edge", or the punctuation itself
    text: str  # a string's value (its quotes off, \" and line continuations undone)
    line: int


def tokens(text: str) -> Iterator[Token]:
    """The tokens of `text`, one at a time (a file's worth is never held at once)."""
    pos, line, n, count = 0, 1, len(text), 0
    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None:
            c = text[pos]
            if c == '"':
                raise DotSyntaxError(f"line {line}: a quoted string that never ends")
            if c == "<":
                raise DotSyntaxError(
                    f"line {line}: an HTML-like label (<...>), which cudaGraphDebugDotPrint "
                    "never writes"
                )
            raise DotSyntaxError(f"line {line}: {c!r} is not DOT")
        kind, got = m.lastgroup, m.group()
        if kind not in ("space", "comment"):
            count += 1
            if count > MAX_TOKENS:
                raise DotSyntaxError(f"line {line}: more than {MAX_TOKENS:,} tokens")
        if kind == "string":
            value = got[1:-1].replace("\\\r\n", "").replace("\\\n", "").replace('\\"', '"')
            yield Token("string", value, line)
        elif kind in ("id", "number"):
            yield Token("id", got, line)
        elif kind == "edge":
            yield Token("edge", got, line)
        elif kind == "punct":
            yield Token(got, got, line)
        line += got.count("\n")
        pos = m.end()


@dataclass
class Subgraph:
    name: str | None  # None: the file's graph itself
    attrs: dict[str, str] = field(default_factory=dict)  # its graph attributes (label=...)
    parent: int | None = None  # index of the subgraph around it


@dataclass
class DotGraph:
    """A DOT file's statements: every node stated once, in file order, with its
    attributes and the subgraph its statement is in; edges in file order."""

    directed: bool
    subgraphs: list[Subgraph]
    nodes: dict[str, dict[str, str]]  # id -> attributes
    node_line: dict[str, int]  # id -> the line it was first named on
    node_subgraph: dict[str, int]  # id -> index into subgraphs
    edges: list[tuple[str, str, dict[str, str], int]]  # from, to, attributes, line


def parse(text: str) -> DotGraph:  # noqa: C901, PLR0912, PLR0915 - one loop over statements
    """The statements of one DOT graph. A second graph in the same file is refused (a
    graph dump holds one)."""
    stream = tokens(text)
    ahead: list[Token] = []  # the one token looked at and not yet taken
    last: list[Token] = []  # the last token taken (where an error at the end points)

    def advance() -> None:  # take the token looked at
        if ahead:
            last[:] = [ahead.pop()]

    def peek() -> Token | None:
        if not ahead:
            t = next(stream, None)
            if t is not None:
                ahead.append(t)
        return ahead[0] if ahead else None

    def fail(msg: str, at: Token | None = None) -> DotSyntaxError:
        at = at or peek() or (last[0] if last else None)
        where = f"line {at.line}" if at is not None else "the file"
        return DotSyntaxError(f"{where}: {msg}")

    def take(kind: str) -> Token:
        t = peek()
        if t is None or t.kind != kind:
            seen = "the end of the file" if t is None else repr(t.text[:40])
            raise fail(f"expected {kind!r}, found {seen}", t)
        advance()
        return t

    def ident() -> str:
        t = peek()
        if t is None or t.kind not in ("id", "string"):
            seen = "the end of the file" if t is None else repr(t.text[:40])
            raise fail(f"expected a name, found {seen}", t)
        advance()
        value = t.text
        while t.kind == "string" and peek() is not None and peek().kind == "+":  # "a" + "b"
            advance()
            t = take("string")
            value += t.text
        return value

    def attr_lists() -> dict[str, str]:
        attrs: dict[str, str] = {}
        while peek() is not None and peek().kind == "[":
            advance()
            while peek() is not None and peek().kind != "]":
                key = ident()
                if peek() is not None and peek().kind == "=":
                    advance()
                    attrs[key] = ident()
                else:
                    attrs[key] = "true"
                if peek() is not None and peek().kind in (",", ";"):
                    advance()
            take("]")
        return attrs

    def node_id() -> str:
        name = ident()
        if peek() is not None and peek().kind == ":":  # a port (and compass point): not ours
            advance()
            ident()
            if peek() is not None and peek().kind == ":":
                advance()
                ident()
        return name

    if peek() is not None and peek().kind == "id" and peek().text.lower() == "strict":
        advance()
    head = peek()
    if head is None or head.kind != "id" or head.text.lower() not in ("graph", "digraph"):
        raise fail("not a DOT graph: it does not start with `graph` or `digraph`", head)
    directed = head.text.lower() == "digraph"
    advance()
    if peek() is not None and peek().kind in ("id", "string"):
        ident()
    take("{")
    subgraphs = [Subgraph(None)]
    nodes: dict[str, dict[str, str]] = {}
    node_line: dict[str, int] = {}
    node_subgraph: dict[str, int] = {}
    edges: list[tuple[str, str, dict[str, str], int]] = []  # from, to, attributes, line
    stack = [0]  # the open subgraphs, innermost last

    def declared(name: str, at: Token, attrs: dict[str, str]) -> None:
        # a node belongs where its own statement is, never where an edge first named it;
        # a graph dump states each node once
        if name in nodes:
            raise fail(f"node {name[:60]!r} is stated twice (first on line {node_line[name]})", at)
        nodes[name] = attrs
        node_line[name] = at.line
        node_subgraph[name] = stack[-1]

    while stack:
        t = peek()
        if t is None:
            raise fail("the file ends inside a graph (a '}' is missing)")
        if t.kind == ";":
            advance()
            continue
        if t.kind == "}":
            advance()
            stack.pop()
            continue
        if t.kind == "{" or (t.kind == "id" and t.text.lower() == "subgraph"):
            name = None
            if t.kind == "id":
                advance()
                if peek() is not None and peek().kind in ("id", "string"):
                    name = ident()
            take("{")
            if len(stack) >= MAX_DEPTH:
                raise fail(f"subgraphs nested more than {MAX_DEPTH} deep", t)
            subgraphs.append(Subgraph(name, parent=stack[-1]))
            stack.append(len(subgraphs) - 1)
            continue
        if t.kind == "id" and t.text.lower() in ("graph", "node", "edge"):
            advance()
            attrs = attr_lists()
            if t.text.lower() == "graph":
                subgraphs[stack[-1]].attrs.update(attrs)
            continue
        if t.kind not in ("id", "string"):
            raise fail(f"a statement cannot start with {t.text[:40]!r}", t)
        first = node_id()
        if peek() is not None and peek().kind == "=":  # label="graph_1": the subgraph's
            advance()
            subgraphs[stack[-1]].attrs[first] = ident()
            continue
        chain = [first]
        while peek() is not None and peek().kind == "edge":
            arrow = take("edge")
            if (peek() is not None and peek().kind == "{") or (
                peek() is not None and peek().kind == "id" and peek().text.lower() == "subgraph"
            ):
                raise fail("an edge to a subgraph, which a graph dump never writes", arrow)
            if (arrow.text == "->") != directed:
                raise fail(f"{arrow.text!r} in a {'digraph' if directed else 'graph'}", arrow)
            chain.append(node_id())
        attrs = attr_lists()
        if len(chain) == 1:
            declared(first, t, attrs)
        else:
            edges.extend((a, b, attrs, t.line) for a, b in itertools.pairwise(chain))
    if peek() is not None:
        raise fail("more after the graph's closing '}' (one graph per file)")
    return DotGraph(directed, subgraphs, nodes, node_line, node_subgraph, edges)
