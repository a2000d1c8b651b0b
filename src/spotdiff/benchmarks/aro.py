"""ARO (Yuksekgonul et al., "When and Why Vision-Language Models Behave like Bags-of-Words, and What
to Do About It?", ICLR 2023): four image-to-text benchmarks, registered as ``aro-vg-relation``,
``aro-vg-attribution``, ``aro-coco-order`` and ``aro-flickr-order``. VisualGPTScore (papers/003,
Table 1) reports all four as I2T R@1. The reference code is github.com/mertyg/vision-language-models-
are-bows (``dataset_zoo/aro_datasets.py``, ``perturbations.py`` and the VG notebook).

**VG-Relation / VG-Attribution.** ``visual_genome_relation.json`` / ``visual_genome_attribution.json``:
a JSON list of ``{"image_path", "bbox_x", "bbox_y", "bbox_w", "bbox_h", "true_caption",
"false_caption", "relation_name"}`` (attribution: ``"attributes"``, 2 strings, instead of or besides
``relation_name``). The image is ``<images>/<image_path>`` cropped to ``(x, y, x + w, y + h)``. A case
is 1 image x 2 texts in ARO's published order ``[false_caption, true_caption]`` (roles say which), the
true caption marked in the truth. ARO reports *macro* accuracies, computed by protocol ``aro-macro``
from the grouping tags: ``relation`` (VG-R: ``relation_name``; ARO's notebook leaves its "symmetric"
relations out of the macro average) and ``attributes`` (VG-A: ``"<attributes[0]>_<attributes[1]>"``,
ARO's grouping; pairs with fewer than 25 cases are left out).

**COCO-Order / Flickr30k-Order.** Built at load time from the BLIP Karpathy test files
(``coco_karpathy_test.json`` / ``flickr30k_test.json``, see :mod:`spotdiff.benchmarks.retrieval`): one
case per (image, caption), 1 image x 5 texts: the true caption and ARO's four perturbations of it, in
ARO's order -- shuffle nouns and adjectives, shuffle all but nouns and adjectives, shuffle within
trigrams, shuffle trigrams -- each passed through BLIP's ``pre_caption(max_words=30)`` as ARO does.
Shuffles are drawn from ``numpy.random.default_rng([seed, image index, caption index])``
(option ``seed``, default 0), so a case does not depend on which other cases are loaded. A
perturbation identical to the true caption (for instance trigram order drawn as the identity) ties
with it. ARO's code counts ``argmax == 0`` over ``[true, perturbations]``, crediting that tie to the
true caption. Under ``--ties argmax`` such perturbations are kept as ARO keeps them, so case counts
and accuracy are ARO's; under strict ties (the default) they are dropped and counted in
``report.skipped`` (a strict protocol would count them as certain failures), and a caption whose four
perturbations all equal it gives no case.

**MTEB's parquet mirrors (MIEB).** ``spotdiff data fetch NAME --part mieb`` brings MTEB's
revision-pinned mirrors (``mteb/ARO-Visual-Relation``, ``mteb/ARO-Visual-Attribution``,
``mteb/ARO-COCO-order``, ``mteb/ARO-Flickr-Order``) into ``DIR/mieb/data/test-*.parquet``. For the
order benchmarks, option ``perturbations=mieb`` reads their *fixed* perturbations (columns ``images``,
``correct_caption``, ``hard_text_1`` .. ``hard_text_4``) instead of drawing new ones, so numbers line
up with MTEB's leaderboard; a hard text identical to the true caption is dropped by the same rule as
above. For VG-Relation / VG-Attribution the mirrors hold the uncropped images with ``bbox``
(``{x, y, w, h}``), ``true_caption``, ``false_caption`` and ``relation_name`` (VG-A: ``attributes``,
not checked on the real file): option ``source=mieb`` reads them (``source=auto``, the default,
reads the official JSON when it is there and the mirror otherwise); the image is cropped to the box
as ARO does, or kept whole with ``crop=false``, which is what MTEB scores. Image bytes stay in the
parquet files as lazy :class:`~spotdiff.cases.ParquetImage` references.

**POS tagging (important).** ARO tags nouns (NN, NNS, NNP, NNPS) and adjectives (JJ, JJR, JJS) with
spaCy ``en_core_web_sm`` and tokenizes the trigram perturbations with ``nltk.word_tokenize``. Option
``pos_tagger`` chooses: ``spacy`` (ARO's exact rule; needs spaCy and ``en_core_web_sm``), ``heuristic``
(:func:`heuristic_pos`, a small closed-class lexicon plus suffix and context rules written for
caption-style English: an approximation, NOT the ARO perturbation), or ``auto`` (default: spaCy when
it loads, else the heuristic, with a logged warning). Option ``tokenizer`` (``auto``/``nltk``/
``regex``) does the same for ``nltk.word_tokenize`` versus :func:`regex_tokenize`, a Penn-Treebank-like
regular expression. Every case records the choices in ``tags["pos_tagger"]`` and
``tags["tokenizer"]``; results computed with ``heuristic-*`` or ``regex-*`` are not ARO numbers.
"""

