"""Tiny random models, built offline from configs and saved like a user's checkpoint.

Every ``make_tiny_*`` function writes a complete model folder into ``out_dir`` and returns what a
spec string needs; the same seed gives byte-identical weights. Sizes and tokenizers: docs/testing.md.
"""

from __future__ import annotations

import json
import string
from pathlib import Path

from spotdiff.processes import can_fork, fork_map

__all__ = [
    "IMAGE_SIZE",
    "TINY_WORDS",
    "make_tiny_blip_retrieval",
    "make_tiny_clip",
    "make_tiny_image_processor",
    "make_tiny_open_clip",
    "make_tiny_sentence_transformer",
    "make_tiny_siglip",
    "make_tiny_tokenizer",
    "make_tiny_xclip",
    "tiny_images",
    "write_photos",
]

#: Side of the square images every tiny vision tower takes.
IMAGE_SIZE = 32

#: Whole-word entries of the tiny vocabulary (everything else is spelled out letter by letter).
_WORDS = (
    "a an the of on in under over left right above below next to and with is are there photo picture "
    "image cat cats dog dogs man woman person people child horse car bus tree table chair cup bowl "
    "red green blue yellow black white small large big little two three one four many some no "
    "sitting standing running eating holding riding near behind front top bottom grass water sky "
    "street road house room kitchen plate pizza ball shirt hat"
)
TINY_WORDS = tuple(_WORDS.split())

_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID = range(5)


def _vocab() -> list[str]:
    chars = string.ascii_lowercase + string.digits
    vocab = list(_SPECIALS) + list(chars) + list(string.punctuation) + [f"##{c}" for c in chars]
    vocab += [w for w in TINY_WORDS if w not in vocab]
    return vocab


def make_tiny_tokenizer(out_dir: str | Path, *, max_length: int = 32):
    """Write a small BERT WordPiece tokenizer into ``out_dir`` and return it.

    Ids: ``[PAD]`` 0, ``[UNK]`` 1, ``[CLS]`` 2, ``[SEP]`` 3, ``[MASK]`` 4; ``len(tokenizer)`` is the
    vocabulary size to give the model config.
    """
    from transformers import BertTokenizer

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    vocab = {token: i for i, token in enumerate(_vocab())}
    tokenizer = BertTokenizer(vocab=vocab, do_lower_case=True, model_max_length=max_length)
    tokenizer.save_pretrained(out)
    return tokenizer


def make_tiny_image_processor(
    out_dir: str | Path | None = None, *, kind: str = "clip", size: int = IMAGE_SIZE
):
    """A ``CLIPImageProcessor`` (``kind="clip"``), ``SiglipImageProcessor`` or ``BlipImageProcessor``
    taking ``size``-pixel images; saved into ``out_dir`` when given.

    Args:
        out_dir: where to save it; None: not saved.
        kind: ``clip``, ``siglip`` or ``blip``.
        size: the image side in pixels.
    """
    from transformers import BlipImageProcessor, CLIPImageProcessor, SiglipImageProcessor

    if kind == "clip":
        proc = CLIPImageProcessor(size={"shortest_edge": size}, crop_size={"height": size, "width": size})
    elif kind == "siglip":
        proc = SiglipImageProcessor(size={"height": size, "width": size})
    elif kind == "blip":
        proc = BlipImageProcessor(size={"height": size, "width": size})
    else:
        raise ValueError(f"unknown image processor kind {kind!r}")
    if out_dir is not None:
        proc.save_pretrained(out_dir)
    return proc


def _tower(**overrides):
    cfg = {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
    }
    cfg.update(overrides)
    return cfg


def _text_tower(tokenizer, max_positions: int = 32, **overrides):
    """A :func:`_tower` over ``tokenizer``'s vocabulary, padded with [PAD]."""
    return _tower(vocab_size=len(tokenizer), max_position_embeddings=max_positions, pad_token_id=PAD_ID, **overrides)


#: the vision tower's input: ``IMAGE_SIZE`` pixels in 8 x 8 patches
_VISION = {"image_size": IMAGE_SIZE, "patch_size": 8}


def make_tiny_clip(out_dir: str | Path, *, seed: int = 0, projection_dim: int = 16) -> Path:
    """Save a tiny random ``CLIPModel`` (+ tokenizer, image processor) into ``out_dir``.

    Load it with the spec ``hf-clip:{returned path}``.

    Args:
        out_dir: the model folder.
        seed: the weights' seed.
        projection_dim: the embedding size.
    """
    import torch
    from transformers import CLIPConfig, CLIPModel

    out = Path(out_dir)
    tokenizer = make_tiny_tokenizer(out)
    config = CLIPConfig(
        text_config=_text_tower(tokenizer, bos_token_id=CLS_ID, eos_token_id=SEP_ID),  # pooled at the first [SEP]
        vision_config=_tower(**_VISION, num_channels=3),
        projection_dim=projection_dim,
    )
    torch.manual_seed(seed)
    CLIPModel(config).eval().save_pretrained(out)
    make_tiny_image_processor(out, kind="clip")
    return out


