"""EqBen's EQ-SD pairs: prompt-to-prompt word-swap editing on Stable Diffusion (EqBen App. B.5, Fig. 15).

"We utilize the open-source checkpoint v1.4 of Stable Diffusion (SD) with prompt-to-prompt image editing
framework [24] to translate two semantic-minimally different captions to a pair of images" (EqBen
Sec. 4.2). Each caption pair (the Fig. 15 templates, each pair once per run:
:func:`spotdiff.synth.canvas.eqben.sd_caption_pairs`) is rendered from one seed by prompt-to-prompt word
swap (:mod:`.p2p`). A scorer the user names then checks each image matches its own caption better
than the other; failures are set aside, and a review sheet takes the human cut the paper made.
Details: docs/synthesis.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from spotdiff.errors import ConfigError
from spotdiff.review.pairs import IMAGE_FIELDS, TEXT_FIELDS
from spotdiff.review.sheet import ReviewItem, write_review
from spotdiff.synth import (
    ENGINES,
    ReviewOptions,
    SynthConfig,
    SynthEngine,
    count_option,
    option,
)
from spotdiff.synth.canvas.eqben import sd_caption_pairs
from spotdiff.synth.diffusion.models import (
    DTYPES,
    Models,
    check_model,
    resolve_device,
    resolve_dtype,
    weights_identity,
)
from spotdiff.synth.diffusion.p2p import render_pair
from spotdiff.synth.eqben_pairs import write_from_review
from spotdiff.synth.output import case_rng, save_png, write_json
from spotdiff.synth.run import make_items, resumable

#: Stable Diffusion v1.4, the model EqBen rendered EQ-SD with (App. B.5)
DEFAULT_EQSD_T2I = "CompVis/stable-diffusion-v1-4"
SUBSET = "eqbensd"
#: the random stream of the pairs' initial latents (the captions draw from ``_CODE["eqbensd"]``)
_LATENTS = 114


def check_pair(scorer: Any, images: tuple[Image.Image, Image.Image], captions: tuple[str, str]) -> dict:
    """EqBen's automatic check: each image scores its own caption above the other caption.

    Args:
        scorer: a :class:`spotdiff.scorers.base.Scorer` (called as ``scorer(images, texts)``).
        images: the two images.
        captions: their two captions.
    """
    s = np.asarray(scorer(list(images), list(captions)), dtype=float)
    passed = bool(s[0, 0] > s[0, 1] and s[1, 1] > s[1, 0])
    return {"passed": passed, "scores": s.round(6).tolist()}


@dataclass(frozen=True)
class EqsdConfig(ReviewOptions, SynthConfig):
    """The options of the ``eqsd`` engine: exactly those it reads."""

    n: int = count_option(10, "caption pairs (each distinct within the run)")
    seed: int = option(0, "random seed (captions and the pairs' latents)", kind="seed")
    image_size: int = option(512, "square image side in pixels", kind="positive")
    t2i: str = option(DEFAULT_EQSD_T2I, "Stable Diffusion model, hub name or folder (EqBen Sec. 4.2: v1.4)")
    steps: int = option(50, "denoising steps", kind="positive")
    cross_replace: float = option(
        0.8,
        "fraction of the steps whose cross-attention maps come from the source caption (prompt-to-prompt word "
        "swap, Hertz et al. Sec. 3.2)",
        kind="fraction",
    )
    self_replace: float = option(
        0.4,
        "fraction of the first steps whose self-attention maps (16 x 16 positions or fewer) come from the source "
        "image, as in Hertz et al.'s word-swap example (AttentionReplace(..., self_replace_steps=0.4)); 0: none",
        kind="fraction",
    )
    check: str | None = option(
        None,
        "the scorer (an eval --model spec) each image must match its own caption better under; failing pairs go "
        "to set_aside.json (default: no check)",
        metavar="MODEL",
    )
    device: str = option("auto", "auto (CUDA when available), cpu or cuda[:N]")
    dtype: str = option(
        "auto", "Stable Diffusion's precision: auto (fp16 on CUDA, fp32 on the CPU), fp32, fp16 or bf16", choices=DTYPES
    )

    def validate(self) -> None:
        """Fractions within [0, 1], the model a Stable Diffusion pipeline, and enough distinct caption pairs."""
        for name in ("cross_replace", "self_replace"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"--{name.replace('_', '-')} must be within [0, 1], got {getattr(self, name)}")
        if self.from_review is None:
            check_model(self.t2i, "text2image", "--t2i")
            resolve_dtype(self.dtype, resolve_device(self.device))
            sd_caption_pairs(self.seed, self.n)  # more pairs than Fig. 15 gives: refused now, not after hours


class _Renderer:
    """One pair's images (prompt-to-prompt) and check, with the pipeline and scorer loaded on first use."""

    def __init__(self, out: Path, config: EqsdConfig, pipeline: Any, scorer: Any) -> None:
        self.out, self.config = out, config
        self._pipeline, self._scorer = pipeline, scorer
        self.models = Models(resolve_device(config.device), config.dtype)

    def __call__(self, task: tuple[int, dict]) -> dict:
        i, pair = task
        c = self.config
        captions = (pair["caption0"], pair["caption1"])
        seed = int(case_rng(c.seed, _LATENTS, i).integers(0, 2**31))
        if self._pipeline is None:
            self._pipeline = self.models.pipeline("text2image", c.t2i)
        images = render_pair(
            self._pipeline,
            captions,
            seed,
            steps=c.steps,
            size=c.image_size,
            cross_replace=c.cross_replace,
            self_replace=c.self_replace,
        )
        paths = [f"{SUBSET}/{i:05d}_{k}.png" for k in range(2)]
        for image, rel in zip(images, paths, strict=True):
            save_png(image, self.out / "images" / rel)
        record = {"image0": paths[0], "image1": paths[1], "caption0": captions[0], "caption1": captions[1]}
        verdict = check_pair(self.scorer, images, captions) if c.check or self._scorer is not None else None
        return {"record": record, "aspect": pair["aspect"], "changed": pair["changed"], "seed": seed, "check": verdict}

    @property
    def scorer(self) -> Any:
        if self._scorer is None:
            from spotdiff.scorers.factory import load_scorer

            self._scorer = load_scorer(self.config.check)
        return self._scorer


