"""An ordinary image-caption training corpus: ``spotdiff synth corpus``.

Instances, layouts and backgrounds are disjoint from every evaluation set. Details:
docs/synthesis.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from spotdiff.jsonio import write_jsonl
from spotdiff.synth import ENGINES, CanvasConfig, SynthEngine, count_option, option
from spotdiff.synth.canvas.eqben import SUBSETS as EQBEN_SUBSETS
from spotdiff.synth.canvas.eqben import EqbenBuilder
from spotdiff.synth.canvas.pipeline import Pipeline, make_pipeline
from spotdiff.synth.canvas.spec import LABELS, SUBSETS, SpecBuilder
from spotdiff.synth.language import sentence, with_article
from spotdiff.synth.output import save_png
from spotdiff.synth.run import make_items, resumable

CORPUS_NAMESPACE = 7
#: how often each kind of image is drawn (weights)
MIX = {"spec": 0.6, "object": 0.25, "eqben": 0.15}


@resumable
def write_corpus(
    out: Path,
    *,
    n: int = 100,
    seed: int = 0,
    size: int = 64,
    pipeline: Pipeline | None = None,
    workers: int = 1,
) -> dict:
    """Write ``n`` image-caption pairs under ``out``; return the summary. The options are
    :class:`spotdiff.synth.CanvasConfig`'s (``size`` its ``image_size``); docs/synthesis.md says what is drawn.
    """
    out = Path(out)
    pipeline = pipeline or make_pipeline(size)
    spec = SpecBuilder(pipeline, seed, split="train", namespace=CORPUS_NAMESPACE)
    eqben = EqbenBuilder(pipeline, seed, split="train", namespace=CORPUS_NAMESPACE)
    kinds = list(MIX)
    weights = [MIX[k] for k in kinds]

    def one(i: int) -> dict:
        rng = spec.rng(0, i)
        kind = kinds[int(rng.choice(len(kinds), p=weights))]
        rel = f"images/{i:06d}.png"
        if kind == "spec":
            subset = SUBSETS[int(rng.integers(len(SUBSETS)))]
            labels = LABELS[subset]
            label = labels[int(rng.integers(len(labels)))]
            case = spec.build(subset, i, only=label)
            k = case.labels.index(label)
            image, caption = case.renders[k].image, sentence(case.texts[k])
            instances = [inst.as_dict() for inst in case.instances.values()]
        elif kind == "object":
            inst, _scene, r = spec.build_cls(i)
            image = r.image
            caption = sentence(f"a photo of {with_article(inst.phrase(colour=True, texture=True))}")
            instances = [inst.as_dict()]
        else:
            pair = eqben.build(EQBEN_SUBSETS[int(rng.integers(len(EQBEN_SUBSETS)))], i)
            k = int(rng.integers(2))
            image, caption = pair.renders[k].image, pair.captions[k]
            instances = [v.as_dict() for v in pair.instances.values()]
        save_png(image, out / rel)
        return {"image": rel, "caption": caption, "kind": kind, "objects": instances}

    rows = make_items(out, one, list(range(n)), key=lambda i: f"{i:06d}", workers=workers, desc="pairs")
    write_jsonl(out / "captions.jsonl", [{"image": r["image"], "caption": r["caption"]} for r in rows])
    write_jsonl(out / "metadata.jsonl", rows)
    return {
        **pipeline.summary("corpus", seed),
        "pairs": len(rows),
        "kinds": {k: sum(1 for r in rows if r["kind"] == k) for k in kinds},
        "split": "train (odd instance seeds, separate layout namespace)",
    }


@dataclass(frozen=True)
class CorpusConfig(CanvasConfig):
    """The options of the ``corpus`` engine: more, smaller images by default."""

    n: int = count_option(100, "image-caption pairs")
    image_size: int = option(64, "square image side in pixels", kind="positive")


@ENGINES.register("corpus")
class CorpusEngine(SynthEngine, config=CorpusConfig):
    """image-caption training pairs (captions.jsonl) from instances disjoint from the test engines"""

    def make(self, out: Path) -> dict:
        return write_corpus(out, **self.config.arguments())
