"""What a model is shown when it answers by generation: the template, the shuffle, the prompt.

A template (``generate/templates/NAME.yaml``) holds the wording: instructions, the user text
around the context and the numbered options, the option line, and a cue for models without a
chat template. Its ``hash`` (sha256 of the file) is part of every generation's key, so changing
a word never lets an old reply stand for the new question.

The options are shown in an order drawn per (item content, seed) from numpy's PCG64 generator,
so every mode and template sees the same order for the same item and seed (their comparisons are
paired), and the order is the same on any machine and in any run.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import yaml

from curate.core.errors import CurateError
from curate.core.reading import CONFIG_LIMIT, read_bounded

TEMPLATE_DIR = Path(__file__).parent / "templates"
DEFAULT_TEMPLATE = "numbered"
FIELDS = ("instructions", "context", "user", "option", "cue")


@dataclass(frozen=True)
class Template:
    name: str
    instructions: str
    context: str     # wraps a non-empty context; an empty one is left out
    user: str
    option: str
    cue: str
    hash: str        # sha256 of the template file


def template_names() -> list[str]:
    return sorted(p.stem for p in TEMPLATE_DIR.glob("*.yaml"))


@cache
def load_template(name: str) -> Template:
    path = TEMPLATE_DIR / f"{name}.yaml"
    if not path.is_file():
        raise CurateError(f"unknown template {name!r}; known: {', '.join(template_names())}")
    data = read_bounded(path, CONFIG_LIMIT, "a prompt template")
    doc = yaml.safe_load(data)
    missing = [f for f in FIELDS if not isinstance(doc.get(f), str)]
    if missing:
        raise CurateError(f"{path}: template lacks {', '.join(missing)}")
    return Template(name, *(doc[f] for f in FIELDS), hash="sha256:" + hashlib.sha256(data).hexdigest())


def shuffle_order(content_hash: str, seed: int, k: int) -> list[int]:
    """The displayed order of an item's ``k`` options for ``seed``: position p (0-based) shows
    original option ``order[p]``. Seeded by the seed and the item's content hash."""
    item_bits = int(content_hash.split(":")[-1][:16], 16)
    rng = np.random.default_rng([int(seed), item_bits])
    return [int(i) for i in rng.permutation(k)]


def numbers_text(k: int) -> str:
    """'1, 2, 3 or 4' for k = 4."""
    return ", ".join(map(str, range(1, k))) + f" or {k}" if k > 1 else "1"


def render(template: Template, context: str, options: list[str], order: list[int]) -> tuple[str, str]:
    """(instructions, user text) for one item in one mode, options in ``order``."""
    k = len(options)
    lines = "\n".join(template.option.format(n=p + 1, text=options[j]) for p, j in enumerate(order))
    fill = {"k": k, "numbers": numbers_text(k)}
    block = template.context.format(context=context.strip()) if context.strip() else ""
    return (template.instructions.format(**fill),
            template.user.format(context=block, options=lines, **fill))


def shown_options(options: list[str], order: list[int]) -> list[str]:
    """The option texts in displayed order (what a reply's text is matched against)."""
    return [options[j] for j in order]


def plain_text(template: Template, instructions: str, user: str) -> str:
    """The prompt for a model without a chat template."""
    return f"{instructions}\n\n{user}\n{template.cue}"
