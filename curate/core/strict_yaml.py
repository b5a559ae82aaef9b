"""YAML for files people write by hand (audit configs, rules): safe, and strict about repeats,
size and depth.

PyYAML keeps the last of two equal keys in a mapping without a word, so a file with `stages:`
written twice silently loses the first list. ``StrictLoader`` refuses that, naming the key and
both lines, wherever in the document it happens.

Anchors and aliases stay allowed (reusing a condition is useful), but an alias is a reference,
so a few hundred bytes of nested aliases can stand for billions of nodes ("billion laughs"), and
an alias inside its own anchor for an infinite document. Everything that reads the document
walks it recursively, so the loader refuses, before anything is built: a document that expands
to more than ``MAX_NODES`` nodes, one nested deeper than ``MAX_DEPTH``, and a recursive alias.
"""
from __future__ import annotations

import yaml

#: Generous for hand-written files (the study's ten-stage rules file expands to ~200 nodes).
MAX_NODES = 10_000
MAX_DEPTH = 50


class DuplicateKey(yaml.YAMLError):
    def __init__(self, key: str, line: int, first: int):
        self.key, self.line, self.first = key, line, first
        super().__init__(f"key {key!r} appears twice (lines {first} and {line}); the second would silently win")


class TooComplex(yaml.YAMLError):
    """Refused for its shape, not its syntax: too deep, too large once aliases are expanded, or
    recursive."""

    def __init__(self, message: str, node: yaml.Node):
        self.line = node.start_mark.line + 1
        super().__init__(f"{message} (line {self.line})")


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a mapping key written twice instead of keeping the last one, and
    documents too deep, too large or recursive through aliases."""

    _depth = 0

    def compose_node(self, parent, index):
        # The composer recurses once per level: stop before Python's recursion limit does.
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                event = self.peek_event()
                raise TooComplex(f"nested deeper than {MAX_DEPTH} levels",
                                 yaml.ScalarNode("tag:yaml.org,2002:null", "", event.start_mark, event.end_mark))
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self):
        node = super().compose_document()
        _check_expanded(node)
        return node

    def construct_mapping(self, node, deep=False):
        # Only the keys written in this mapping: those a merge key (``<<: *anchor``) brings in
        # may be overridden here, which is what merging is for.
        seen = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise DuplicateKey(str(key), line, seen[key])
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _check_expanded(root: yaml.Node) -> None:
    """Refuse a node graph that, with every alias expanded, is recursive, deeper than MAX_DEPTH
    or larger than MAX_NODES. Size and height are memoized per node, so a billion laughs costs one
    visit per distinct node, and the walk stops at MAX_DEPTH, so it cannot overflow the stack."""
    seen: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded size, expanded height)
    on_path: set[int] = set()

    def walk(node: yaml.Node, depth: int) -> tuple[int, int]:
        if id(node) in on_path:
            raise TooComplex("an alias refers to a node that contains it (a recursive alias)", node)
        if id(node) not in seen:
            if depth > MAX_DEPTH:
                raise TooComplex(f"nested deeper than {MAX_DEPTH} levels once aliases are expanded", node)
            if isinstance(node, yaml.MappingNode):
                children = [n for pair in node.value for n in pair]
            else:
                children = node.value if isinstance(node, yaml.SequenceNode) else []
            on_path.add(id(node))
            total, height = 1, 0
            for child in children:
                child_size, child_height = walk(child, depth + 1)
                total, height = total + child_size, max(height, child_height + 1)
                if total > MAX_NODES:
                    raise TooComplex(f"expands to more than {MAX_NODES} nodes once its aliases are expanded "
                                     f"(anchors reused inside anchors)", node)
            on_path.discard(id(node))
            seen[id(node)] = (total, height)
        total, height = seen[id(node)]
        if depth + height > MAX_DEPTH:
            raise TooComplex(f"nested deeper than {MAX_DEPTH} levels once aliases are expanded", node)
        return total, height

    walk(root, 1)


def load(text: str):
    """The document in ``text``; raises DuplicateKey, TooComplex or yaml.YAMLError."""
    return yaml.load(text, Loader=StrictLoader)


def load_named(text: str, path: str):
    """``load``, with a repeated key or a syntax error raised as an InputError naming ``path``
    (and the key, or the line and column): what a user's YAML file or inline mapping gets."""
    from curate.core.errors import InputError

    try:
        return load(text)
    except DuplicateKey as exc:
        raise InputError(str(exc), path=path, field=exc.key) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise InputError(f"not valid YAML: {where}{getattr(exc, 'problem', None) or exc}", path=path) from None