def make_tiny_siglip(out_dir: str | Path, *, seed: int = 0) -> Path:
    """Save a tiny random ``SiglipModel`` (+ tokenizer, image processor) into ``out_dir``.

    Its text tower pools the last position, so texts are padded to ``max_position_embeddings``
    (16). Load it with ``hf-siglip:{returned path}``.
    """
    import torch
    from transformers import SiglipConfig, SiglipModel

    out = Path(out_dir)
    tokenizer = make_tiny_tokenizer(out, max_length=16)
    config = SiglipConfig(
        text_config=_text_tower(tokenizer, 16, bos_token_id=CLS_ID, eos_token_id=SEP_ID),
        vision_config=_tower(**_VISION, num_channels=3),
    )
    torch.manual_seed(seed)
    SiglipModel(config).eval().save_pretrained(out)
    make_tiny_image_processor(out, kind="siglip")
    return out


def make_tiny_xclip(out_dir: str | Path, *, seed: int = 0, num_frames: int = 4) -> Path:
    """Save a tiny random ``XCLIPModel`` (+ tokenizer, ``VideoMAEImageProcessor``) into ``out_dir``: videos of
    ``num_frames`` frames of 32 pixels, a one-layer multi-frame integration transformer and prompt generator.

    Load it with ``xclip:{returned path}``.

    Args:
        out_dir: the model folder.
        seed: the weights' seed.
        num_frames: the frames a video gives the model.
    """
    import torch
    from transformers import VideoMAEImageProcessor, XCLIPConfig, XCLIPModel, XCLIPProcessor

    out = Path(out_dir)
    tokenizer = make_tiny_tokenizer(out)
    mit = {"mit_hidden_size": 16, "mit_intermediate_size": 32, "mit_num_hidden_layers": 1, "mit_num_attention_heads": 2}
    config = XCLIPConfig(
        text_config=_text_tower(tokenizer, bos_token_id=CLS_ID, eos_token_id=SEP_ID),
        vision_config=_tower(**_VISION, num_frames=num_frames, **mit),
        projection_dim=16,  # the multi-frame integration transformer runs at mit_hidden_size = projection_dim
        prompt_layers=1,
        prompt_num_attention_heads=2,
    )
    torch.manual_seed(seed)
    XCLIPModel(config).eval().save_pretrained(out)
    square = {"height": IMAGE_SIZE, "width": IMAGE_SIZE}
    frames = VideoMAEImageProcessor(size={"shortest_edge": IMAGE_SIZE}, crop_size=square)
    XCLIPProcessor(image_processor=frames, tokenizer=tokenizer).save_pretrained(out)
    return out


def make_tiny_blip_retrieval(out_dir: str | Path, *, seed: int = 0) -> Path:
    """Save a tiny random ``BlipForImageTextRetrieval`` (ITM head + ITC projections) into ``out_dir``.

    Load it with ``blip-itm:{path}`` (match probabilities) or ``blip-itc:{path}`` (embeddings).
    """
    import torch
    from transformers import BlipConfig, BlipForImageTextRetrieval

    out = Path(out_dir)
    tokenizer = make_tiny_tokenizer(out)
    config = BlipConfig(
        text_config=_text_tower(tokenizer, encoder_hidden_size=32, bos_token_id=CLS_ID, sep_token_id=SEP_ID),
        # BLIP's default vision initializer_range (1e-10) leaves a random tower near zero
        vision_config=_tower(**_VISION, initializer_range=0.02),
        projection_dim=16,
        image_text_hidden_size=16,
    )
    torch.manual_seed(seed)
    BlipForImageTextRetrieval(config).eval().save_pretrained(out)
    make_tiny_image_processor(out, kind="blip")
    return out


#: Name under which :func:`make_tiny_open_clip` registers its architecture (the JSON file's stem).
OPEN_CLIP_ARCH = "spotdiff-tiny-clip"


