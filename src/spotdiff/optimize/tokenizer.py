"""A WordPiece vocabulary of a caption corpus, for models trained from scratch (``spotdiff demo``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from spotdiff.jsonio import iter_jsonl

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[DEC]")


def build_tokenizer(captions: Sequence[Path], out: Path, *, max_length: int = 64) -> dict:
    """A lowercase BERT WordPiece tokenizer whose words are the captions' words.

    Vocabulary: the special tokens (``[DEC]`` is BLIP's decoder BOS), every word of the captions
    (BERT basic tokenization: lowercase, punctuation split off) and every letter, digit and
    punctuation mark alone and as a word piece (``##x``), so an unseen word is spelled out, never
    ``[UNK]``. Deterministic: words sorted by frequency, then alphabetically.

    Args:
        captions: ``captions.jsonl`` files whose words make the vocabulary.
        out: the folder the tokenizer is saved to.
        max_length: the tokenizer's ``model_max_length``.
    """
    import string
    from collections import Counter

    from tokenizers.normalizers import BertNormalizer
    from tokenizers.pre_tokenizers import BertPreTokenizer
    from transformers import BertTokenizer

    normalizer, pre = BertNormalizer(lowercase=True), BertPreTokenizer()
    counts: Counter = Counter()
    n = 0
    for path in captions:
        for _, row in iter_jsonl(path):
            texts = row.get("captions", row.get("caption"))
            for t in [texts] if isinstance(texts, str) else texts:
                counts.update(w for w, _ in pre.pre_tokenize_str(normalizer.normalize_str(t)))
                n += 1
    chars = string.ascii_lowercase + string.digits + string.punctuation
    vocab = list(SPECIAL_TOKENS)
    seen = set(vocab)
    for word in sorted(counts, key=lambda w: (-counts[w], w)):
        if word not in seen:
            vocab.append(word)
            seen.add(word)
    for piece in [*chars, *(f"##{c}" for c in chars)]:
        if piece not in seen:
            vocab.append(piece)
            seen.add(piece)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tok = BertTokenizer(vocab={t: i for i, t in enumerate(vocab)}, do_lower_case=True, model_max_length=max_length)
    tok.add_special_tokens({"bos_token": "[DEC]"})
    tok.save_pretrained(out)
    return {"vocab_size": len(tok), "words": len(counts), "captions": n}