@resumable
def write_eqsd(out: Path, config: EqsdConfig, pipeline: Any = None, scorer: Any = None) -> dict:
    """Write EQ-SD pairs in the EqBen format (``all_select.json``, ``images/eqbensd/``).

    Pairs failing the check go to ``set_aside.json`` (with their scores), not ``all_select.json``;
    ``review.csv`` and ``review.html`` list every pair with the check's verdict, for the final cut the
    paper made by hand (``spotdiff review``, then ``--from-review``: :mod:`spotdiff.synth.eqben_pairs`). A
    re-run after an interruption renders only the pairs not finished (the models load only if one is left).

    Args:
        out: the output folder.
        config: the engine's options.
        pipeline: a built text-to-image pipeline; None: loaded from ``config.t2i`` when first needed.
        scorer: the check's scorer; None: loaded from ``config.check`` (when given) when first needed.
    """
    out = Path(out)
    pairs = sd_caption_pairs(config.seed, config.n)
    renderer = _Renderer(out, config, pipeline, scorer)
    made = make_items(
        out,
        renderer,
        list(enumerate(pairs)),
        key=lambda t: f"pair {t[0]}",
        desc="pairs",
    )
    kept = [m for m in made if m["check"] is None or m["check"]["passed"]]
    aside = [m for m in made if not (m["check"] is None or m["check"]["passed"])]
    write_json(out / "all_select.json", [m["record"] for m in kept])
    write_json(out / "metadata.json", {"pairs": [_meta(m) for m in kept]})
    write_json(out / "set_aside.json", [_meta(m) for m in aside])
    items = [_review_item(i, m["record"], m["check"]) for i, m in enumerate(made)]
    write_review(out, items, image_fields=IMAGE_FIELDS, text_fields=TEXT_FIELDS, title=REVIEW_TITLE)
    return {
        "engine": "eqsd",
        "seed": config.seed,
        "image_size": config.image_size,
        "t2i": config.t2i,
        "t2i_weights": weights_identity(config.t2i, check_model(config.t2i, "text2image", "--t2i"))
        if pipeline is None
        else None,
        "prompt_to_prompt": {"cross_replace": config.cross_replace, "self_replace": config.self_replace},
        # the UNet's attention is prompt-to-prompt's processor (explicit probabilities), not the fused kernel
        "models": {**renderer.models.describe(), "attention": "prompt-to-prompt (explicit softmax probabilities)"},
        "check": config.check,
        "pairs": len(kept),
        "set_aside": len(aside),
    }


def _meta(made: dict) -> dict:
    return {**made["record"], **{k: made[k] for k in ("aspect", "changed", "seed", "check")}}


REVIEW_TITLE = "EQ-SD: review the edited pairs (accept the pairs whose images show their own captions)"


def _review_item(i: int, record: dict[str, str], verdict: dict | None) -> ReviewItem:
    said = "unchecked" if verdict is None else ("passed" if verdict["passed"] else "failed") + " the check"
    return ReviewItem(
        id=f"{i:05d}",
        images={f: f"images/{record[f]}" for f in IMAGE_FIELDS},
        texts={f: record[f] for f in TEXT_FIELDS},
        verdict=said,
        accept=verdict is None or verdict["passed"],
        details="" if verdict is None else f"scores (rows: images, columns: captions): {verdict['scores']}",
    )


@ENGINES.register("eqsd")
class EqsdEngine(SynthEngine, config=EqsdConfig, benchmark="eqben", reviewed=write_from_review):
    """EqBen EQ-SD pairs by prompt-to-prompt word swap on Stable Diffusion (EqBen App. B.5, Fig. 15)"""

    def make(self, out: Path) -> dict:
        return write_eqsd(out, self.config)


__all__ = [
    "DEFAULT_EQSD_T2I",
    "EqsdConfig",
    "EqsdEngine",
    "check_pair",
    "write_eqsd",
]
