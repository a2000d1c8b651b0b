"""VisualGPTScore debiasing (Sec. 4-6, App. 8): P(t) estimates, alpha curves, tuning, ground truth.

The synthetic checks build a pair scorer whose log P(t|i) is a known log prior plus a known
association (Eq. 4: P(t|i) = P(t) * pmi(t, i)) and run it through the real engine and
``debias_variants``, with P(t) estimated from seeded null images, to show what Sec. 5 predicts:
alpha* near 1 on a balanced (Winoground-like) set, near 0 when the negatives have a low prior
(ARO-like), and the planted alpha when the test marginal is P_train(t)^(1 - alpha) (Eq. 12).
"""

from __future__ import annotations

import hashlib
import json
import time

import numpy as np
import pytest
from PIL import Image

from spotdiff.cases import ArrayImage, Case, NoiseImage
from spotdiff.diagnose.debias import (
    NULL_DEFAULTS,
    NULL_N_BY_BENCHMARK,
    DebiasConfig,
    alpha_curves,
    alpha_grid,
    cross_validate_alpha,
    debias,
    debias_variants,
    gallery_log_prior,
    i2t_alpha_curve,
    log_prior_from_scores,
    null_images,
    pmi,
    tune_alpha,
)
from spotdiff.diagnose.debias.blind import diagnose_bias
from spotdiff.diagnose.engine import Engine
from spotdiff.errors import ConfigError
from spotdiff.protocols import evaluate, get_protocol
from spotdiff.scorers import PairScorer, Scorer, ScorerOptions

# --------------------------------------------------------------------------- pure functions


def test_null_image_defaults_follow_appendix_8():
    assert NULL_DEFAULTS == {"n": 10, "mean": 1.0, "std": 0.25, "seed": 0, "space": "normalized"}
    assert NULL_N_BY_BENCHMARK == {"winoground": 100, "eqben": 30}
    refs = null_images()
    assert len(refs) == 10 and all(isinstance(r, NoiseImage) for r in refs)
    assert {(r.mean, r.std) for r in refs} == {(1.0, 0.25)}
    assert len({r.key for r in refs}) == 10


def test_null_images_are_deterministic_for_a_seed():
    a = [np.asarray(r.load()) for r in null_images(3, seed=5, mean=0.4, std=0.25, size=(16, 8))]
    b = [np.asarray(r.load()) for r in null_images(3, seed=5, mean=0.4, std=0.25, size=(16, 8))]
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    assert a[0].shape == (8, 16, 3)
    longer = null_images(5, seed=5, mean=0.4, std=0.25, size=(16, 8))
    np.testing.assert_array_equal(np.asarray(longer[2].load()), a[2])  # prefix-stable
    other = np.asarray(null_images(1, seed=6, mean=0.4, std=0.25, size=(16, 8))[0].load())
    assert not np.array_equal(other, a[0])
    assert abs(a[0].mean() / 255.0 - 0.4) < 0.05
    with pytest.raises(ConfigError):
        null_images(0)


def test_log_prior_is_eq6_average_of_scores_not_logs():
    s = np.log(np.array([[0.2, 0.5], [0.4, 0.1], [0.6, 0.3]]))
    np.testing.assert_allclose(log_prior_from_scores(s), np.log([0.4, 0.3]))
    np.testing.assert_allclose(gallery_log_prior(s), np.log([0.4, 0.3]))
    with pytest.raises(ValueError):
        log_prior_from_scores(np.zeros((0, 2)))


def test_debias_family_and_pmi():
    s = np.array([[-1.0, -2.0], [-3.0, -0.5]])
    q = np.array([-2.0, -1.0])
    np.testing.assert_allclose(debias(s, q, 0.0), s)
    np.testing.assert_allclose(pmi(s, q), s - q)
    np.testing.assert_allclose(debias(s, q, 0.25), s - 0.25 * q)
    with pytest.raises(ConfigError):
        debias(s, q, 1.5)


def test_alpha_grid():
    a = alpha_grid()
    assert a.shape == (1001,) and a[0] == 0.0 and a[-1] == 1.0 and a[500] == 0.5
    assert np.allclose(np.diff(a), 0.001)
    assert alpha_grid(0.25).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    with pytest.raises(ConfigError):
        alpha_grid(0.3)