def make_tiny_open_clip(out_dir: str | Path, *, seed: int = 0) -> tuple[Path, Path]:
    """Save a tiny random open_clip ``CLIP`` model into ``out_dir``; return (config JSON, checkpoint).

    ``out_dir`` gets ``spotdiff-tiny-clip.json`` (an open_clip model config: embed_dim 16, ViT width
    32 / patch 8 on 32-px images, 2-layer text transformer with the bundled CLIP BPE tokenizer) and
    ``tiny_open_clip.pt`` (a ``state_dict``), plus the ``open_clip_config.json`` and
    ``open_clip_model.safetensors`` of open_clip's own ``local-dir:`` layout. Load it with
    ``open-clip:{config}@{checkpoint}`` or ``open-clip:local-dir:{out_dir}``.
    """
    import open_clip
    import torch
    from safetensors.torch import save_file

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model_cfg = {
        "embed_dim": 16,
        "vision_cfg": {"image_size": IMAGE_SIZE, "layers": 2, "width": 32, "head_width": 16, "patch_size": 8},
        "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 2},
    }
    config_path = out / f"{OPEN_CLIP_ARCH}.json"
    config_path.write_text(json.dumps(model_cfg, indent=2), encoding="utf-8")
    torch.manual_seed(seed)
    model = open_clip.CLIP(**model_cfg).eval()
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    ckpt = out / "tiny_open_clip.pt"
    torch.save(state, ckpt)
    save_file(state, out / "open_clip_model.safetensors")
    (out / "open_clip_config.json").write_text(
        json.dumps({"model_cfg": model_cfg, "preprocess_cfg": {}}, indent=2), encoding="utf-8"
    )
    return config_path, ckpt


def make_tiny_sentence_transformer(out_dir: str | Path, *, seed: int = 0) -> Path:
    """Save a tiny random BERT + mean pooling ``SentenceTransformer`` into ``out_dir``.

    Load it with ``sentence-transformers:{returned path}``.
    """
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import BertConfig, BertModel

    out = Path(out_dir)
    base = out / "_base"
    tokenizer = make_tiny_tokenizer(base)
    config = BertConfig(**_text_tower(tokenizer))
    torch.manual_seed(seed)
    BertModel(config).eval().save_pretrained(base)
    try:
        from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    except ImportError:  # sentence-transformers < 6
        from sentence_transformers.models import Pooling, Transformer

    word = Transformer(str(base), max_seq_length=32)
    pooling = Pooling(word.get_embedding_dimension(), pooling_mode="mean")
    SentenceTransformer(modules=[word, pooling], device="cpu").save(str(out))
    for f in base.iterdir():
        f.unlink()
    base.rmdir()
    return out


def tiny_images(n: int = 4, *, size: int = 40, seed: int = 0):
    """``n`` distinct RGB PIL images (random noise plus a coloured square), ``size`` pixels wide.

    Args:
        n: the number of images.
        size: their side in pixels.
        seed: the random seed.
    """
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    images = []
    for i in range(n):
        arr = rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8)
        arr[i % size : i % size + size // 3, : size // 2] = [(60 * i) % 256, 200, (255 - 40 * i) % 256]
        images.append(Image.fromarray(arr, "RGB"))
    return images


def _write_photo(job: tuple[Path, int, int, tuple[int, int]]) -> Path:
    """Photo ``i`` of :func:`write_photos` (one item of its ``fork_map``)."""
    import numpy as np
    from PIL import Image

    folder, i, seed, (width, height) = job
    rng = np.random.default_rng([seed, i])
    cells = Image.fromarray(rng.integers(0, 256, (12, 16, 3), dtype=np.uint8))
    scene = cells.resize((width, height), Image.Resampling.BICUBIC)
    pixels = np.asarray(scene, dtype=np.int16) + rng.normal(0, 6, (height, width, 3)).astype(np.int16)
    path = folder / f"{i:05d}.jpg"
    Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(path, quality=90)
    return path


def write_photos(
    folder: str | Path, n: int, *, start: int = 0, seed: int = 0, size: tuple[int, int] = (640, 480), workers: int = 1
) -> list[Path]:
    """Photo-like JPEG files ``folder/00000.jpg`` ... (quality 90): smooth random scenes with sensor-like noise,
    about 75 KB each at COCO's 640 x 480. Photo ``i`` depends on ``seed`` and ``i`` alone, so a set written in
    parts (``start``) or by several processes is the same file for file.

    Args:
        folder: where to write them (created).
        n: the photos ``0 .. n - 1`` whose paths are returned.
        start: the first one to write (those before it are already there).
        seed: the random seed.
        size: width and height in pixels.
        workers: processes that write them (forked, :func:`spotdiff.processes.fork_map`; one where forking is
            not available).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    jobs = [(folder, i, seed, tuple(size)) for i in range(start, n)]
    if workers > 1 and len(jobs) > 1 and can_fork():
        fork_map(_write_photo, jobs, workers, chunksize=max(1, len(jobs) // (4 * workers)))
    else:
        for job in jobs:
            _write_photo(job)
    return [folder / f"{i:05d}.jpg" for i in range(n)]
