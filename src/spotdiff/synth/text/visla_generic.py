"""VISLA Generic triplets written and validated by a chat LM (VISLA Sec. 3.2, App. A.2-A.3).

From (P1, N) pairs such as SugarCrepe's, a chat LM primed with the paper's role-play prompt (Fig. 2),
rules and demonstrations (Fig. 4) writes a second positive P2; the evaluator prompt (Fig. 5) judges
whether P2 keeps P1's meaning and may rewrite it. Answers are parsed strictly and every failure is
counted by reason. The output is VISLA's published ``Generic_VISLA.tsv`` plus a review sheet
(:mod:`spotdiff.review.sheet`) that a person edits, read back by ``--from-review``.
"""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spotdiff.benchmarks.visla import VislaGeneric, VislaSpatial
from spotdiff.errors import ConfigError, DataError
from spotdiff.jsonio import write_jsonl
from spotdiff.review.kinds import VISLA_IMAGE_FIELDS as IMAGE_FIELDS
from spotdiff.review.kinds import VISLA_SPATIAL_TEXT_FIELDS as SPATIAL_TEXT_FIELDS
from spotdiff.review.kinds import VISLA_TEXT_FIELDS as TEXT_FIELDS
from spotdiff.review.sheet import RULES as REVIEW_RULES
from spotdiff.review.sheet import ReviewItem, copy_images, header, read_reviews, sheet_image, write_review
from spotdiff.synth.run import make_items, resumable

TSV_NAME = VislaGeneric.file_name
HEADER = VislaGeneric.header
DEFAULT_LLM = "smollm2"

#: VISLA Fig. 2
ROLE_PLAY = (
    "You are an instruction-following DataGenAI. Your expertise lies in accurately interpreting and generating "
    "datasets based on given instructions. Your responses are expected to be precise and limited to the "
    "required output."
)

#: VISLA Fig. 4 (App. A.2): rules, then demonstrations; the caption is put in the last ``Input:``
RULES = """Rules Instruction: Given an input sentence describing an image caption, follow these steps:

1. Rephrase each provided sentence, focusing on preserving the original spatial relationship.
2. Pay careful attention to the positioning of objects or entities in relation to one another.
3. Ensure that the meaning remains consistent and that both the original and paraphrased sentences \
maintain logical coherence and grammatical correctness."""

DEMONSTRATIONS = """Demonstration: For example,

Input: Cat is under the table.

Paraphrase Idea: Rephrase the sentence to convey that the table is positioned above the cat.

Paraphrased: The table is above the cat.

Another example,

Input: The plane flies below the bright white clouds.

Paraphrase Idea: Ensure the spatial context is maintained by stating that the bright white clouds are \
situated above the flying plane.

Paraphrased: The plane flies below the bright white clouds.

Similarly,

Input: The third balcony is below the fourth balcony from the bottom.

Paraphrase Idea: Emphasize the consistent spatial arrangement while indicating that the fourth balcony is \
positioned above the third balcony from the bottom.

Paraphrased: The fourth balcony is above the third balcony from the bottom.

Remember to keep the meaning intact, and both the original and paraphrased sentences should be logically \
coherent and grammatically correct.

Lastly, for the final example:

Input: {caption}

Paraphrase Idea: Focus on replicating the spatial arrangement while maintaining the original meaning of the \
sentence, correct grammar, same meaning.

Paraphrased:"""

#: VISLA Fig. 5 (App. A.3), the demonstrations as printed
VALIDATION = """Instruction: Given a pair of captions your job is to check if the second caption is consistent \
with the first caption. If it is consistent output the second caption as is, otherwise rephrase the second \
caption to be consistent with the first sentence. We are especially interested in spatial consistency and \
spatial relationship of the objects with each other.

Demonstrations: examples,

Caption 1: A guy holding a skateboard is speaking into a microphone.

Caption 2: The guy holding the microphone is speaking into the skateboard.

isConsistent: No, you cannot speak into a skateboard.

newCaption: The guy is speaking into the microphone while holding a skateboard.

Caption 1: A family are playing frisbee on the beach.

Caption 2: The frisbee is being played on the beach by a family.

isConsistent: Yes, caption 2 is consistent as it is the same caption written in passive voice. new caption \
is the same as caption 2.

newCaption: A family are playing frisbee on the beach.

caption 1: A stop sign vandalized with an "eating animals" sticker below the word "stop."

caption 2: The stop sign is below an "eating animals" sticker.

isConsistent: The stop cannot be below and above the sticker at the same time.

newCaption: The word "stop" sign is above an "eating animals" sticker.

caption 1: There is a phone on top of a calculator.

caption 2: A calculator lies beneath the phone.

isConsistent: Yes, the sentences are semantically equivalent. new caption is same as caption 2.

newCaption: A calculator lies beneath the phone.

Now the same for the below caption only.

caption 1: {caption1}

caption 2: {caption2}

isConsistent:"""