from __future__ import annotations

import logging
import re
from abc import abstractmethod
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path

import numpy as np

from spotdiff.benchmarks._io import (
    field,
    find_file,
    frozen_truth,
    option_bool,
    option_choice,
    option_int,
    read_json,
)
from spotdiff.benchmarks._parquet import find_parquet, iter_rows
from spotdiff.benchmarks.base import BENCHMARKS, Benchmark, BenchmarkMetadata, LoadReport
from spotdiff.benchmarks.retrieval import SPLITS, _KarpathyBenchmark, pre_caption, read_karpathy
from spotdiff.cases import Case, FileImage, ImageRef, ParquetImage
from spotdiff.errors import ConfigError, DataError

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------------
# VG-Relation / VG-Attribution
# --------------------------------------------------------------------------------------------------

_VG_TRUTH = frozen_truth([[False, True]])
_VG_TIES = (
    "ARO's code counts argmax over [false_caption, true_caption] == 1, so a tie goes to the false caption: "
    "strict and argmax give ARO's number alike"
)
_ORDER_TIES = (
    "ARO's code counts argmax == 0 over [true caption, 4 perturbations], so a tie goes to the true caption: "
    "--ties argmax reproduces it (and keeps perturbations identical to the caption, as ARO does); strict "
    "drops those perturbations and counts any other tie as a failure"
)
_VG_ROLES = ("false_caption", "true_caption")


def _number(record: object, name: str, *, file: Path, record_id: object) -> float:
    value = field(record, name, (int, float), file=file, record_id=record_id)
    if not np.isfinite(value):
        raise DataError(f"expected a finite number, got {value!r}", file=file, record=record_id, field=name)
    return float(value)


_PAPER = (
    "Yuksekgonul, Bianchi, Kalluri, Jurafsky, Zou. When and Why Vision-Language Models Behave like Bags-Of-Words, "
    "and What to Do About It? ICLR 2023"
)
_REFERENCE = "https://github.com/mertyg/vision-language-models-are-bows"
CITATION = """\
@inproceedings{yuksekgonul2023when,
  title     = {When and Why Vision-Language Models Behave like Bags-Of-Words, and What to Do About It?},
  author    = {Yuksekgonul, Mert and Bianchi, Federico and Kalluri, Pratyusha and Jurafsky, Dan and Zou, James},
  booktitle = {International Conference on Learning Representations (ICLR)},
  year      = {2023}
}
"""

#: Where ``spotdiff data fetch NAME --part mieb`` puts MTEB's parquet mirror, and other places to look.
MIEB_PARQUET = ("mieb/data/test-*.parquet", "data/test-*.parquet", "*.parquet")
MIEB_SOURCES = ("auto", "official", "mieb")


