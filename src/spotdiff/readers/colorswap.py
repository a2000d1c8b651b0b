"""ColorSwap's choice questions and its reading of their answers (the prompts of its vlm_results and vlm_eval.py's
readers, github.com/Top34051/colorswap, commit 4f2c9e4): the question style ``colorswap`` (:data:`COLORSWAP`), moved
here from ``spotdiff.scorers.chat`` (issue 43).
"""

from __future__ import annotations

from collections.abc import Sequence

from spotdiff.readers.choice import ChoiceStyle, first_second, letters

__all__ = ["COLORSWAP", "colorswap_is_option_image", "colorswap_is_option_text"]


def _colorswap_strip_articles(text: str) -> str:
    """vlm_eval.py's ``remove_p``: articles, "with" and "and" dropped between words and at the start."""
    for word in ("a", "an", "the", "with", "and"):
        text = text.replace(f" {word} ", " ")
    for word in ("a", "an", "the"):
        text = text.removeprefix(f"{word} ")
    return text


def colorswap_is_option_text(response: str, option_text: str, alternative_text: str, option: str,
                             alternative: str) -> bool:  # fmt: skip
    """ColorSwap's ``is_option_text`` (vlm_eval.py, github.com/Top34051/colorswap, commit 4f2c9e4): whether
    the answer to a caption question chooses ``option`` (its letter, or its caption and not the other).

    >>> colorswap_is_option_text("B) a white raft", "a blue raft", "a white raft", "B", "A")
    True
    """
    low, opt, alt = response.lower(), option.lower(), alternative.lower()
    contains = (f"image presents ({opt})", f"image presents option ({opt})", f"image presents option {opt}",
                f"it would imply ({opt})", f"it could metaphorically represent ({opt})", f"it is ({opt})",
                f"this image presents {option_text.lower()}")  # fmt: skip
    starts = (f"{option})", f"({option})", f"Option {option}", f"Option {option})", f"Option ({option})")
    named = any(x in low for x in (f"option {opt}", f"option ({opt})", f"option {opt})"))
    return (
        (option_text.lower() in low and alternative_text.lower() not in low)
        or any(x in low for x in contains)
        or response.startswith(starts)
        or (named and not (f"({alt})" in low or f"{alt})" in low))
        or response == option
        or (
            _colorswap_strip_articles(option_text).lower() in _colorswap_strip_articles(response).lower()
            and _colorswap_strip_articles(alternative_text).lower() not in _colorswap_strip_articles(response).lower()
        )
    )


def colorswap_is_option_image(response: str, option: str, alternative: str) -> bool:
    """ColorSwap's ``is_option_image``: the answer to an image question names ``option`` ("first") and
    not the other, or says the option image "better aligns" / "aligns better" / "is more relevant".

    >>> colorswap_is_option_image("The first image better aligns", "first", "second")
    True
    """
    low = response.lower()
    return (
        (option in low and alternative not in low)
        or f"{option} image better aligns" in low
        or f"{option} image aligns better" in low
        or f"the {option} image is more relevant" in low
    )


def _read_colorswap_text(output: str, options: Sequence[str], labels: Sequence[str]) -> int | None:
    """vlm_eval.py's reading of a caption question: option A alone or option B alone, else none."""
    said = [colorswap_is_option_text(output, options[k], options[1 - k], labels[k], labels[1 - k]) for k in (0, 1)]
    return said.index(True) if sum(said) == 1 else None


def _read_colorswap_image(output: str, options: Sequence[str], labels: Sequence[str]) -> int | None:
    """vlm_eval.py's reading of an image question: "first" alone or "second" alone, else none."""
    said = [colorswap_is_option_image(output, w, ("first", "second")[1 - k]) for k, w in enumerate(("first", "second"))]
    return said.index(True) if sum(said) == 1 else None


#: ColorSwap's style, asked once in the case's order; an answer that names both options or none is no answer.
COLORSWAP = ChoiceStyle(
    "colorswap",
    lambda options: (
        f"Does this image present (A) {options[0]}, or (B) {options[1]}? Note, you must choose "
        "one of the two options"
    ),
    lambda text, k: (
        f"Which image better aligns with the description {text}? The first image or the second "
        "image? Note you must choose one of two options."
    ),
    letters,
    first_second,
    False,
    _read_colorswap_text,
    _read_colorswap_image,
)