#: a chat: messages (``role``, ``content``) in, the assistant's answer out
Chat = Callable[[list[dict[str, str]]], str]


class ParseFailure(ValueError):
    """An LM answer that does not follow the prompt's format; ``reason`` is counted in the summary."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Pair:
    """One (P1, N) pair: an image file name, its caption and a hard negative."""

    id: str
    image: str
    caption: str
    negative: str


def read_pairs(path: Path) -> list[Pair]:
    """(P1, N) pairs from a SugarCrepe JSON file (``{"0": {"filename", "caption", "negative_caption"}}``).

    Args:
        path: the JSON file.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read JSON: {exc}", file=path) from None
    if not isinstance(data, dict) or not data:
        raise DataError("expected a non-empty JSON object of SugarCrepe records", file=path)
    pairs = []
    for key, rec in data.items():
        if not isinstance(rec, dict):
            raise DataError("expected an object", file=path, record=key)
        values = {}
        for name in ("filename", "caption", "negative_caption"):
            value = rec.get(name)
            if not isinstance(value, str) or not value.strip():
                raise DataError("missing or empty string", file=path, record=key, field=name)
            values[name] = " ".join(value.split())
        pairs.append(Pair(str(key), values["filename"], values["caption"], values["negative_caption"]))
    return pairs


def generation_messages(caption: str) -> list[dict[str, str]]:
    """The chat that asks for a second positive: Fig. 2 as the system turn, Fig. 4 as the user turn."""
    return [
        {"role": "system", "content": ROLE_PLAY},
        {"role": "user", "content": RULES + "\n\n" + DEMONSTRATIONS.format(caption=caption)},
    ]


def validation_messages(caption1: str, caption2: str) -> list[dict[str, str]]:
    """The chat that judges a second positive (Fig. 5), after the role-play system turn."""
    return [
        {"role": "system", "content": ROLE_PLAY},
        {"role": "user", "content": VALIDATION.format(caption1=caption1, caption2=caption2)},
    ]


_LABEL = re.compile(r"^\s*(paraphrased|newcaption|new caption)\s*:\s*", re.IGNORECASE)


def _sentence(text: str) -> str:
    """One caption from an answer line: label, surrounding quotes and brackets dropped."""
    text = _LABEL.sub("", text).strip().strip("\"'*[]` ").strip()
    return " ".join(text.split())


def parse_paraphrase(answer: str, caption: str) -> str:
    """The second positive in a generation answer (the first non-empty line), or :class:`ParseFailure`.

    >>> parse_paraphrase(" The table is above the cat.\\n\\nInput: ...", "Cat is under the table.")
    'The table is above the cat.'

    Args:
        answer: the LM's answer to :func:`generation_messages`.
        caption: P1 (an answer that only repeats it is not a second positive).
    """
    lines = [ln for ln in answer.splitlines() if ln.strip()]
    if not lines:
        raise ParseFailure("empty answer")
    text = _sentence(lines[0])
    if not text:
        raise ParseFailure("empty answer")
    if re.match(r"^(input|paraphrase idea)\s*:", text, re.IGNORECASE):
        raise ParseFailure("answer starts with another prompt field")
    if not re.search(r"[A-Za-z]", text):
        raise ParseFailure("no words in the answer")
    if text.rstrip(".").lower() == caption.rstrip(".").lower():
        raise ParseFailure("paraphrase repeats P1")
    return text


def parse_validation(answer: str) -> tuple[bool, str | None]:
    """``(consistent, new caption)`` from an evaluator answer (Fig. 5), or :class:`ParseFailure`.

    The answer must start with Yes or No; a No needs a ``newCaption:`` line (the rewrite).

    >>> parse_validation(" No, you cannot speak into a skateboard.\\n\\nnewCaption: The guy speaks.")
    (False, 'The guy speaks.')
    >>> parse_validation(" Yes, the same.")
    (True, None)
    """
    match = re.match(r"\s*(yes|no)\b", answer, re.IGNORECASE)
    if match is None:
        raise ParseFailure("isConsistent is not Yes or No")
    consistent = match.group(1).lower() == "yes"
    new = None
    for line in answer.splitlines():
        if re.match(r"^\s*new\s*caption\s*:", line, re.IGNORECASE):
            new = _sentence(line) or None
            break
    if not consistent and new is None:
        raise ParseFailure("No without a newCaption")
    return consistent, new