class _VisualGenome(Benchmark):
    protocols = ("aro-macro", "i2t-top1")
    annotation = ""
    kind = ""

    def _annotation(self) -> Path:
        return find_file(self.root, (self.annotation,), what=f"ARO {self.annotation}")

    def _mieb(self) -> list[Path] | None:
        """MTEB's parquet files when option ``source`` (default auto) selects them, else None."""
        source = option_choice(self.options, "source", MIEB_SOURCES, "auto")
        if source == "official":
            return None
        if source == "auto":
            try:
                self._annotation()
                return None
            except DataError:
                pass
        return find_parquet(self.root, MIEB_PARQUET, what=f"MTEB {self.name} (no {self.annotation} either)")

    def data_files(self) -> list[Path]:
        return self._mieb() or [self._annotation()]

    def _images(self, ann: Path) -> Path:
        value = self.options.get("images")
        return Path(str(value)).expanduser() if value else ann.parent / "images"

    @abstractmethod
    def _grouping(self, record: object, *, file: Path, record_id: int) -> dict[str, str]:
        """Implemented by each subclass."""

    def cases(self, subset: str | None = None) -> Iterator[Case]:
        self.check_subset(subset)
        self.report = LoadReport()
        files = self._mieb()
        if files is not None:
            yield from self._mieb_cases(files)
            return
        ann = self._annotation()
        data = read_json(ann)
        if not isinstance(data, list):
            raise DataError(f"expected a JSON list of records, got {type(data).__name__}", file=ann)
        images = self._images(ann)
        refs: dict[tuple, FileImage] = {}
        for i, record in enumerate(data):
            self.report.records += 1
            image_path = field(record, "image_path", str, file=ann, record_id=i)
            x = _number(record, "bbox_x", file=ann, record_id=i)
            y = _number(record, "bbox_y", file=ann, record_id=i)
            w = _number(record, "bbox_w", file=ann, record_id=i)
            h = _number(record, "bbox_h", file=ann, record_id=i)
            for name, value in (("bbox_w", w), ("bbox_h", h)):
                if value <= 0:
                    raise DataError(f"box size must be positive, got {value}", file=ann, record=i, field=name)
            true_caption = field(record, "true_caption", str, file=ann, record_id=i)
            false_caption = field(record, "false_caption", str, file=ann, record_id=i)
            tags = {"subset": self.kind, **self._grouping(record, file=ann, record_id=i)}
            key = (image_path, x, y, w, h)
            image = refs.get(key)
            if image is None:
                image = refs[key] = FileImage(images / image_path, bbox=(x, y, w, h))
            yield Case(
                id=str(i),
                texts=(false_caption, true_caption),
                truth=_VG_TRUTH,
                images=(image,),
                tags=tags,
                roles=_VG_ROLES,
            )

    def _mieb_cases(self, files: list[Path]) -> Iterator[Case]:
        crop = option_bool(self.options, "crop", True)
        columns = ("true_caption", "false_caption", "?bbox", "?relation_name", "?attributes")
        for n, (path, row, record) in enumerate(iter_rows(files, columns, ("image",))):
            self.report.records += 1
            where = f"row {row}"
            true_caption = field(record, "true_caption", str, file=path, record_id=where)
            false_caption = field(record, "false_caption", str, file=path, record_id=where)
            image: ParquetImage = record["image"]
            if crop:
                box = field(record, "bbox", dict, file=path, record_id=where)
                bbox = tuple(_number(box, k, file=path, record_id=where) for k in ("x", "y", "w", "h"))
                if bbox[2] <= 0 or bbox[3] <= 0:
                    raise DataError(f"box size must be positive, got {bbox}", file=path, record=where, field="bbox")
                image = ParquetImage(image.path, image.row, image.column, image.sha256, bbox)  # type: ignore[arg-type]
            tags = {"subset": self.kind, "source": "mieb", **self._grouping(record, file=path, record_id=n)}
            yield Case(
                id=str(n),
                texts=(false_caption, true_caption),
                truth=_VG_TRUTH,
                images=(image,),
                tags=tags,
                roles=_VG_ROLES,
            )


