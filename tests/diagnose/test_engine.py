"""The engine: one cached path for every need, one dispatch, the capability protocols, the errors."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from spotdiff import processes
from spotdiff.benchmarks import get_benchmark
from spotdiff.cases import ArrayImage, Case, content_keys
from spotdiff.diagnose import engine as engine_module
from spotdiff.diagnose.engine import (
    ChoiceNeed,
    EmbeddingNeed,
    Engine,
    ITMNeed,
    PairNeed,
    TextPriorNeed,
    TextTextNeed,
    check_capability,
    need_for,
    text_key,
)
from spotdiff.errors import ConfigError, DataError
from spotdiff.scorers import EmbeddingScorer, PairScorer, ScorerOptions, load_scorer
from spotdiff.scorers.base import (
    AnswerChoice,
    ImageTextEmbedding,
    ITMLogits,
    PairScoring,
    Scorer,
    TextEmbedding,
    TextPrior,
)
from spotdiff.testing.formats import write_spec, write_winoground
from spotdiff.testing.tiny_models import make_tiny_blip_retrieval, make_tiny_clip


# ------------------------------------------------------------------------------------ fakes
def _vector(data: bytes, dim: int = 8) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(data).digest()[:8], "big")
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


class Embeds(EmbeddingScorer):
    """Deterministic embeddings from the content; counts what it encoded."""

    capabilities = frozenset({"image-text", "text-text"})

    def __init__(self) -> None:
        super().__init__("fake-embedding", ScorerOptions(batch_size=3))
        self.texts, self.images = 0, 0

    def identity(self) -> dict:
        return {"spec": self.spec}

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        self.texts += len(texts)
        return np.stack([_vector(t.encode()) for t in texts])

    def encode_images(self, images) -> np.ndarray:
        self.images += len(images)
        return np.stack([_vector(np.asarray(im).tobytes()) for im in images])


class Pairs(PairScorer):
    """Joint scores, ITM logits, a text prior and multiple-choice answers."""

    capabilities = frozenset({"image-text", "match-prob", "itm-logits", "text-prior", "choice", "choice-text"})

    def __init__(self, scores_per_image: int | None = None) -> None:
        super().__init__("fake-pair", ScorerOptions(batch_size=2))
        self.images_seen, self.wrong = 0, scores_per_image

    def identity(self) -> dict:
        return {"spec": self.spec}

    def score_pairs(self, images, texts):
        self.images_seen += len(images)
        return [
            np.array([float(np.asarray(im).mean()) + len(t) for t in ts][: self.wrong], dtype=np.float32)
            for im, ts in zip(images, texts, strict=True)
        ]

    def itm_logits(self, images, texts):
        return [np.array([[-len(t), len(t)] for t in ts], dtype=np.float32) for ts in texts]

    def text_logprob(self, texts):
        return np.array([[-float(len(t))] for t in texts], dtype=np.float32)

    def answer_choices(self, images, texts, need, style="spotdiff"):
        rows = len(texts) * (2 if need == "choice" else 1)
        return np.zeros((rows, 2, 1), dtype=np.float32)


class Declares(Scorer):
    """Declares what it cannot do."""

    capabilities = frozenset({"text-prior"})

    def identity(self) -> dict:
        return {"spec": self.spec}


def _image(k: int) -> ArrayImage:
    return ArrayImage(np.full((4, 4, 3), 10 * k, dtype=np.uint8), name=f"im{k}")


def _cases(n: int = 12) -> list[Case]:
    """Cases sharing images and texts; two images per case, a repeated text in some."""
    out = []
    for c in range(n):
        texts = (f"caption {c % 5}", f"foil {c % 3}", f"caption {c % 5}" if c % 4 == 0 else f"other {c % 4}")
        images = (_image(c % 4), _image(c % 3 + 4))
        out.append(Case(id=f"c{c}", texts=texts, truth=np.eye(2, 3, dtype=bool), images=images, tags={"subset": "s"}))
    return out


def _unique(cases: list[Case]) -> tuple[int, int]:
    return len({t for c in cases for t in c.texts}), len({r.key for c in cases for r in c.images})


# ------------------------------------------------------------------------------ the cached path
def test_a_rerun_computes_nothing_and_gives_the_same_matrices(tmp_path: Path) -> None:
    cases = _cases()
    with Engine(Embeds(), tmp_path, progress=False, workers=0) as engine:
        first = list(engine.case_matrices(cases, "image-text"))
        assert engine.stats == {"computed": sum(_unique(cases)), "cached": 0}
    scorer = Embeds()
    with Engine(scorer, tmp_path, progress=False, workers=0) as engine:
        again = list(engine.case_matrices(cases, "image-text"))
        assert engine.stats == {"computed": 0, "cached": sum(_unique(cases))}
    assert scorer.texts == scorer.images == 0
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))


def test_the_cache_commits_once_per_chunk_of_cases_not_per_batch(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(engine_module, "CHUNK_CASES", 10)
    truth = np.eye(1, 3, dtype=bool)
    cases = [Case(f"c{c}", (f"a {c}", f"b {c}", f"c {c}"), truth, (), {"subset": "s"}) for c in range(40)]
    scorer = Embeds()  # 3 texts a batch: 10 batches in each chunk of 10 cases
    with Engine(scorer, tmp_path, progress=False, workers=0) as engine:
        begun: list[str] = []
        engine.cache._db.set_trace_callback(lambda sql: begun.append(sql) if sql.startswith("BEGIN") else None)
        for n, _ in enumerate(engine.case_matrices(cases, "text-text"), 1):
            if n % 10 == 0:  # a chunk's matrices come once its rows are committed, in one transaction
                assert len(begun) == n // 10
                assert engine.cache._db.execute("SELECT COUNT(*) FROM items").fetchone()[0] == 3 * n
        assert scorer.texts == 120 and len(begun) == 4
        with engine_module.Cache(tmp_path, engine_module.cache_digest(scorer)) as other:  # another connection
            assert other.count("text") == 120


def test_the_model_computes_on_the_thread_budget(monkeypatch) -> None:
    import torch

    class Threads(Embeds):
        def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
            seen.append(torch.get_num_threads())
            return super().encode_texts(texts)

    seen: list[int] = []
    monkeypatch.setattr(processes, "usable_cores", lambda read=None: 6)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)  # set to 1 under xdist (tests/conftest.py)
    before = torch.get_num_threads()
    with Engine(Threads(), progress=False, workers=2) as engine:
        assert engine.budget.as_dict() == {"torch_threads": 3, "workers": 2, "cores": 6}  # 3 x 2 = the 6 cores
        list(engine.case_matrices(_cases(), "text-text"))
    assert set(seen) == {3} and torch.get_num_threads() == before  # set while computing, then restored


def test_only_the_missing_items_are_computed(tmp_path: Path) -> None:
    cases = _cases()
    with Engine(Embeds(), tmp_path, progress=False, workers=0) as engine:
        engine.embed_texts(["caption 0", "foil 1"])
    scorer = Embeds()
    with Engine(scorer, tmp_path, progress=False, workers=0) as engine:
        list(engine.case_matrices(cases, "text-text"))
        n_texts = _unique(cases)[0]
        assert engine.stats == {"computed": n_texts - 2, "cached": 2} and scorer.texts == n_texts - 2


@pytest.mark.parametrize(("need", "make"), [("image-text", Embeds), ("text-text", Embeds), ("image-text", Pairs),
                                            ("match-prob", Pairs), ("text-prior", Pairs)])  # fmt: skip
def test_prefill_computes_only_the_owned_items(tmp_path: Path, need: str, make) -> None:
    cases = _cases()
    owns = {r.key for c in cases for r in c.images[:1]} | {text_key(f"caption {k}") for k in range(5)}
    with Engine(make(), tmp_path, progress=False, workers=0) as engine:
        engine.prefill(cases, need, owns=owns.__contains__)
        kinds = {"text": engine.cache.keys("text"), "image": engine.cache.keys("image"),
                 "prior": engine.cache.keys("prior")}  # fmt: skip
        pairs = engine.cache.keys("pair") | engine.cache.keys("itm")
        assert engine.stats["computed"] == sum(map(len, kinds.values())) + len(pairs) > 0
    assert all(k in owns for keys in kinds.values() for k in keys)
    assert all(k.split("|")[0] in owns for k in pairs)


def test_prefilled_items_are_not_computed_again(tmp_path: Path) -> None:
    cases = _cases()
    with Engine(Pairs(), tmp_path, progress=False, workers=0) as engine:
        engine.prefill(cases, "image-text")
        computed = engine.stats["computed"]
    scorer = Pairs()
    with Engine(scorer, tmp_path, progress=False, workers=0) as engine:
        list(engine.case_matrices(cases, "image-text"))
        assert engine.stats == {"computed": 0, "cached": computed} and scorer.images_seen == 0


def test_matrices_of_every_need_have_their_shapes_and_exact_ties() -> None:
    cases = _cases()
    with Engine(Embeds(), progress=False, workers=0) as engine:
        sims = list(engine.case_matrices(cases, "image-text"))
        tt = list(engine.case_matrices(cases, "text-text"))
    with Engine(Pairs(), progress=False, workers=0) as engine:
        pair = list(engine.case_matrices(cases, "image-text"))
        itm = list(engine.case_matrices(cases, "match-prob"))
        prior = list(engine.case_matrices(cases, "text-prior"))
        choice = list(engine.case_matrices(cases[:2], "choice"))
    assert {m.shape for m in sims} == {m.shape for m in pair} == {(2, 3)}
    assert {m.shape for m in tt} == {(3, 3)} and {m.shape for m in itm} == {(2, 3, 2)}
    assert {m.shape for m in prior} == {(1, 3)} and {m.shape for m in choice} == {(6, 2, 1)}
    for case, m in zip(cases, sims, strict=True):
        if case.texts[0] == case.texts[2]:
            assert np.array_equal(m[:, 0], m[:, 2])  # bitwise: a tie between equal texts is exact


def test_pair_scorer_sees_each_image_once() -> None:
    cases, scorer = _cases(), Pairs()
    with Engine(scorer, progress=False, workers=0) as engine:
        list(engine.case_matrices(cases, "image-text"))
    assert scorer.images_seen == _unique(cases)[1]


def test_zero_shot_labels_are_prompt_ensembles() -> None:
    case = Case(id="z", texts=("cat", "dog"), truth=np.array([[True, False]]), images=(_image(1),),
                tags={"subset": "s"}, prompts=("a {c}", "a photo of a {c}"))  # fmt: skip
    with Engine(Embeds(), progress=False, workers=0) as engine:
        (m,) = engine.case_matrices([case], "image-text")
        labels = engine.embed_labels(case.texts, case.prompts)
        np.testing.assert_allclose(m, engine.embed_images(case.images) @ labels.T)


# ------------------------------------------------------------------------------ one dispatch
def test_one_dispatch_picks_the_need_object() -> None:
    embeds, pairs = Embeds(), Pairs()
    assert type(need_for(embeds, "image-text")) is EmbeddingNeed
    assert type(need_for(embeds, "text-text")) is TextTextNeed
    assert type(need_for(pairs, "image-text")) is PairNeed
    assert type(need_for(pairs, "match-prob")) is ITMNeed
    assert type(need_for(pairs, "text-prior")) is TextPriorNeed
    assert type(need_for(pairs, "choice-text")) is ChoiceNeed


def test_capability_protocols_are_checked_with_isinstance() -> None:
    embeds, pairs = Embeds(), Pairs()
    assert isinstance(embeds, ImageTextEmbedding) and isinstance(embeds, TextEmbedding)
    assert not isinstance(embeds, PairScoring | TextPrior | AnswerChoice | ITMLogits)
    assert isinstance(pairs, PairScoring) and isinstance(pairs, ITMLogits) and isinstance(pairs, TextPrior)
    assert isinstance(pairs, AnswerChoice) and not isinstance(pairs, TextEmbedding)


# ------------------------------------------------------------------------------ errors
def test_a_need_the_scorer_does_not_declare_is_refused_before_any_work() -> None:
    with Engine(Embeds(), progress=False, workers=0) as engine, pytest.raises(
        ConfigError, match="cannot serve a protocol that needs 'text-prior' \\(it provides: image-text, text-text\\)"
    ):
        list(engine.case_matrices(_cases(), "text-prior"))


def test_a_declared_need_without_its_methods_is_refused() -> None:
    with pytest.raises(ConfigError, match="declares 'text-prior' but does not implement TextPrior"):
        check_capability(Declares("declares", ScorerOptions()), "text-prior")


def test_a_scorer_without_the_protocol_is_refused() -> None:
    with Engine(Embeds(), progress=False, workers=0) as engine, pytest.raises(ConfigError, match="not score pairs"):
        engine.pair_scores([(_image(0), "a")])
    with Engine(Pairs(), progress=False, workers=0) as engine, pytest.raises(ConfigError, match="does not produce"):
        engine.embed_texts(["a"])


def test_a_wrong_number_of_pair_scores_is_refused() -> None:
    with Engine(Pairs(scores_per_image=1), progress=False, workers=0) as engine, pytest.raises(
        ConfigError, match=r"scorer returned 1 scores for \d+ texts"
    ):
        list(engine.case_matrices(_cases(), "image-text"))


def test_cases_a_need_cannot_serve() -> None:
    text_only = Case(id="t", texts=("a", "b"), truth=np.array([[True, False]]), tags={"subset": "s"})
    with Engine(Pairs(), progress=False, workers=0) as engine, pytest.raises(DataError, match="has none"):
        list(engine.case_matrices([text_only], "image-text"))
    labels = Case(id="z", texts=("cat",), truth=np.array([[True]]), tags={"subset": "s"}, prompts=("a {c}",))
    with Engine(Embeds(), progress=False, workers=0) as engine, pytest.raises(ConfigError, match="case z holds labels"):
        list(engine.case_matrices([labels], "text-text"))


# ------------------------------------------------------------------------------ tiny real models
@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("engine")


@pytest.fixture(scope="module")
def models(root: Path) -> dict[str, str]:
    return {
        "hf-clip": f"hf-clip:{make_tiny_clip(root / 'clip')}",
        "blip-itm": f"blip-itm:{make_tiny_blip_retrieval(root / 'blip')}",
    }


@pytest.fixture(scope="module")
def data(root: Path) -> dict[str, Path]:
    return {"winoground": write_winoground(root / "winoground", n=6), "spec": write_spec(root / "spec", n=2)}


def test_engine_matrix_equals_direct_model_output(models, data) -> None:
    """The deduplicated, batched matrices equal each case scored on its own by the model."""
    scorer = load_scorer(models["hf-clip"], ScorerOptions(device="cpu", batch_size=4))
    cases = get_benchmark("spec")(data["spec"]).load()
    matrices = list(Engine(scorer, None, progress=False).case_matrices(cases, "image-text"))
    for case, matrix in zip(cases, matrices, strict=True):
        direct = scorer.encode_images([r.load() for r in case.images]) @ scorer.encode_texts(list(case.texts)).T
        np.testing.assert_allclose(matrix, direct, atol=1e-5)


def test_engine_dedups_by_content(models, data) -> None:
    """Each distinct image and text is encoded once, whatever its position in the cases."""
    scorer = load_scorer(models["hf-clip"], ScorerOptions(device="cpu"))
    cases = get_benchmark("winoground")(data["winoground"]).load()
    engine = Engine(scorer, None, progress=False)
    list(engine.case_matrices(cases + cases, "image-text"))
    n_unique = len({r.key for c in cases for r in c.images}) + len({t for c in cases for t in c.texts})
    assert engine.stats["computed"] == n_unique


@pytest.mark.parametrize(("need", "method"), [("image-text", "score_pairs"), ("match-prob", "itm_logits")])
def test_pair_scorer_runs_vision_once_per_image(models, data, monkeypatch, need: str, method: str) -> None:
    scorer = load_scorer(models["blip-itm"], ScorerOptions(device="cpu", batch_size=8))
    calls: list[int] = []
    original = getattr(scorer, method)

    def counting(images, texts):
        calls.append(len(images))
        return original(images, texts)

    monkeypatch.setattr(scorer, method, counting)
    cases = get_benchmark("winoground")(data["winoground"]).load()
    list(Engine(scorer, None, progress=False).case_matrices(cases, need))
    assert sum(calls) == len({r.key for c in cases for r in c.images})


class _ThreadedArray(ArrayImage):
    """An array whose key records the thread that computed it."""

    @property
    def key(self) -> str:  # type: ignore[override]
        hashed_on.add(threading.get_ident())
        return super().key


hashed_on: set[int] = set()


def test_image_keys_are_hashed_on_the_pipelines_cores_in_order() -> None:
    """Content keys come back aligned with the references, duplicates included, and are computed on the
    pipeline's worker count of threads (hashlib hashes large buffers without the GIL)."""
    arrays = [np.full((16, 16, 3), i % 50, np.uint8) for i in range(200)]  # 50 distinct, each 4 times
    serial = [ArrayImage(a).key for a in arrays]
    assert len(set(serial)) == 50
    hashed_on.clear()
    assert content_keys([_ThreadedArray(a) for a in arrays], 4) == serial
    assert len(hashed_on) > 1 and threading.get_ident() not in hashed_on
    hashed_on.clear()
    assert content_keys([_ThreadedArray(a) for a in arrays[:10]], 4) == serial[:10]  # few: no pool
    assert hashed_on == {threading.get_ident()}
    strided = np.arange(6 * 8 * 3, dtype=np.uint8).reshape(6, 8, 3)[:, ::2]  # hashed in place, as its copy's bytes
    assert ArrayImage(strided).key == ArrayImage(strided.copy()).key
    digest = hashlib.sha256(f"uint8:{strided.shape}:False".encode() + strided.tobytes()).hexdigest()
    assert ArrayImage(strided).key == "array:" + digest  # the key cached runs were stored under