class ChatLM:
    """Greedy chat with a causal ``lm:`` model (any ``lm:`` spec or alias; default the SmolLM2).

    Args:
        spec: the model spec, loaded by :func:`spotdiff.scorers.load_scorer`.
        max_new_tokens: the most tokens an answer may have.
        device: ``cpu``, ``cuda`` or ``auto``.
        seed: the torch seed.
    """

    def __init__(self, spec: str = DEFAULT_LLM, *, max_new_tokens: int = 48, device: str = "auto", seed: int = 0):
        from spotdiff.scorers import ScorerOptions, load_scorer
        from spotdiff.scorers.lm import LanguageModelScorer

        self.lm = load_scorer(spec, ScorerOptions(device=device, seed=seed))
        if not isinstance(self.lm, LanguageModelScorer):
            raise ConfigError(f"--llm {spec}: a causal lm: model is needed (got {self.lm.spec})")
        self.lm.check_chat(f"--llm {spec}")
        self.max_new_tokens = int(max_new_tokens)

    def __call__(self, messages: list[dict[str, str]]) -> str:
        return self.lm.chat(messages, self.max_new_tokens)

    def identity(self) -> dict[str, Any]:
        """The model's identity (spec, class, digests) and the decoding settings."""
        ident = self.lm.identity()
        return {k: ident[k] for k in ("spec", "class", "weights")} | {
            "decoding": "greedy",
            "max_new_tokens": self.max_new_tokens,
        }


def triplet(pair: Pair, chat: Chat) -> dict[str, Any]:
    """Generate and validate P2 for one pair; the record lists the raw answers and any failure.

    ``verdict`` is ``consistent`` (the evaluator kept P2), ``rewritten`` (it answered No and its
    ``newCaption`` became P2) or ``failed: <stage>: <reason>``; ``failure`` is the reason or None.
    """
    rec: dict[str, Any] = {"id": pair.id, "image": pair.image, "p1": pair.caption, "p2": "", "n": pair.negative}
    rec["generated"] = chat(generation_messages(pair.caption))
    try:
        p2 = parse_paraphrase(rec["generated"], pair.caption)
        if p2.rstrip(".").lower() == pair.negative.rstrip(".").lower():
            raise ParseFailure("paraphrase repeats N")
    except ParseFailure as exc:
        return rec | {"validated": None, "verdict": f"failed: generation: {exc.reason}", "failure": exc.reason}
    rec["p2"] = p2
    rec["validated"] = chat(validation_messages(pair.caption, p2))
    try:
        consistent, new = parse_validation(rec["validated"])
        if not consistent and new is not None and new.rstrip(".").lower() == pair.caption.rstrip(".").lower():
            raise ParseFailure("newCaption repeats P1")
    except ParseFailure as exc:
        return rec | {"verdict": f"failed: validation: {exc.reason}", "failure": exc.reason}
    if consistent:
        return rec | {"verdict": "consistent", "failure": None}
    return rec | {"p2": new, "verdict": "rewritten", "failure": None}


