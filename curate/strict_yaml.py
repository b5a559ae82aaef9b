"""YAML for files people write by hand (audit configs, rules): safe, and strict about repeats.

PyYAML keeps the last of two equal keys in a mapping without a word, so a file with `stages:`
written twice silently loses the first list. ``StrictLoader`` refuses that, naming the key and
both lines, wherever in the document it happens.
"""
from __future__ import annotations

import yaml


class DuplicateKey(yaml.YAMLError):
    def __init__(self, key: str, line: int, first: int):
        self.key, self.line, self.first = key, line, first
        super().__init__(f"key {key!r} appears twice (lines {first} and {line}); the second would silently win")


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a mapping key written twice instead of keeping the last one."""

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise DuplicateKey(str(key), line, seen[key])
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def load(text: str):
    """The document in ``text``; raises DuplicateKey or yaml.YAMLError."""
    return yaml.load(text, Loader=StrictLoader)
