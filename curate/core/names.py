"""Model names as the workspace stores them with scores and answers (``--label``, ``--model`` of
the imports, a table's model column, the name an lm-eval or Inspect log gives): checked here, for
every command and import, so none can hold a name that breaks a report, a CSV or a terminal line.

A name is refused when it is empty (or only white space), longer than ``MAX_LENGTH`` characters,
or holds a control or invisible formatting character (a newline would split the report's tables
and the run summaries; a right-to-left override would show another name). Anything else, HTML
included, is a name: every page that shows one escapes it.
"""
from __future__ import annotations

import unicodedata

#: Longer than any Hub id or model path in use, short enough to show.
MAX_LENGTH = 300
#: Unicode categories no name holds: controls (newline, tab, NUL), formatting characters
#: (zero-width space, direction overrides), line and paragraph separators, lone surrogates.
REFUSED = ("Cc", "Cf", "Zl", "Zp", "Cs")


def model_name(value) -> str:
    """``value`` as a stored model name (white space at its ends dropped), or a ValueError
    saying why it cannot be one."""
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a text")
    name = value.strip()
    if not name:
        raise ValueError("is empty; a model needs a name")
    if len(name) > MAX_LENGTH:
        raise ValueError(f"is {len(name)} characters long; a model name has at most {MAX_LENGTH}")
    bad = next((ch for ch in name if unicodedata.category(ch) in REFUSED), None)
    if bad is not None:
        raise ValueError(f"holds the control character {bad!r} (U+{ord(bad):04X}); a model name is one line of "
                         f"visible text")
    return name


def shown(value, most: int = 60) -> str:
    """``value`` as an error message quotes it: repr, cut to ``most`` characters."""
    text = repr(value)
    return text if len(text) <= most else text[:most - 4] + "...'"