def write_tsv(path: Path, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A VISLA TSV as published: tab-separated, no quoting, CRLF line ends, UTF-8.

    Args:
        path: the file.
        header: the column names.
        rows: the cells of each data row (no tab or line break in any).
    """
    lines = ["\t".join(header)]
    for k, cells in enumerate(rows, start=1):
        if any("\t" in c or "\n" in c or "\r" in c for c in cells):
            raise DataError("a cell holds a tab or line break", file=path, record=f"data row {k} ({cells[0]})")
        lines.append("\t".join(cells))
    Path(path).write_bytes(("\r\n".join(lines) + "\r\n").encode("utf-8"))


def _review_item(rec: dict[str, Any]) -> ReviewItem:
    details = f"generation answer: {rec['generated']!r}"
    if rec.get("validated") is not None:
        details += f"\nvalidation answer: {rec['validated']!r}"
    return ReviewItem(
        id=rec["id"],
        images={"image": f"images/{rec['image']}"},
        texts={"p1": rec["p1"], "p2": rec["p2"], "n": rec["n"]},
        verdict=rec["verdict"],
        accept=rec["failure"] is None,
        details=details,
    )


@resumable
def write_generic(
    out: Path,
    pairs: Sequence[Pair],
    chat: Chat,
    *,
    images: Path | None = None,
    llm: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write VISLA Generic triplets for ``pairs`` under ``out``; return the summary.

    Writes ``Generic_VISLA.tsv`` (the triplets the evaluator passed), ``review.csv`` and
    ``review.html`` (every pair, with its verdict), ``generations.jsonl`` (the raw answers) and,
    with ``images``, copies of the pairs' images under ``out/images``.

    Args:
        out: the output folder.
        pairs: the (P1, N) pairs.
        chat: the LM (:class:`ChatLM` or any callable from messages to an answer).
        images: the folder holding the pairs' images; None: the images are not copied.
        llm: the LM's identity, recorded in the summary.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if images is not None:
        copy_images([p.image for p in pairs], images, out)
    records = make_items(out, lambda p: triplet(p, chat), list(pairs), key=lambda p: f"pair {p.id}", desc="pairs")
    passed = [r for r in records if r["failure"] is None]
    write_tsv(out / TSV_NAME, HEADER, [[r["image"], r["p1"], r["p2"], r["n"]] for r in passed])
    write_jsonl(out / "generations.jsonl", records)
    write_review(
        out,
        [_review_item(r) for r in records],
        image_fields=IMAGE_FIELDS,
        text_fields=TEXT_FIELDS,
        title="VISLA Generic: review the LLM's second positives",
    )
    stages = Counter(r["verdict"].split(":")[1].strip() for r in records if r["failure"] is not None)
    return {
        "engine": "visla",
        "benchmark": "visla-generic",
        "mode": "generic (VISLA Sec. 3.2: LLM-written P2, LLM-validated; prompts of Fig. 2, 4, 5)",
        "llm": llm,
        "pairs": len(pairs),
        "triplets": len(passed),
        "verdicts": dict(sorted(Counter(r["verdict"] for r in records).items())),
        "parse_failures": {"generation": stages.get("generation", 0), "validation": stages.get("validation", 0)},
    }


def _sheet_kind(review: Path) -> str:
    """``spatial`` when the sheet's header has the Spatial columns (``visla-vsr``), else ``generic``."""
    try:
        with review.open(encoding="utf-8", newline="") as fh:
            first = next(csv.reader(fh), [])
    except OSError as exc:
        raise DataError(f"cannot read the review sheet: {exc}", file=review) from None
    return "spatial" if [c.strip() for c in first] == header(IMAGE_FIELDS, SPATIAL_TEXT_FIELDS) else "generic"


def write_from_review(out: Path, reviews: Path | Sequence[Path], rule: str = REVIEW_RULES[0]) -> dict[str, Any]:
    """Write the VISLA TSV from the accepted rows of reviewed sheets; return the summary.

    A sheet of ``visla --pairs`` gives ``Generic_VISLA.tsv``; one of ``visla-vsr`` (with the
    ``irrelevant`` column) gives ``Spatial_VISLA.tsv``. The images the accepted rows name are copied
    from beside the sheet when they are there.

    Args:
        out: the output folder.
        reviews: the edited ``review.csv``, or several reviewers' files of it.
        rule: how several reviewers' decisions make one (:data:`spotdiff.review.sheet.RULES`).
    """
    out = Path(out)
    paths = [Path(reviews)] if isinstance(reviews, (str, Path)) else [Path(r) for r in reviews]
    kinds = {_sheet_kind(p) for p in paths}
    if len(kinds) > 1:
        raise DataError("the files mix Generic and Spatial sheets; give one sheet's reviews", file=paths[0].parent)
    (kind,) = kinds
    fields = SPATIAL_TEXT_FIELDS if kind == "spatial" else TEXT_FIELDS
    result = read_reviews(paths, image_fields=IMAGE_FIELDS, text_fields=fields, rule=rule)
    review = paths[0]
    rows, names = [], []
    for k, item in enumerate(result.accepted, start=1):
        name = sheet_image(item, "image", review, k)
        names.append(name)
        rows.append([name, *(item.texts[f] for f in fields)])
    out.mkdir(parents=True, exist_ok=True)
    published = VislaSpatial if kind == "spatial" else VislaGeneric
    write_tsv(out / published.file_name, published.header, rows)
    present = [n for n in names if (review.parent / "images" / n).is_file()]
    if present:
        copy_images(present, review.parent / "images", out, sheet=review)
    return {
        "engine": "visla",
        "benchmark": f"visla-{kind}",
        "mode": f"{kind}, from a review",
        **result.summary(),
        "accepted": len(rows),
        "images_copied": len(set(present)),
        "images_missing": len(set(names) - set(present)),
    }
