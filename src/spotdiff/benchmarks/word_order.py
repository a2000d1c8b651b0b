"""ARO's word-order perturbations of a caption (``dataset_zoo/perturbations.py``) and what they need.

:class:`TextShuffler` tags nouns and adjectives with spaCy ``en_core_web_sm`` and tokenizes with
``nltk.word_tokenize``, as ARO does, or with :func:`heuristic_pos` (a closed-class lexicon plus suffix
and context rules for caption-style English) and :func:`regex_tokenize` when those are not installed:
labelled approximations (see :mod:`spotdiff.benchmarks.aro`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from functools import cache

import numpy as np

from spotdiff.errors import ConfigError

log = logging.getLogger(__name__)

_TOKEN = re.compile(
    r"\d+(?:[.,:]\d+)+"  # numbers with separators: 3.5, 1,000, 10:30
    r"|\w+(?=n't\b)"  # "do" of "don't"
    r"|n't\b"
    r"|'(?:s|re|ve|ll|d|m)(?!\w)"  # clitics
    r"|\w+(?:-\w+)*"  # words, hyphenated words
    r"|\.\.\.|--"
    r"|[^\w\s]"  # any other single symbol
)


def regex_tokenize(text: str) -> list[str]:
    """A Penn-Treebank-like tokenizer (a stand-in for ``nltk.word_tokenize``): splits punctuation,
    ``n't`` and clitics (``'s``, ``'re``, ...) off words, keeps hyphenated words and decimal numbers
    whole. Unlike NLTK it leaves quotes as they are (BLIP's ``pre_caption`` removes ``"`` anyway)."""
    return _TOKEN.findall(text)


def _words(text: str) -> set[str]:
    return set(text.split())


_DET = _words(
    "a an the this that these those some any each every another no its his her their our my your both all "
    "either neither several many few much more most other such what which whose whatever half"
)
_PRON = _words(
    "he she it they we i you him them us me someone something somebody anyone anything everyone everybody "
    "everything nobody nothing itself himself herself themselves myself yourself ourselves who whom "
    "there here one ones"
)
_PREP = _words(
    "on in at of with near by from to into onto over under above below behind beside besides between among "
    "amongst through across along alongside around against about after before during inside outside "
    "toward towards up down off out for upon within without next beneath underneath atop past via like "
    "than as beyond throughout amid despite except per plus"
)
_CONJ = _words("and or but nor so yet while because if then though although whereas whether unless until")
_AUX = _words(
    "is are was were be been being am has have had having do does did doing can could will would shall "
    "should may might must 're 've 'm 'll 'd"
)
_ADV = _words(
    "very too also just not n't never always often sometimes together almost nearly really quite still "
    "away back only even ever well again already soon perhaps maybe rather somewhat partially fairly "
    "else however instead now how when where why"
)
_NUM = _words(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen twenty "
    "thirty forty fifty hundred thousand dozen dozens hundreds thousands first second third fourth fifth"
)
_ADJ = _words(
    "red white black blue green yellow brown orange pink purple gray grey silver gold golden tan beige "
    "maroon teal violet dark light bright pale colorful colourful multicolored striped spotted checkered "
    "plaid big large small little tall short long tiny huge giant massive wide narrow thick thin high low "
    "deep shallow young old new adult elderly empty full open closed wooden metal metallic plastic glass "
    "dirty clean wet dry busy crowded sunny cloudy snowy grassy rocky sandy muddy dusty foggy rainy stormy "
    "calm quiet noisy happy sad cute pretty beautiful handsome ugly modern ancient antique vintage fresh "
    "ripe raw cooked fried baked grilled hot cold warm cool frozen icy sliced chopped shredded stuffed "
    "fancy plain simple nice good bad great fine real fake same different various double single main "
    "whole entire several other own favorite lone lonely busy public private professional electric "
    "electronic digital wild domestic furry fluffy hairy bald curly straight round square rectangular "
    "circular flat steep sharp soft hard heavy strong weak fast slow early late asian african american "
    "english french italian chinese japanese mexican indian british female male upper lower outdoor "
    "indoor nearby distant far close"
)
_NOUN_LEX = _words(
    "building ceiling clothing painting thing ring king wing string morning evening spring swing railing "
    "icing topping frosting sibling pudding stuffing seating bedding parking ceiling wedding dressing "
    "sign table cable vegetable timetable turntable olive detective locomotive archive motive traffic "
    "music picnic clinic mosaic graphic comic bed shed sled seed speed reed weed family fly butterfly "
    "belly jelly lily rally trolley bully dragonfly firefly bed breed need feed steed train sink bowl "
    "dish pitch field bus glass metal plastic"
)
_VERB_BASES = _words(
    "sit stand hold ride look lay lie walk eat play fly run wear carry cut throw catch hit swing jump park "
    "drive watch talk pose wait cross stare read use ski surf skate sleep drink cook prepare smile rest "
    "graze hang lean display fill cover take make show contain line overlook feature stack pile place put "
    "top serve sell grow go come get give see try work stop pull push perch float swim climb kick chase "
    "wash brush reach set pack load travel head move turn face point wave fix paint build open close enjoy "
    "share celebrate dress decorate slice bite lick feed pet hug kiss follow lead check attempt arrange "
    "gather spread wear appear seem remain shine keep leave hold bring buy tell say find stick think "
    "laugh cry dance sing shop hike jog bike race fight block guard sniff smell touch grab hand pass toss "
    "pitch bat swing fish dig wade splash spray pour mix bake fry grill cut chop peel tie tow haul pull "
    "wheel roll slide glide soar land takeoff board exit enter approach stroll march parade gaze peer peek "
    "observe photograph film record text call type write draw color cut hang sleep nap lounge relax sit"
)
_VERB_IRREGULAR = _words(
    "sat stood held rode ridden ate eaten flew flown ran wore worn caught hung threw thrown took taken made "
    "shown laid lain sold grew grown went gone came got gotten gave given seen lit led fed built left kept "
    "sent spent slept swam swum swung bit bitten drove driven broke broken brought bought told said found "
    "stuck thought lying tying dying laying"
)


def _inflections(base: str) -> set[str]:
    forms = {base}
    sib = base.endswith(("s", "sh", "ch", "x", "z", "o"))
    if base.endswith("y") and len(base) > 1 and base[-2] not in "aeiou":
        forms |= {base[:-1] + "ies", base[:-1] + "ied"}
    else:
        forms.add(base + ("es" if sib else "s"))
        forms.add(base + ("d" if base.endswith("e") else "ed"))
    cvc = len(base) <= 4 and re.fullmatch(r".*[^aeiou][aeiou][^aeiouwxy]", base) is not None
    if cvc:
        forms |= {base + base[-1] + "ing", base + base[-1] + "ed"}
    elif base.endswith("e") and not base.endswith(("ee", "ye", "oe")):
        forms.add(base[:-1] + "ing")
    else:
        forms.add(base + "ing")
    return forms


_VERB_FORMS = frozenset(set().union(*(_inflections(b) for b in _VERB_BASES)) | _VERB_IRREGULAR)
_ADJ_SUFFIXES = ("ous", "ful", "ive", "able", "ible", "less", "ish", "ic", "ary", "ical")
_DETLIKE = {"DET", "NUM", "POSS", "ADJ"}


def _singulars(word: str) -> tuple[str, ...]:
    out = [word]
    if word.endswith("ies") and len(word) > 4:
        out.append(word[:-3] + "y")
    if word.endswith("es") and len(word) > 3:
        out.append(word[:-2])
    if word.endswith("s") and len(word) > 2:
        out.append(word[:-1])
    return tuple(out)


def heuristic_pos(tokens: list[str]) -> list[str]:
    """Coarse tags ``NOUN`` / ``ADJ`` / other (``DET``, ``PREP``, ``VERB``, ...) for caption tokens.

    NOT spaCy and NOT the ARO tagger: a deterministic approximation for when spaCy is unavailable.
    Closed-class words (determiners, pronouns, prepositions, conjunctions, auxiliaries, adverbs,
    number words) come from small lists; adjectives from a list of common visual adjectives and the
    suffixes -ous -ful -ive -able -ible -less -ish -ic -ary -ical; ``-ly`` words are adverbs; known verb
    forms and ``-ing`` / ``-ed`` words are verbs unless a determiner, number, possessive or adjective
    precedes them (then a noun, or an adjective for ``-ed``); every other word is a noun.
    """
    tags: list[str] = []
    for k, token in enumerate(tokens):
        w = token.lower()
        prev = tags[k - 1] if k else "START"
        prev_word = tokens[k - 1].lower() if k else ""
        after_det = prev in _DETLIKE
        if w in ("'s", "’s"):
            tag = "POSS"
        elif not re.fullmatch(r"[a-z][a-z'’-]*", w):
            tag = "OTHER"
        elif w in _DET:
            tag = "DET"
        elif w in _NUM:
            tag = "NUM"
        elif w in _PRON:
            tag = "PRON"
        elif w in _PREP:
            tag = "PREP"
        elif w in _CONJ:
            tag = "CONJ"
        elif w in _AUX or w.endswith("n't"):
            tag = "AUX"
        elif w in _ADV:
            tag = "ADV"
        elif any(s in _NOUN_LEX for s in _singulars(w)):
            tag = "NOUN"
        elif w in _ADJ:
            tag = "ADJ"
        elif "-" in w:
            tag = "ADJ" if w.split("-")[-1] in _ADJ or "-and-" in w else "NOUN"
        elif w.endswith("ly") and len(w) > 4:
            tag = "ADV"
        elif w in _VERB_FORMS:
            nominal = after_det or (prev == "PREP" and prev_word != "to")
            sentence_start = prev == "START" and not w.endswith(("ed", "ing"))
            tag = "NOUN" if nominal or sentence_start else "VERB"
            if nominal and w.endswith("ed"):
                tag = "ADJ"
        elif w.endswith("ing") and len(w) > 4:
            tag = "NOUN" if after_det else "VERB"
        elif w.endswith("ed") and len(w) > 4:
            tag = "ADJ" if after_det or prev == "ADV" else "VERB"
        elif any(s.endswith(_ADJ_SUFFIXES) and len(s) > 4 for s in _singulars(w)[:1]):
            tag = "ADJ"
        else:
            tag = "NOUN"
        tags.append(tag)
    return tags


POS_TAGGERS = ("auto", "spacy", "heuristic")
TOKENIZERS = ("auto", "nltk", "regex")
SPACY_TAGGER = "spacy:en_core_web_sm"
HEURISTIC_TAGGER = "heuristic-lexicon-v1"
NLTK_TOKENIZER = "nltk.word_tokenize"
REGEX_TOKENIZER = "regex-treebank-v1"

_NOUN_TAGS = ("NN", "NNS", "NNP", "NNPS")
_ADJ_TAGS = ("JJ", "JJR", "JJS")


@cache
def _spacy_nlp() -> object | None:
    try:
        import spacy  # type: ignore[import-not-found]

        return spacy.load("en_core_web_sm")
    except Exception as exc:  # ImportError, OSError (model not installed), ...
        log.debug("spaCy en_core_web_sm unavailable: %s", exc)
        return None


@cache
def _nltk_tokenize() -> Callable[[str], list[str]] | None:
    try:
        import nltk  # type: ignore[import-not-found]

        nltk.word_tokenize("a test.")
        return nltk.word_tokenize
    except Exception as exc:  # ImportError, LookupError (punkt data missing), ...
        log.debug("nltk.word_tokenize unavailable: %s", exc)
        return None


class TextShuffler:
    """ARO's four caption perturbations (``dataset_zoo/perturbations.py``), seeded per call.

    Args:
        pos_tagger: ``spacy`` (ARO), ``heuristic`` (:func:`heuristic_pos`) or ``auto``.
        tokenizer: ``nltk`` (ARO), ``regex`` (:func:`regex_tokenize`) or ``auto``.
    """

    PERTURBATIONS = (
        "shuffle_nouns_and_adj",
        "shuffle_allbut_nouns_and_adj",
        "shuffle_within_trigrams",
        "shuffle_trigrams",
    )

    def __init__(self, pos_tagger: str = "auto", tokenizer: str = "auto") -> None:
        if pos_tagger not in POS_TAGGERS:
            raise ConfigError(f"pos_tagger must be one of {', '.join(POS_TAGGERS)}, got {pos_tagger!r}")
        if tokenizer not in TOKENIZERS:
            raise ConfigError(f"tokenizer must be one of {', '.join(TOKENIZERS)}, got {tokenizer!r}")
        self._nlp = _spacy_nlp() if pos_tagger in ("auto", "spacy") else None
        if pos_tagger == "spacy" and self._nlp is None:
            raise ConfigError("pos_tagger=spacy needs spaCy with the en_core_web_sm model installed")
        self.pos_tagger = SPACY_TAGGER if self._nlp is not None else HEURISTIC_TAGGER
        self._nltk = _nltk_tokenize() if tokenizer in ("auto", "nltk") else None
        if tokenizer == "nltk" and self._nltk is None:
            raise ConfigError("tokenizer=nltk needs nltk with its punkt tokenizer data installed")
        self.tokenizer = NLTK_TOKENIZER if self._nltk is not None else REGEX_TOKENIZER

    @property
    def is_aro(self) -> bool:
        """True when both the tagger and the tokenizer are ARO's own."""
        return self.pos_tagger == SPACY_TAGGER and self.tokenizer == NLTK_TOKENIZER

    def tokenize(self, text: str) -> list[str]:
        return self._nltk(text) if self._nltk is not None else regex_tokenize(text)

    def tag(self, text: str) -> tuple[list[str], np.ndarray, np.ndarray]:
        """Tokens and boolean noun / adjective masks (Penn tags NN* / JJ* with spaCy)."""
        if self._nlp is not None:
            doc = self._nlp(text)  # type: ignore[operator]
            tokens = [t.text for t in doc]
            nouns = np.array([t.tag_ in _NOUN_TAGS for t in doc], dtype=bool)
            adjs = np.array([t.tag_ in _ADJ_TAGS for t in doc], dtype=bool)
            return tokens, nouns, adjs
        tokens = self.tokenize(text)
        tags = heuristic_pos(tokens)
        nouns = np.array([t == "NOUN" for t in tags], dtype=bool)
        adjs = np.array([t == "ADJ" for t in tags], dtype=bool)
        return tokens, nouns, adjs

    @staticmethod
    def _permute(tokens: list[str], mask: np.ndarray, rng: np.random.Generator) -> list[str]:
        idx = np.flatnonzero(mask)
        out = list(tokens)
        for i, j in zip(idx, rng.permutation(idx), strict=True):
            out[i] = tokens[j]
        return out

    def shuffle_nouns_and_adj(self, text: str, rng: np.random.Generator) -> str:
        tokens, nouns, adjs = self.tag(text)
        tokens = self._permute(tokens, nouns, rng)
        tokens = self._permute(tokens, adjs, rng)
        return " ".join(tokens)

    def shuffle_allbut_nouns_and_adj(self, text: str, rng: np.random.Generator) -> str:
        tokens, nouns, adjs = self.tag(text)
        return " ".join(self._permute(tokens, ~(nouns | adjs), rng))

    @staticmethod
    def _trigrams(tokens: list[str]) -> list[list[str]]:
        return [tokens[i : i + 3] for i in range(0, len(tokens), 3)]

    def shuffle_within_trigrams(self, text: str, rng: np.random.Generator) -> str:
        trigrams = self._trigrams(self.tokenize(text))
        return " ".join(" ".join(tri[k] for k in rng.permutation(len(tri))) for tri in trigrams)

    def shuffle_trigrams(self, text: str, rng: np.random.Generator) -> str:
        trigrams = self._trigrams(self.tokenize(text))
        return " ".join(" ".join(trigrams[k]) for k in rng.permutation(len(trigrams)))

    def perturb(self, caption: str, rng: np.random.Generator) -> list[str]:
        """The four perturbations of ``caption`` in ARO's order (before ``pre_caption``)."""
        return [getattr(self, name)(caption, rng) for name in self.PERTURBATIONS]