def _top1_case(k: int, m: int) -> Case:
    truth = np.zeros((1, m), dtype=bool)
    truth[0, k % m] = True
    return Case(id=f"c{k}", texts=tuple(f"t{k}-{j}" for j in range(m)), truth=truth, tags={"subset": "s"})


def test_i2t_curve_equals_the_protocol_at_every_alpha():
    rng = np.random.default_rng(0)
    proto = get_protocol("i2t-top1")
    alphas = alpha_grid(0.01)
    cases, mats, priors = [], [], []
    for k in range(150):
        m = 2 + k % 3
        s = rng.normal(size=(1, m)).round(1)  # rounding makes ties
        q = rng.normal(size=m).round(1)
        if k % 17 == 0:
            s[0, (k + 1) % m] = np.nan
        cases.append(_top1_case(k, m))
        mats.append(s)
        priors.append(q)
    curve = alpha_curves(proto, cases, mats, priors, alphas)["accuracy"]
    brute = np.array(
        [
            [proto.outcomes(c, s - a * q[None, :])[0]["accuracy"] for a in alphas]
            for c, s, q in zip(cases, mats, priors, strict=True)
        ]
    )
    np.testing.assert_array_equal(curve, brute)
    assert 0 < curve.mean() < 1


def test_generic_curve_is_exact_including_ties_on_the_grid():
    """Group protocol (Winoground): the crossing of two entries at exactly alpha = 0.5 is a tie."""
    proto = get_protocol("group")
    alphas = alpha_grid()
    rng = np.random.default_rng(1)
    cases, mats, priors = [], [], []
    for k in range(12):
        s = rng.normal(size=(2, 2))
        q = rng.normal(size=2)
        if k == 0:
            s, q = np.array([[1.0, 0.5], [0.0, 2.0]]), np.array([1.0, 0.0])  # row 0 ties at alpha 0.5
        images = (NoiseImage(2 * k), NoiseImage(2 * k + 1))
        cases.append(
            Case(id=f"g{k}", texts=(f"a{k}", f"b{k}"), truth=np.eye(2, dtype=bool), images=images, tags={"subset": "s"})
        )
        mats.append(s)
        priors.append(q)
    curves = alpha_curves(proto, cases, mats, priors, alphas)
    for metric in ("text", "image", "group"):
        brute = np.array(
            [
                [proto.outcomes(c, s - a * q[None, :])[0][metric] for a in alphas]
                for c, s, q in zip(cases, mats, priors, strict=True)
            ]
        )
        np.testing.assert_array_equal(curves[metric], brute)
    assert curves["text"][0, 499] == 1.0 and curves["text"][0, 500] == 0.0 and curves["text"][0, 501] == 0.0


def _loop_cv(curve, alphas, n_splits, seed):
    """Table 4a written as plain loops, to check the vectorised version."""
    rng = np.random.default_rng(seed)
    n = len(curve)
    ranks = np.argsort(rng.random((n_splits, n)), axis=1)
    out = []
    for s in range(n_splits):
        val = np.zeros(n, dtype=bool)
        val[ranks[s, : round(n * 0.5)]] = True
        scores = [np.nanmean(curve[val, k]) for k in range(len(alphas))]
        best = int(np.argmax(scores))
        out.append((alphas[best], np.nanmean(curve[~val, best]) * 100))
    return out


def test_cross_validation_matches_a_loop_and_breaks_ties_low():
    rng = np.random.default_rng(3)
    alphas = alpha_grid(0.05)
    curve = (rng.random((201, len(alphas))) < np.linspace(0.3, 0.7, len(alphas))).astype(float)
    curve[::13, 4] = np.nan
    cv = cross_validate_alpha(curve, alphas, n_splits=10, seed=4)
    want = _loop_cv(curve, alphas, 10, 4)
    np.testing.assert_allclose(cv["alpha_star"], [w[0] for w in want])
    np.testing.assert_allclose(cv["test_score"], [w[1] for w in want])
    assert cv["alpha_star_std"] == pytest.approx(np.std([w[0] for w in want]))
    flat = np.ones((10, 21))
    assert cross_validate_alpha(flat, alpha_grid(0.05))["alpha_star"] == [0.0] * 10
    assert tune_alpha(flat, alpha_grid(0.05)) == (0.0, 100.0)


