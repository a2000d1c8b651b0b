"""The one place that parses model names (as open_clip's ``factory.py``): spec strings -> scorers.

A model is named ``family:rest`` or by an alias (``minilm``); :func:`load_scorer` builds the
registered family's scorer.

>>> resolve_spec("hf-clip:openai/clip-vit-base-patch32")
('hf-clip', 'openai/clip-vit-base-patch32')
>>> parse_open_clip_spec("ViT-B-32@openai")
('ViT-B-32', 'openai')
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qsl

from spotdiff.errors import ConfigError
from spotdiff.scorers.base import SCORERS, Scorer, ScorerOptions
from spotdiff.urls import redact_text

#: Families whose ``rest`` is a Hugging Face hub name or a local checkpoint folder.
HF_FAMILIES = ("hf-clip", "hf-siglip", "hf-dual", "hf")
#: open_clip specs that name a whole model (no ``ARCH@PRETRAINED``).
OPEN_CLIP_SCHEMAS = ("local-dir:", "hf-hub:")


#: Short names for common specs.
ALIASES: dict[str, str] = {}


def resolve_spec(spec: str) -> tuple[str, str]:
    """Split a spec string into (family prefix, rest), expanding aliases."""
    spec = ALIASES.get(spec, spec)
    if ":" not in spec:
        raise ConfigError(
            f"model spec {spec!r} has no family prefix; expected 'family:name-or-path' "
            f"(see `spotdiff models`)"
        )
    family, rest = spec.split(":", 1)
    return family, rest


def load_scorer(spec: str, options: ScorerOptions | None = None) -> Scorer:
    """Build the scorer a spec string names (``hf-clip:/path``, ``minilm``, ...)."""
    SCORERS.names()  # discover families (and their aliases)
    family, rest = resolve_spec(spec)
    factory = SCORERS.get(family)
    return factory(rest, options or ScorerOptions())


def family_capabilities(family: str) -> frozenset[str] | None:
    """What a scorer family can serve, without loading a model: its class's ``capabilities`` (from
    the registered class, or the return annotation of the registered factory function)."""
    factory = SCORERS.get(family)
    caps = getattr(factory, "capabilities", None)
    if caps is None:
        try:
            returned = inspect.signature(factory, eval_str=True).return_annotation
        except (NameError, TypeError, ValueError):
            return None
        caps = getattr(returned, "capabilities", None)
    return frozenset(caps) if caps is not None else None


def parse_spec_options(rest: str, options: ScorerOptions, known: Sequence[str]) -> tuple[str, dict[str, str]]:
    """Split ``name?key=value&...`` into the model name and its options (``options.extra`` first,
    then the query string, which wins).

    Args:
        rest: the spec after the family prefix.
        options: the scorer options, whose ``extra`` may hold options too.
        known: the option names the family accepts (any other is a ``ConfigError``).
    """
    name, _, query = rest.partition("?")
    opts: dict[str, Any] = {k: v for k, v in options.extra.items() if k in known}
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key not in known:
            raise ConfigError(f"unknown option {key!r} in model spec {redact_text(rest)!r}; known: {', '.join(known)}")
        opts[key] = value
    if not name:
        raise ConfigError(f"model spec {redact_text(rest)!r} names no model (expected a hub id or a local path)")
    return name, opts


def parse_open_clip_spec(rest: str) -> tuple[str, str | None]:
    """Split ``ARCH@PRETRAINED`` into (arch, pretrained or None)."""
    if rest.startswith(OPEN_CLIP_SCHEMAS):
        return rest, None
    arch, sep, pretrained = rest.partition("@")
    if not arch:
        raise ConfigError(f"open-clip spec {rest!r} has no architecture; expected ARCH@PRETRAINED")
    if sep and not pretrained:
        raise ConfigError(f"open-clip spec {rest!r} has an empty PRETRAINED after '@'")
    return arch, pretrained or None


def hf_name(spec: str) -> str:
    """The hub name or local path of a Hugging Face family's spec (``hf-clip:NAME`` -> ``NAME``);
    a spec without a family prefix is taken as the name itself."""
    family, sep, rest = spec.partition(":")
    return rest if sep and family in HF_FAMILIES else spec
