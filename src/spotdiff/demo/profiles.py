"""Sizes, budgets and fixed names of a demo run (the ``full`` and ``quick`` profiles)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: chance level of SPEC I2T / T2I per subset (1 / K) and of cls (1 / number of classes, filled in later)

DEFAULT_OUT = Path("spotdiff-demo")
STORE = "runs.sqlite"
CACHE = "cache"
#: the fine-tunes (name, loss), in the order they are scheduled and tabulated
FINETUNES = (("plain", "clip"), ("hn", "spec-hn"), ("eqsim", "eqsim"), ("pairs", "clip"))
CLIP_MODELS = ("base", *(f"ft-{name}" for name, _ in FINETUNES))
MODEL_LABELS = {
    "base": "base (from scratch)",
    "ft-plain": "+ plain contrastive",
    "ft-hn": "+ hard negatives (SPEC)",
    "ft-eqsim": "+ EqSim (EqBen)",
    "ft-pairs": "+ SPEC pairs ungrouped (control)",
}
#: loader options of the ARO-style set: the heuristic POS tagger and regex tokenizer, so the
#: negatives do not depend on whether spaCy / nltk happen to be installed
ARO_OPTIONS = ("pos_tagger=heuristic", "tokenizer=regex")
CLS_MARGIN = 3.0  # points: "cls shows no drop larger than 3 points" (paired 95% CI above -3); also retention's
#: the held-out sets each fine-tune evaluates during training: (label, --eval target, headline metrics)
RETENTION_EVALS = (
    ("zeroshot-classification", "zeroshot-classification=data/heldout-zeroshot", ("top1",)),
    ("coco-retrieval", "coco-retrieval=data/heldout-aro", ("i2t_r1", "t2i_r1")),
)
#: paired comparisons of the CLIPs (``a - b``)
PAIRS = (("hn", "plain"), ("eqsim", "plain"), ("hn", "pairs"), ("eqsim", "pairs"), ("pairs", "plain"),
         ("hn", "base"), ("eqsim", "base"), ("plain", "base"), ("pairs", "base"))  # fmt: skip


@dataclass(frozen=True)
class Profile:
    """Sizes and budgets of one demo run (``full`` or ``quick``)."""

    name: str
    corpus_n: int  # training image-caption pairs
    spec_test_n: int  # held-out SPEC cases per subset (cls: one image per case, 6 x spec_test_n)
    spec_train_n: int  # SPEC candidate sets per subset for fine-tuning
    eqben_n: int  # held-out EqBen-style pairs per subset (3 subsets)
    aro_n: int  # held-out corpus captions for the ARO-style set (also the retrieval gallery)
    zs_n: int  # held-out zero-shot classification images (balanced over the object classes)
    ft_eval_every: int  # steps between the evaluations during each fine-tune (plus start and end)
    base_steps: int
    ft_steps: int
    cap_steps: int
    image_size: int = 64
    base_batch: int = 128
    base_lr: float = 1e-3
    ft_batch: int = 128
    ft_cases: int = 8
    ft_lr: float = 2e-4
    cap_batch: int = 64
    cap_lr: float = 1e-3
    n_boot: int = 1000

    @property
    def base_warmup(self) -> int:
        return max(1, self.base_steps // 20)

    @property
    def ft_warmup(self) -> int:
        return max(1, self.ft_steps // 10)


PROFILES = {
    "full": Profile(
        name="full",
        corpus_n=10000,
        spec_test_n=100,
        spec_train_n=300,
        eqben_n=100,
        aro_n=400,
        zs_n=330,
        ft_eval_every=100,
        base_steps=1200,
        ft_steps=300,
        cap_steps=800,
    ),
    "quick": Profile(
        name="quick",
        corpus_n=1500,
        spec_test_n=12,
        spec_train_n=16,
        eqben_n=10,
        aro_n=40,
        zs_n=66,
        ft_eval_every=8,
        base_steps=100,
        ft_steps=16,
        cap_steps=50,
        n_boot=200,
    ),
}


@dataclass
class DemoConfig:
    out: Path = DEFAULT_OUT
    quick: bool = False
    seed: int = 0
    workers: int = 2

    @property
    def profile(self) -> Profile:
        return PROFILES["quick" if self.quick else "full"]