def test_alpha_tuning_speed_10k_cases_1001_alphas_10_splits():
    rng = np.random.default_rng(0)
    n = 10_000
    alphas = alpha_grid()
    s = rng.normal(size=(n, 2))
    q = rng.normal(size=(n, 2))
    best = float("inf")
    for _ in range(3):  # CPU seconds: other jobs on a shared 2-core machine inflate wall time
        t0 = time.process_time()
        curve = i2t_alpha_curve(s[:, 0], s[:, 1:], q[:, 0], q[:, 1:], alphas)
        cv = cross_validate_alpha(curve, alphas, n_splits=10)
        best = min(best, time.process_time() - t0)
    assert curve.shape == (n, 1001) and len(cv["alpha_star"]) == 10
    assert best < 1.0, f"alpha tuning took {best:.3f} CPU s"


# --------------------------------------------------------------------------- synthetic ground truth
class PlantedScorer(PairScorer):
    """log P(t|i) = log P(t) + log pmi(t, i) with both planted (Eq. 4).

    Real images are 4x4 arrays whose first pixel encodes their id; any other image (a null
    Gaussian-noise image) gets log pmi ~ N(0, 0.01^2), deterministic per (image, text).
    """

    capabilities = frozenset({"image-text"})

    def __init__(self, log_prior: dict[str, float], assoc: dict[tuple[int, str], float]) -> None:
        super().__init__("planted", ScorerOptions(batch_size=64))
        self.log_prior, self.assoc = log_prior, assoc

    def identity(self) -> dict:
        return {"spec": "planted"}

    def score_pairs(self, images, texts):
        out = []
        for im, ts in zip(images, texts, strict=True):
            a = np.asarray(im)
            if im.size == (4, 4):
                img = int(a[0, 0, 0]) * 65536 + int(a[0, 0, 1]) * 256 + int(a[0, 0, 2])
                row = [self.log_prior[t] + self.assoc.get((img, t), 0.0) for t in ts]
            else:
                row = []
                for t in ts:
                    h = hashlib.sha256(a.tobytes()[:64] + t.encode()).digest()
                    noise = np.random.default_rng(int.from_bytes(h[:8], "little")).normal(0, 0.01)
                    row.append(self.log_prior[t] + noise)
            out.append(np.array(row))
        return out


def planted_image(k: int) -> ArrayImage:
    a = np.zeros((4, 4, 3), dtype=np.uint8)
    a[0, 0] = [(k >> 16) & 255, (k >> 8) & 255, k & 255]
    a[1:, :, :] = 99
    return ArrayImage(a, name=f"planted{k}")


def test_planted_image_ids_round_trip():
    scorer = PlantedScorer({"x": -1.0}, {(70000, "x"): 2.0})
    assert scorer.score_pairs([planted_image(70000).load()], [["x"]])[0][0] == pytest.approx(1.0)
    assert isinstance(planted_image(1).load(), Image.Image)


def _run(scorer, cases, protocol, **cfg):
    engine = Engine(scorer, progress=False)
    config = DebiasConfig(prior="null", n_null=3, alpha="tune", **cfg)
    return debias_variants(engine, cases, protocol, config)


def test_balanced_set_tunes_alpha_near_one():
    """Winoground-like 2x2 cases: every caption is positive once, so P_test(t) is uniform (Eq. 11)."""
    rng = np.random.default_rng(0)
    prior, assoc, cases = {}, {}, []
    for k in range(600):
        ta, tb = f"case {k} caption a", f"case {k} caption b"
        prior[ta], prior[tb] = rng.normal(0, 1.0, size=2)
        ia, ib = 2 * k, 2 * k + 1
        for img, t_true, t_false in ((ia, ta, tb), (ib, tb, ta)):
            assoc[(img, t_true)] = 1.0 + rng.normal(0, 0.5)
            assoc[(img, t_false)] = rng.normal(0, 0.5)
        cases.append(
            Case(id=f"w{k}", texts=(ta, tb), truth=np.eye(2, dtype=bool),
                 images=(planted_image(ia), planted_image(ib)), tags={"subset": "s"})
        )  # fmt: skip
    res = _run(PlantedScorer(prior, assoc), cases, "group")
    assert res.metric == "text"
    assert res.cv["alpha_star_mean"] >= 0.85
    text = {v: evaluate("group", cases, res.variants[v], n_boot=0).metrics["all"]["text"] for v in res.variants}
    assert text["alpha=1"] > text["raw"] + 20
    assert text["tuned"] >= text["alpha=1"] - 2
    assert text["blind"] == 0.0  # a text-only prior cannot pass Winoground's text score
    assert res.cv["test_score_mean"] > text["raw"] + 20