_VG_LAYOUT = """\
DIR/{file} (or DIR = the file): [{{"image_path": str, "bbox_x", "bbox_y", "bbox_w", "bbox_h": numbers,
  "true_caption": str, "false_caption": str, {extra}}}]
images: <images>/<image_path> cropped to (x, y, x + w, y + h); <images> = option images=PATH,
  default DIR/images (ARO's vgr_vga_images.zip)
case: 1 image x 2 texts [false_caption, true_caption] (ARO's order), truth on true_caption; id = index
tags: subset {kind}, {tags} (the aro-macro protocol's grouping)
MTEB's mirror (spotdiff data fetch NAME --part mieb): DIR/mieb/data/test-*.parquet, columns image, bbox
  {{x, y, w, h}}, true_caption, false_caption, {extra}; read with option source=mieb (source=auto, the
  default, reads it when the JSON is absent); crop=false keeps the whole image as MTEB does"""


@BENCHMARKS.register("aro-vg-relation")
class AroVGRelation(_VisualGenome):
    name = "aro-vg-relation"
    subsets = ("vg-relation",)
    annotation = "visual_genome_relation.json"
    kind = "vg-relation"
    layout = _VG_LAYOUT.format(
        file=annotation, extra='"relation_name": str', kind=kind, tags="relation (relation_name)"
    )
    description = (
        "ARO VG-Relation: 23,937 Visual Genome crops with a true and a subject/object-swapped caption; "
        "macro accuracy over relations (Yuksekgonul et al., ARO, ICLR 2023)"
    )
    metadata = BenchmarkMetadata(
        paper=_PAPER,
        reference=_REFERENCE,
        citation=CITATION,
        main_score=("aro-macro", "macro_accuracy"),
        reproduces="ARO Table 1 (VG-Relation); VisualGPTScore Table 2b",
        license="Visual Genome images: CC BY 4.0",
        ties=_VG_TIES,
    )

    def _grouping(self, record: object, *, file: Path, record_id: int) -> dict[str, str]:
        relation = field(record, "relation_name", str, file=file, record_id=record_id)
        return {"relation": relation}


@BENCHMARKS.register("aro-vg-attribution")
class AroVGAttribution(_VisualGenome):
    name = "aro-vg-attribution"
    subsets = ("vg-attribution",)
    annotation = "visual_genome_attribution.json"
    kind = "vg-attribution"
    layout = _VG_LAYOUT.format(
        file=annotation,
        extra='"attributes": [2 strings]',
        kind=kind,
        tags='attributes ("<a0>_<a1>")',
    )
    description = (
        "ARO VG-Attribution: 28,748 Visual Genome crops with a true and an attribute-swapped caption; "
        "macro accuracy over attribute pairs (Yuksekgonul et al., ARO, ICLR 2023)"
    )
    metadata = BenchmarkMetadata(
        paper=_PAPER,
        reference=_REFERENCE,
        citation=CITATION,
        main_score=("aro-macro", "macro_accuracy"),
        reproduces="ARO Table 1 (VG-Attribution); VisualGPTScore Table 2b",
        license="Visual Genome images: CC BY 4.0",
        ties=_VG_TIES,
    )

    def _grouping(self, record: object, *, file: Path, record_id: int) -> dict[str, str]:
        attributes = field(record, "attributes", list, file=file, record_id=record_id)
        if len(attributes) < 2 or not all(isinstance(a, str) and a.strip() for a in attributes[:2]):
            raise DataError(
                f"expected 2 attribute strings, got {attributes!r:.60}",
                file=file,
                record=record_id,
                field="attributes",
            )
        return {"attributes": f"{attributes[0]}_{attributes[1]}"}


# --------------------------------------------------------------------------------------------------
# Order perturbations
# --------------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------------
# COCO-Order / Flickr30k-Order
# --------------------------------------------------------------------------------------------------

