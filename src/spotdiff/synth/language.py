"""Small English helpers for caption templates: articles, plurals and number words.

The templates themselves live with their engines (SPEC Sec. 3.3, EqBen Fig. 14/15, VISLA Sec. 3.3);
this module only inflects the slot fillers so that captions stay grammatical ("an apple",
"two buses", "there is one fish").
"""

from __future__ import annotations

NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")

_IRREGULAR_PLURALS = {
    "fish": "fish",
    "sheep": "sheep",
    "deer": "deer",
    "mouse": "mice",
    "person": "people",
    "child": "children",
    "man": "men",
    "woman": "women",
    "knife": "knives",
    "leaf": "leaves",
    "shelf": "shelves",
}


def pluralize(noun: str) -> str:
    """The plural of a (possibly multi-word) noun; only the last word is inflected."""
    head, _, last = noun.rpartition(" ")
    lower = last.lower()
    if lower in _IRREGULAR_PLURALS:
        plural = _IRREGULAR_PLURALS[lower]
    elif lower.endswith(("s", "x", "z", "ch", "sh")):
        plural = last + "es"
    elif lower.endswith("y") and len(lower) > 1 and lower[-2] not in "aeiou":
        plural = last[:-1] + "ies"
    else:
        plural = last + "s"
    return f"{head} {plural}" if head else plural


def article(phrase: str) -> str:
    """``"a"`` or ``"an"`` for the phrase, by its first letter (good enough for our vocabularies)."""
    first = phrase.strip().lower()[:1]
    return "an" if first and first in "aeiou" else "a"


def with_article(phrase: str) -> str:
    """``"an apple"``, ``"a red car"``."""
    return f"{article(phrase)} {phrase}"


def number_word(n: int) -> str:
    """``3 -> "three"`` for 0..9, digits otherwise."""
    return NUMBER_WORDS[n] if 0 <= n < len(NUMBER_WORDS) else str(n)


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``"one apple"``, ``"two apples"``.

    Args:
        n: the count.
        noun: the singular noun.
        plural: its irregular plural, or None.
    """
    return f"{number_word(n)} {noun if n == 1 else (plural or pluralize(noun))}"


def sentence(text: str) -> str:
    """Capitalise the first letter and end with a full stop."""
    text = " ".join(text.split())
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."