def test_low_prior_negatives_tune_alpha_near_zero():
    """ARO-like 1 x 2 cases whose negative is implausible (lower P(t)): P_test = P_train (Eq. 10)."""
    rng = np.random.default_rng(1)
    prior, assoc, cases = {}, {}, []
    for k in range(1500):
        tp, tn = f"case {k} positive", f"case {k} negative"
        prior[tp] = rng.normal(0, 1.0)
        prior[tn] = prior[tp] - abs(rng.normal(1.0, 0.5))
        assoc[(k, tp)] = 0.3 + rng.normal(0, 0.5)
        assoc[(k, tn)] = rng.normal(0, 0.5)
        texts, truth = ((tp, tn), [[True, False]]) if k % 2 else ((tn, tp), [[False, True]])
        cases.append(Case(id=f"a{k}", texts=texts, truth=np.array(truth), images=(planted_image(k),),
                          tags={"subset": "s"}))  # fmt: skip
    res = _run(PlantedScorer(prior, assoc), cases, "i2t-top1")
    assert res.cv["alpha_star_mean"] <= 0.1
    acc = {v: evaluate("i2t-top1", cases, res.variants[v], n_boot=0).metrics["all"]["accuracy"] for v in res.variants}
    assert acc["raw"] > acc["alpha=1"] + 10
    assert acc["blind"] > 95  # the prior alone solves it (Table 2a)


@pytest.mark.parametrize("alpha_true", [0.0, 0.5, 1.0])
def test_tuning_recovers_a_planted_alpha(alpha_true):
    """Positives drawn with P_test(t|i) ∝ pmi(t, i) P_train(t)^(1 - alpha) (Eq. 12): the Bayes-optimal
    score is log VGS - alpha log P(t), and cross-validated tuning finds that alpha."""
    rng = np.random.default_rng(int(alpha_true * 10) + 5)
    prior, assoc, cases = {}, {}, []
    m = 4
    for k in range(4000):
        texts = tuple(f"case {k} text {j}" for j in range(m))
        q = rng.normal(0, 1.5, size=m)
        a = rng.normal(0, 1.5, size=m)
        logits = a + (1 - alpha_true) * q
        p = np.exp(logits - logits.max())
        pos = rng.choice(m, p=p / p.sum())
        for j, t in enumerate(texts):
            prior[t] = q[j]
            assoc[(k, t)] = a[j]
        truth = np.zeros((1, m), dtype=bool)
        truth[0, pos] = True
        cases.append(Case(id=f"p{k}", texts=texts, truth=truth, images=(planted_image(k),), tags={"subset": "s"}))
    res = _run(PlantedScorer(prior, assoc), cases, "i2t-top1")
    assert abs(res.cv["alpha_star_mean"] - alpha_true) <= 0.15
    assert res.alpha == pytest.approx(round(res.cv["alpha_star_mean"], 3))
    assert res.curves["accuracy"].shape == (1001,)


# --------------------------------------------------------------------------- language-bias diagnosis
class PriorScorer(Scorer):
    """A text-only prior read from a table (capability text-prior)."""

    capabilities = frozenset({"text-prior"})

    def __init__(self, log_prior: dict[str, float]) -> None:
        super().__init__("prior-table", ScorerOptions())
        self.log_prior = log_prior

    def identity(self) -> dict:
        return {"spec": "prior-table"}

    def text_logprob(self, texts):
        return np.array([self.log_prior[t] for t in texts])