SKIP_IDENTICAL = "order: perturbation identical to the true caption (ARO's argmax scores it for the true one)"
SKIP_NO_NEGATIVE = "order: every perturbation identical to the true caption"
_ORDER_ROLES = ("true", *TextShuffler.PERTURBATIONS)
MIEB_HARD_TEXTS = ("hard_text_1", "hard_text_2", "hard_text_3", "hard_text_4")


class _Order(_KarpathyBenchmark):
    protocols = ("i2t-top1",)
    subsets = SPLITS

    def shuffler(self) -> TextShuffler:
        shuffler = TextShuffler(
            option_choice(self.options, "pos_tagger", POS_TAGGERS, "auto"),
            option_choice(self.options, "tokenizer", TOKENIZERS, "auto"),
        )
        if not shuffler.is_aro:
            log.warning(
                "%s: perturbations use POS tagger %s and tokenizer %s, not ARO's spaCy en_core_web_sm + "
                "nltk.word_tokenize; results approximate ARO's %s",
                self.name,
                shuffler.pos_tagger,
                shuffler.tokenizer,
                self.name,
            )
        return shuffler

    def _mieb(self) -> list[Path] | None:
        """MTEB's parquet files with option ``perturbations=mieb``; None for ARO's perturbations."""
        if option_choice(self.options, "perturbations", ("aro", "mieb"), "aro") == "aro":
            return None
        if self._split() != "test":
            raise ConfigError(f"{self.name}: MTEB's mirror (perturbations=mieb) holds the test split only")
        return find_parquet(self.root, MIEB_PARQUET, what=f"MTEB {self.name} (fetch it with --part mieb)")

    def data_files(self) -> list[Path]:
        return self._mieb() or [self._annotation()]

    def _mieb_cases(self, files: list[Path]) -> Iterator[Case]:
        tags = {"subset": "test", "dataset": self.dataset, "perturbations": "mieb"}
        columns = ("correct_caption", *MIEB_HARD_TEXTS)
        truth_cache: dict[int, np.ndarray] = {}
        n = 0
        for path, row, record in iter_rows(files, columns, ("images",)):
            self.report.records += 1
            where = f"row {row}"
            true = field(record, "correct_caption", str, file=path, record_id=where)
            texts, roles = [true], ["true"]
            for column in MIEB_HARD_TEXTS:
                text = field(record, column, str, file=path, record_id=where)
                if text == true:
                    self.report.skip(SKIP_IDENTICAL)
                    continue
                texts.append(text)
                roles.append(column)
            if len(texts) == 1:
                self.report.skip(SKIP_NO_NEGATIVE)
                n += 1
                continue
            truth = truth_cache.get(len(texts))
            if truth is None:
                truth = truth_cache[len(texts)] = frozen_truth([[True] + [False] * (len(texts) - 1)])
            image: ImageRef = record["images"]
            yield Case(id=f"mieb/{n}", texts=tuple(texts), truth=truth, images=(image,), tags=dict(tags),
                       roles=tuple(roles))
            n += 1

    def cases(self, subset: str | None = None) -> Iterator[Case]:
        self.check_subset(subset)
        self.report = LoadReport()
        files = self._mieb()
        if files is not None:
            yield from self._mieb_cases(files)
            return
        split = self._split()
        ann = self._annotation()
        records = read_karpathy(ann)
        base = self._image_root(ann)
        seed = option_int(self.options, "seed", 0)
        max_words = option_int(self.options, "max_words", 30)
        shuffler = self.shuffler()
        keep_identical = self.ties == "argmax"  # ARO's argmax credits the tie to the true caption, listed first
        tags = {
            "subset": split,
            "dataset": self.dataset,
            "pos_tagger": shuffler.pos_tagger,
            "tokenizer": shuffler.tokenizer,
            "seed": str(seed),
        }
        truth_cache: dict[int, np.ndarray] = {}
        for i, (image, captions) in enumerate(records):
            ref = FileImage(base / image)
            for j, caption in enumerate(captions):
                self.report.records += 1
                rng = np.random.default_rng([seed, i, j])
                true = pre_caption(caption, max_words)
                if not true.strip():
                    raise DataError(
                        f"caption {j} is empty after pre_caption: {caption!r:.60}",
                        file=ann,
                        record=i,
                        field="caption",
                    )
                texts, roles = [true], ["true"]
                for role, text in zip(TextShuffler.PERTURBATIONS, shuffler.perturb(caption, rng), strict=True):
                    text = pre_caption(text, max_words)
                    if text == true and not keep_identical:
                        self.report.skip(SKIP_IDENTICAL)
                        continue
                    texts.append(text)
                    roles.append(role)
                if len(texts) == 1:
                    self.report.skip(SKIP_NO_NEGATIVE)
                    continue
                truth = truth_cache.get(len(texts))
                if truth is None:
                    truth = truth_cache[len(texts)] = frozen_truth([[True] + [False] * (len(texts) - 1)])
                yield Case(
                    id=f"{image}#{j}",
                    texts=tuple(texts),
                    truth=truth,
                    images=(ref,),
                    tags=dict(tags),
                    roles=tuple(roles),
                )


_ORDER_LAYOUT = """\
DIR/{file} (BLIP/ARO Karpathy split; option split=val reads the _val file; DIR may be the file)
  [{{"image": "<path relative to DIR>", "caption": [5 captions], ...}}]
images: DIR/<image>, or option images=PATH as the image root
case: one per (image, caption): 1 image x 5 texts [true, shuffle_nouns_and_adj,
  shuffle_allbut_nouns_and_adj, shuffle_within_trigrams, shuffle_trigrams] (roles), all through BLIP
  pre_caption(max_words=30); a perturbation equal to the true caption is dropped (report.skipped),
  or kept with --ties argmax (ARO's argmax == 0 credits the tie to the true caption);
  id <image>#<caption index>
options: seed (default 0; rng = default_rng([seed, image index, caption index])),
  pos_tagger auto|spacy|heuristic, tokenizer auto|nltk|regex (ARO = spacy + nltk; the others are
  labelled approximations, recorded in tags pos_tagger / tokenizer)
tags: subset = the split, dataset, pos_tagger, tokenizer, seed
option perturbations=mieb: MTEB's fixed perturbations from DIR/mieb/data/test-*.parquet (spotdiff data
  fetch NAME --part mieb), columns images, correct_caption, hard_text_1..4; id mieb/<row>"""


@BENCHMARKS.register("aro-coco-order")
class AroCocoOrder(_Order):
    name = "aro-coco-order"
    dataset = "coco"
    layout = _ORDER_LAYOUT.format(file="coco_karpathy_test.json")
    description = (
        "ARO COCO-Order: COCO Karpathy test captions against 4 word-order perturbations, I2T top-1 "
        "(Yuksekgonul et al., ARO, ICLR 2023)"
    )
    metadata = BenchmarkMetadata(
        paper=_PAPER,
        reference=_REFERENCE,
        citation=CITATION,
        main_score=("i2t-top1", "accuracy"),
        reproduces="ARO Table 1 (COCO-Order); VisualGPTScore Table 2b",
        license="COCO annotations CC BY 4.0; images under Flickr terms",
        ties=_ORDER_TIES,
    )


@BENCHMARKS.register("aro-flickr-order")
class AroFlickrOrder(_Order):
    name = "aro-flickr-order"
    dataset = "flickr"
    layout = _ORDER_LAYOUT.format(file="flickr30k_test.json")
    description = (
        "ARO Flickr30k-Order: Flickr30K test captions against 4 word-order perturbations, I2T top-1 "
        "(Yuksekgonul et al., ARO, ICLR 2023)"
    )
    metadata = BenchmarkMetadata(
        paper=_PAPER,
        reference=_REFERENCE,
        citation=CITATION,
        main_score=("i2t-top1", "accuracy"),
        reproduces="ARO Table 1 (Flickr30k-Order); VisualGPTScore Table 2b",
        license="Flickr30K: non-commercial research use (form)",
        ties=_ORDER_TIES,
    )