def test_blind_prior_scores_zero_on_a_balanced_benchmark_and_high_on_implausible_negatives():
    rng = np.random.default_rng(0)
    prior, wino, aro = {}, [], []
    for k in range(200):
        ta, tb, tn = f"w{k} a", f"w{k} b", f"w{k} shuffled"
        prior[ta], prior[tb] = rng.normal(size=2)
        prior[tn] = prior[ta] - 2.0 if k % 10 else prior[ta] + 1.0
        wino.append(
            Case(id=f"w{k}", texts=(ta, tb), truth=np.eye(2, dtype=bool),
                 images=(NoiseImage(2 * k), NoiseImage(2 * k + 1)), tags={"subset": "wino"})
        )  # fmt: skip
        aro.append(Case(id=f"a{k}", texts=(ta, tn), truth=np.array([[True, False]]), images=(NoiseImage(k),),
                        tags={"subset": "order" if k % 2 else "relation"}))  # fmt: skip
    engine = Engine(PriorScorer(prior), progress=False)
    balanced = diagnose_bias(engine, wino, "group", n_boot=200)
    assert balanced.metrics["all"]["text"] == 0.0
    assert balanced.chance["all"]["text"] > 10  # a random scorer gets about 25
    biased = diagnose_bias(engine, aro, "i2t-top1", n_boot=200)
    assert biased.metrics["all"]["accuracy"] == pytest.approx(90.0)
    lo, hi = biased.metrics["all"]["accuracy_ci95"]
    assert lo < 90.0 < hi and {"order", "relation"} <= set(biased.metrics)
    assert 35 < biased.chance["all"]["accuracy"] < 65


def test_bias_command_writes_report(tmp_path, shared_data, capsys):
    from spotdiff.cli import main
    from spotdiff.testing.tiny_vgpt import make_tiny_causal_lm

    lm = make_tiny_causal_lm(tmp_path / "lm")
    out = tmp_path / "out"
    argv = ["bias", "--benchmark", "sugarcrepe", "--data", str(shared_data / "sugarcrepe"), "--model",
            f"lm:{lm}", "--limit", "40", "--out", str(out), "--n-boot", "50", "--device", "cpu", "-q"]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "blind text prior" in text and "vs chance" in text
    report = json.loads((out / "bias.json").read_text())
    assert report["protocol"] == "i2t-top1" and report["n_cases"] == 40
    assert 0 <= report["metrics"]["all"]["accuracy"] <= 100
    assert len(report["metrics"]["all"]["accuracy_ci95"]) == 2
    lines = (out / "scores.jsonl").read_text().splitlines()
    assert len(lines) == 40 and len(json.loads(lines[0])["log_prior"]) == 2
    assert main([*argv[:5], "--model", "hf-clip:/nonexistent/clip", "--limit", "2"]) == 2


@pytest.mark.slow
@pytest.mark.shared
@pytest.mark.parametrize("benchmark", ["sugarcrepe", "valse"])
def test_language_bias_of_real_benchmarks(benchmark, shared_data, tmp_path, capsys):
    """`spotdiff bias` on the real SugarCrepe and VALSE files.

    No pretrained LM can be had offline here (the one real model, MiniLM, is a sentence encoder
    without its masked-LM head), so the prior is a small GPT-2 trained in the test on natural
    captions of the *other* benchmarks (and VISLA), with every text of this benchmark held out.
    """
    import torch

    from spotdiff.cli import main
    from spotdiff.testing.tiny_vgpt import caption_corpus, train_caption_lm

    corpus = caption_corpus(shared_data, benchmark)
    lm = train_caption_lm(
        tmp_path / "lm", corpus, steps=300, batch_size=32, width=64, layers=2, max_length=32, vocab_size=2000
    )
    out = tmp_path / "out"
    argv = ["bias", "--benchmark", benchmark, "--data", str(shared_data / benchmark), "--model", f"lm:{lm}",
            "--out", str(out), "--n-boot", "200", "--device", "cpu", "--batch-size", "128", "-q"]  # fmt: skip
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model on a shared 2-core machine: one thread is faster
    try:
        assert main(argv) == 0
    finally:
        torch.set_num_threads(threads)
    with capsys.disabled():
        print(f"\n[bias] {benchmark}, {len(corpus)} training captions\n" + capsys.readouterr().out)
    report = json.loads((out / "bias.json").read_text())
    metric = "accuracy" if benchmark == "sugarcrepe" else "acc_r"
    subsets = {"sugarcrepe": 7, "valse": 11}[benchmark]
    assert len(report["metrics"]) == subsets + 2 and "subset_mean" in report["metrics"]  # + all
    for scope, m in report["metrics"].items():
        lo, hi = m[f"{metric}_ci95"]
        assert 0.0 <= lo <= m[metric] <= hi <= 100.0, scope
        assert 20.0 < report["chance"][scope][metric] < 80.0
    from spotdiff.benchmarks import get_benchmark

    assert report["n_cases"] == len(get_benchmark(benchmark)(shared_data / benchmark).load())
