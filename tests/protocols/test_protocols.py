"""Protocols: hand-worked score matrices, error cases, and invariants (constant scorer 0, perfect
scorer 100, consistent permutation of candidates changes nothing) as hypothesis properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spotdiff.cases import ArrayImage, Case
from spotdiff.errors import ConfigError, DataError
from spotdiff.protocols import NEEDS, PROTOCOLS, evaluate, get_protocol
from spotdiff.protocols.retrieval import retrieval_ranks
from spotdiff.protocols.top1 import ARO_SYMMETRIC_RELATIONS

IMG = [ArrayImage(np.full((2, 2, 3), k, dtype=np.uint8), name=f"img{k}") for k in range(64)]


def case(truth, *, cid="c", images=None, roles=(), texts=None, **tags) -> Case:
    truth = np.asarray(truth, dtype=bool)
    n_img = truth.shape[0] if images is None else images
    texts = texts or tuple(f"text {k}" for k in range(truth.shape[1]))
    return Case(
        id=cid,
        texts=tuple(texts),
        truth=truth,
        images=tuple(IMG[:n_img]),
        tags={"subset": "s", **tags},
        roles=tuple(roles),
    )


def metrics(name, cases, mats):
    return evaluate(name, cases, mats, n_boot=0).metrics["all"]


def approx(d):
    return pytest.approx(d, abs=1e-9, nan_ok=True)


# ------------------------------------------------------------------------------- registry
EXPECTED = {
    "group": ("image-text", ("text", "image", "group")),
    "spec": ("image-text", ("i2t", "t2i")),
    "i2t-top1": ("image-text", ("accuracy",)),
    "blind-top1": ("text-prior", ("accuracy",)),
    "aro-macro": ("image-text", ("macro_accuracy", "accuracy")),
    "valse-pairwise": ("image-text", ("acc_r",)),
    "valse-prob": ("match-prob", ("acc", "p_c", "p_f", "min_pc_pf", "acc_r")),
    "visla-t2t": ("text-text", ("accuracy", "p1_n", "p2_n")),
    "visla-i2t": ("image-text", ("accuracy", "p1_n", "p2_n")),
    "retrieval": ("image-text", ("i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5", "t2i_r10", "rsum")),
}


def test_registry_names_needs_metrics():
    assert set(EXPECTED) <= set(PROTOCOLS.names())
    for name, (needs, mets) in EXPECTED.items():
        p = get_protocol(name)
        assert p.name == name
        assert p.needs == needs and p.needs in NEEDS
        assert p.metrics == mets
        assert set(p.derived) <= set(p.metrics)
        assert p.description


def test_unknown_protocol():
    with pytest.raises(ConfigError, match="unknown protocol"):
        get_protocol("nope")


# ------------------------------------------------------------------------------- group
def test_group_hand_worked():
    eye = np.eye(2, dtype=bool)
    mats = [
        [[0.9, 0.1], [0.2, 0.8]],  # text 1, image 1, group 1
        [[0.9, 0.95], [0.2, 0.8]],  # row 0 fails; column 1 (0.8 vs 0.95) fails
        [[0.5, 0.4], [0.6, 0.7]],  # text 1; image: 0.5 > 0.6 fails
        [[0.5, 0.6], [0.4, 0.7]],  # text: 0.5 > 0.6 fails; image 1
    ]
    cases = [case(eye, cid=f"c{k}") for k in range(4)]
    p = get_protocol("group")
    got = [p.outcomes(c, np.array(m))[0] for c, m in zip(cases, mats, strict=True)]
    assert got == [
        {"text": 1.0, "image": 1.0, "group": 1.0},
        {"text": 0.0, "image": 0.0, "group": 0.0},
        {"text": 1.0, "image": 0.0, "group": 0.0},
        {"text": 0.0, "image": 1.0, "group": 0.0},
    ]
    assert metrics("group", cases, mats) == approx({"text": 50.0, "image": 50.0, "group": 25.0})


def test_group_ties_and_nan_fail():
    p = get_protocol("group")
    c = case(np.eye(2))
    assert p.outcomes(c, np.array([[0.5, 0.5], [0.1, 0.9]]))[0] == {"text": 0.0, "image": 1.0, "group": 0.0}
    assert p.outcomes(c, np.array([[np.nan, 0.1], [0.1, 0.9]]))[0]["text"] == 0.0


def test_group_off_diagonal_truth():
    c = case([[False, True], [True, False]])
    out = get_protocol("group").outcomes(c, np.array([[0.1, 0.9], [0.8, 0.2]]))
    assert out == [{"text": 1.0, "image": 1.0, "group": 1.0}]


def test_group_rejects_bad_shapes():
    p = get_protocol("group")
    with pytest.raises(DataError, match="K x K"):
        p.outcomes(case([[True, False]]), np.zeros((1, 2)))
    with pytest.raises(DataError, match="exactly one true"):
        p.outcomes(case([[True, True], [False, False]]), np.zeros((2, 2)))
    with pytest.raises(DataError, match="shape"):
        p.outcomes(case(np.eye(2)), np.zeros((2, 3)))


# ------------------------------------------------------------------------------- spec
def test_spec_hand_worked_square_and_partial():
    s = [[0.9, 0.1, 0.2], [0.5, 0.4, 0.3], [0.1, 0.2, 0.8]]
    # i2t: row 0 ok, row 1 fails (0.4 < 0.5), row 2 ok -> 2/3; t2i: all three columns ok
    sq = case(np.eye(3), cid="sq")
    i2t_only = case([[False, True, False]], cid="i2t")  # SPEC image2text.json: 1 x K
    t2i_only = case([[False], [True], [False]], cid="t2i")  # SPEC text2image.json: K x 1
    p = get_protocol("spec")
    assert p.unit_ids(sq, 6) == [f"sq/i2t/{k}" for k in range(3)] + [f"sq/t2i/{k}" for k in range(3)]
    assert metrics("spec", [sq], [s]) == approx({"i2t": 200 / 3, "t2i": 100.0})
    mats = [s, [[0.2, 0.3, 0.3]], [[0.1], [0.5], [0.4]]]  # tie in the 1 x 3 case fails
    assert p.outcomes(i2t_only, np.array(mats[1])) == [
        {"i2t": 0.0, "t2i": pytest.approx(np.nan, nan_ok=True)}
    ]
    assert p.unit_ids(t2i_only, 1) == ["t2i/t2i/0"]
    # i2t units: 3 + 1 with 2 wins; t2i units: 3 + 1 with 4 wins
    assert metrics("spec", [sq, i2t_only, t2i_only], mats) == approx({"i2t": 50.0, "t2i": 100.0})


def test_spec_partial_square_truth():
    truth = np.zeros((3, 3), dtype=bool)
    truth[0, 0] = True  # only image 0 / text 0 have a truth
    c = case(truth)
    s = np.array([[0.9, 0.1, 0.95], [0.2, 0.0, 0.0], [0.3, 0.0, 0.0]])
    p = get_protocol("spec")
    assert p.unit_ids(c, 2) == ["c/i2t/0", "c/t2i/0"]
    out = p.outcomes(c, s)
    assert out[0]["i2t"] == 0.0 and out[1]["t2i"] == 1.0


# ------------------------------------------------------------------------------- top-1
def test_i2t_top1_hand_worked():
    p = get_protocol("i2t-top1")
    assert p.outcomes(case([[False, True, False]]), np.array([[0.1, 0.5, 0.3]])) == [{"accuracy": 1.0}]
    assert p.outcomes(case([[False, False, True]]), np.array([[0.1, 0.5, 0.3]])) == [{"accuracy": 0.0}]
    assert p.outcomes(case([[True, False]]), np.array([[0.5, 0.5]])) == [{"accuracy": 0.0}]  # tie
    assert p.outcomes(case([[True, False]]), np.array([0.6, 0.5])) == [{"accuracy": 1.0}]  # 1-D row
    assert p.outcomes(case([[True, False]]), np.array([[np.nan, 0.5]])) == [{"accuracy": 0.0}]
    # a text-only case (no images) uses the implicit single row
    assert p.outcomes(case([[True, False]], images=0), np.array([[0.6, 0.5]])) == [{"accuracy": 1.0}]


def test_i2t_top1_rejects_other_shapes():
    p = get_protocol("i2t-top1")
    with pytest.raises(DataError, match="one image"):
        p.outcomes(case(np.eye(2)), np.zeros((2, 2)))
    with pytest.raises(DataError, match="exactly one positive"):
        p.outcomes(case([[True, True, False]]), np.zeros((1, 3)))
    # a caption alone (a CREPE row with no negatives) ranks first, as CREPE's get_one2many_rank
    assert p.outcomes(case([[True]]), np.zeros((1, 1))) == [{"accuracy": 1.0}]
    with pytest.raises(DataError, match="shape"):
        p.outcomes(case([[True, False]]), np.zeros((1, 3)))


def test_blind_top1_same_rule():
    p = get_protocol("blind-top1")
    assert p.outcomes(case([[False, True]], images=0), np.array([[-5.0, -3.0]])) == [{"accuracy": 1.0}]


def test_aro_macro_relations_hand_worked():
    assert "near" in ARO_SYMMETRIC_RELATIONS and "on" not in ARO_SYMMETRIC_RELATIONS
    rel = ["on", "on", "on", "left of", "near", "near"]
    win = [1, 1, 0, 0, 1, 1]
    cases = [case([[False, True]], cid=f"r{k}", relation=r) for k, r in enumerate(rel)]
    mats = [[[0.0, 1.0]] if w else [[1.0, 0.0]] for w in win]
    # macro over non-symmetric relations: on 2/3, left of 0 -> 1/3; micro 4/6
    assert metrics("aro-macro", cases, mats) == approx({"macro_accuracy": 100 / 3, "accuracy": 200 / 3})


def test_aro_macro_attributes_hand_worked():
    groups = [("white_black", 25, 25), ("red_blue", 25, 20), ("tall_short", 3, 0)]
    cases, mats = [], []
    for attr, n, wins in groups:
        for k in range(n):
            cases.append(case([[True, False]], cid=f"{attr}{k}", attributes=attr))
            mats.append([[1.0, 0.0]] if k < wins else [[0.0, 1.0]])
    # groups with >= 25 cases: 100 and 80 -> 90; micro 45 / 53
    assert metrics("aro-macro", cases, mats) == approx({"macro_accuracy": 90.0, "accuracy": 4500 / 53})


def test_aro_macro_without_group_tag_is_nan():
    m = metrics("aro-macro", [case([[True, False]])], [[[1.0, 0.0]]])
    assert np.isnan(m["macro_accuracy"]) and m["accuracy"] == 100.0


# ------------------------------------------------------------------------------- VALSE
def test_valse_pairwise_hand_worked():
    p = get_protocol("valse-pairwise")
    assert p.outcomes(case([[True, False]]), np.array([[0.3, 0.2]])) == [{"acc_r": 1.0}]
    assert p.outcomes(case([[False, True]]), np.array([[0.3, 0.2]])) == [{"acc_r": 0.0}]  # foil first
    assert p.outcomes(case([[True, False]]), np.array([[0.3, 0.3]])) == [{"acc_r": 0.0}]
    with pytest.raises(DataError, match="caption, foil"):
        p.outcomes(case([[True, False, False]]), np.zeros((1, 3)))


def test_valse_prob_hand_worked():
    # (p(caption), p(foil)): fits = p_cap > .5; detected = p_foil < .5 (strict, EqBen's code)
    pairs = [(0.8, 0.3), (0.6, 0.7), (0.4, 0.2), (0.5, 0.5)]
    cases = [case([[True, False]], cid=f"v{k}") for k in range(4)]
    mats = [[[c, f]] for c, f in pairs]
    cases[2] = case([[False, True]], cid="v2")  # caption second: the truth decides, not the position
    mats[2] = [[0.2, 0.4]]
    got = [get_protocol("valse-prob").outcomes(c, np.array(m))[0] for c, m in zip(cases, mats, strict=True)]
    assert [g["p_c"] for g in got] == [1, 1, 0, 0]
    assert [g["p_f"] for g in got] == [1, 0, 1, 0]
    assert [g["acc"] for g in got] == [1, 0.5, 0.5, 0]
    assert [g["acc_r"] for g in got] == [1, 0, 1, 0]
    assert metrics("valse-prob", cases, mats) == approx(
        {"acc": 50.0, "p_c": 50.0, "p_f": 50.0, "min_pc_pf": 50.0, "acc_r": 50.0}
    )
    # argmax (VALSE's lxmert_valse_eval.py): p_foil <= .5 is detected; the tied pair ranks the caption first
    argmax = get_protocol("valse-prob", "argmax")
    got = [argmax.outcomes(c, np.array(m))[0] for c, m in zip(cases, mats, strict=True)]
    assert [g["p_f"] for g in got] == [1, 0, 1, 1]
    assert [g["acc_r"] for g in got] == [1, 0, 1, 1]


def test_valse_prob_rejects_non_probabilities():
    with pytest.raises(DataError, match=r"\[0, 1\]"):
        get_protocol("valse-prob").outcomes(case([[True, False]]), np.array([[1.5, 0.2]]))


# ------------------------------------------------------------------------------- VISLA
def t2t_matrix(p1p2, p1n, p2n, order=(0, 1, 2)):
    """Symmetric text-text similarity for texts placed at ``order`` = (pos of p1, p2, n)."""
    s = np.eye(3)
    a, b, c = order
    s[a, b] = s[b, a] = p1p2
    s[a, c] = s[c, a] = p1n
    s[b, c] = s[c, b] = p2n
    return s


def test_visla_t2t_hand_worked():
    roles = ("p1", "p2", "n")
    cases = [case([[True, True, False]], cid=f"t{k}", roles=roles) for k in range(3)]
    mats = [t2t_matrix(0.8, 0.9, 0.5), t2t_matrix(0.9, 0.7, 0.6), t2t_matrix(0.5, 0.6, 0.7)]
    got = [get_protocol("visla-t2t").outcomes(c, m)[0] for c, m in zip(cases, mats, strict=True)]
    # lexical trap: S(P1, N) = .9 > S(P1, P2) = .8 -> P2-N fails for query P1, P1-N holds for P2
    assert got[0] == {"accuracy": 0.0, "p1_n": 1.0, "p2_n": 0.0}
    assert got[1] == {"accuracy": 1.0, "p1_n": 1.0, "p2_n": 1.0}
    assert got[2] == {"accuracy": 0.0, "p1_n": 0.0, "p2_n": 0.0}
    assert metrics("visla-t2t", cases, mats) == approx(
        {"accuracy": 100 / 3, "p1_n": 200 / 3, "p2_n": 100 / 3}
    )


def test_visla_t2t_uses_roles_not_positions():
    # texts stored as (n, p1, p2)
    c = case([[False, True, True]], roles=("n", "p1", "p2"))
    s = t2t_matrix(0.8, 0.9, 0.5, order=(1, 2, 0))
    assert get_protocol("visla-t2t").outcomes(c, s)[0] == {"accuracy": 0.0, "p1_n": 1.0, "p2_n": 0.0}
    # without roles: the true texts in order are P1, P2
    c2 = case([[False, True, True]])
    assert get_protocol("visla-t2t").outcomes(c2, s)[0] == {"accuracy": 0.0, "p1_n": 1.0, "p2_n": 0.0}


def test_visla_t2t_ties_fail():
    c = case([[True, True, False]], roles=("p1", "p2", "n"))
    out = get_protocol("visla-t2t").outcomes(c, t2t_matrix(0.5, 0.5, 0.5))[0]
    assert out == {"accuracy": 0.0, "p1_n": 0.0, "p2_n": 0.0}


def test_visla_i2t_hand_worked():
    c = case([[True, True, False]], roles=("p1", "p2", "n"))
    p = get_protocol("visla-i2t")
    assert p.outcomes(c, np.array([[0.3, 0.2, 0.25]]))[0] == {"accuracy": 0.0, "p1_n": 1.0, "p2_n": 0.0}
    assert p.outcomes(c, np.array([[0.3, 0.4, 0.25]]))[0] == {"accuracy": 1.0, "p1_n": 1.0, "p2_n": 1.0}
    with pytest.raises(DataError, match="roles"):
        p.outcomes(case([[True, True, False]], roles=("a", "b", "c")), np.zeros((1, 3)))
    with pytest.raises(DataError, match="3 texts"):
        p.outcomes(case([[True, False]]), np.zeros((1, 2)))


# ------------------------------------------------------------------------------- retrieval
def test_retrieval_hand_worked_with_tie():
    truth = [[True, True, False, False], [False, False, True, True]]
    s = np.array([[0.9, 0.1, 0.9, 0.2], [0.3, 0.4, 0.6, 0.6]])
    # i2t: image 0's best caption (.9) ties false text 2 -> rank 2 (pessimistic); image 1 rank 1
    # t2i: t0 (.9 vs .3) ok; t1 (.1 vs .4) rank 2; t2 (.6 vs .9) rank 2; t3 (.6 vs .2) ok
    i2t, t2i = retrieval_ranks(s, np.asarray(truth))
    assert i2t.tolist() == [1, 0] and t2i.tolist() == [0, 1, 1, 0]
    c = case(truth, cid="g")
    got = metrics("retrieval", [c], [s])
    assert got == approx(
        {
            "i2t_r1": 50,
            "i2t_r5": 100,
            "i2t_r10": 100,
            "t2i_r1": 50,
            "t2i_r5": 100,
            "t2i_r10": 100,
            "rsum": 500,
        }
    )
    assert get_protocol("retrieval").unit_ids(c, 6) == ["g/i2t/0", "g/i2t/1"] + [
        f"g/t2i/{k}" for k in range(4)
    ]


def naive_ranks(s, truth):
    """Rank by full sorting, ties pessimistic: 0-based position of the best true candidate."""
    i2t = []
    for i in range(s.shape[0]):
        best = s[i, truth[i]].max()
        i2t.append(int(np.sum((s[i] >= best) & ~truth[i])))
    t2i = []
    for t in range(s.shape[1]):
        best = s[truth[:, t], t].max()
        t2i.append(int(np.sum((s[:, t] >= best) & ~truth[:, t])))
    return i2t, t2i


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(2, 7),
    per=st.integers(1, 3),
    chunk=st.integers(1, 5),
    seed=st.integers(0, 2**31 - 1),
)
def test_retrieval_ranks_match_naive(n, per, chunk, seed):
    rng = np.random.default_rng(seed)
    t = n * per
    truth = np.zeros((n, t), dtype=bool)
    truth[np.repeat(np.arange(n), per), np.arange(t)] = True
    s = rng.integers(0, 4, size=(n, t)).astype(np.float32)  # many ties
    i2t, t2i = retrieval_ranks(s, truth, chunk=chunk)
    assert (i2t.tolist(), t2i.tolist()) == naive_ranks(s, truth)


def test_retrieval_nan_is_pessimistic():
    truth = np.array([[True, False, False], [False, True, True]])
    s = np.array([[0.9, np.nan, 0.1], [np.nan, 0.2, 0.3]])
    i2t, t2i = retrieval_ranks(s, truth)
    assert i2t.tolist() == [1, 1]  # a NaN false candidate counts as ranked above the truth
    assert t2i.tolist() == [1, 1, 0]
    s[0, 0] = np.nan  # image 0's only caption has no usable score: both queries fail
    i2t, t2i = retrieval_ranks(s, truth)
    assert np.isinf(i2t[0]) and np.isinf(t2i[0])


def test_retrieval_large_gallery_chunks():
    rng = np.random.default_rng(0)
    n, per = 300, 5
    truth = np.zeros((n, n * per), dtype=bool)
    truth[np.repeat(np.arange(n), per), np.arange(n * per)] = True
    s = rng.standard_normal((n, n * per)).astype(np.float32)
    a = retrieval_ranks(s, truth, chunk=7)
    b = retrieval_ranks(s, truth)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


# ------------------------------------------------------------------------------- invariants
# Each generator returns (case, perfect scores, scorer for a score matrix of random values,
# function applying a consistent permutation to (case, scores)).


def _permute_case(c: Case, text_perm, image_perm=None) -> Case:
    truth = c.truth[:, text_perm]
    images = c.images
    if image_perm is not None:
        truth = truth[image_perm]
        images = tuple(c.images[k] for k in image_perm)
    return Case(
        id=c.id,
        texts=tuple(c.texts[k] for k in text_perm),
        truth=truth,
        images=images,
        tags=c.tags,
        roles=tuple(c.roles[k] for k in text_perm) if c.roles else (),
    )


@st.composite
def scenario(draw, name):
    """(cases, perfect matrices, random matrices, permuted cases, permuted random matrices)."""
    n_cases = draw(st.integers(1, 6))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    cases, perfect, rand, pcases, prand = [], [], [], [], []
    for k in range(n_cases):
        cid = f"c{k}"
        image_perm = None
        if name == "group":
            truth = np.eye(2, dtype=bool)[rng.permutation(2)]
            c = case(truth, cid=cid)
            image_perm = rng.permutation(2)
        elif name == "spec":
            kk = int(rng.integers(2, 6))
            c = case(np.eye(kk, dtype=bool), cid=cid)
            image_perm = rng.permutation(kk)
        elif name == "retrieval":
            n, per = int(rng.integers(2, 6)), int(rng.integers(1, 4))
            truth = np.zeros((n, n * per), dtype=bool)
            truth[np.repeat(np.arange(n), per), np.arange(n * per)] = True
            c = case(truth, cid=cid)
            image_perm = rng.permutation(n)
        elif name in ("i2t-top1", "aro-macro", "blind-top1"):
            m = int(rng.integers(2, 6))
            truth = np.zeros((1, m), dtype=bool)
            truth[0, rng.integers(m)] = True
            c = case(
                truth,
                cid=cid,
                images=0 if name == "blind-top1" else 1,
                relation=str(rng.choice(["on", "in"])),
            )
        elif name in ("valse-pairwise", "valse-prob"):
            c = case([[True, False]] if rng.random() < 0.5 else [[False, True]], cid=cid)
        else:  # visla
            order = rng.permutation(3)
            roles = tuple(np.array(["p1", "p2", "n"])[order])
            c = case([[r != "n" for r in roles]], cid=cid, roles=roles)
        text_perm = rng.permutation(len(c.texts))
        if name == "visla-t2t":
            pos = c.truth[0]
            good = np.outer(pos, pos).astype(float)
            np.fill_diagonal(good, 1.0)
            r = rng.integers(0, 3, size=(3, 3)).astype(float)
            r = (r + r.T) / 2
            prs = r[np.ix_(text_perm, text_perm)]
        else:
            good = c.truth.astype(float)
            r = rng.integers(0, 3, size=c.truth.shape).astype(float) / 2  # in [0, 1], with ties
            rows = image_perm if image_perm is not None else np.arange(r.shape[0])
            prs = r[np.ix_(rows, text_perm)]
        cases.append(c)
        perfect.append(good)
        rand.append(r)
        pcases.append(_permute_case(c, text_perm, image_perm))
        prand.append(prs)
    return cases, perfect, rand, pcases, prand


STRICT = {  # metrics a constant scorer must get 0 on
    "group": ("text", "image", "group"),
    "spec": ("i2t", "t2i"),
    "i2t-top1": ("accuracy",),
    "blind-top1": ("accuracy",),
    "aro-macro": ("accuracy", "macro_accuracy"),
    "valse-pairwise": ("acc_r",),
    "valse-prob": ("min_pc_pf", "acc_r"),
    "visla-t2t": ("accuracy", "p1_n", "p2_n"),
    "visla-i2t": ("accuracy", "p1_n", "p2_n"),
    "retrieval": ("i2t_r1", "t2i_r1"),
}


@pytest.mark.parametrize("name", sorted(STRICT))
@settings(max_examples=30, deadline=None)
@given(data=st.data(), const=st.sampled_from([0.0, 0.5, 1.0, 0.3]))
def test_invariants(name, data, const):
    cases, perfect, rand, pcases, prand = data.draw(scenario(name))
    p = get_protocol(name)
    # perfect scorer: 100 on everything
    for m, v in metrics(name, cases, perfect).items():
        assert v == pytest.approx(600.0 if m == "rsum" else 100.0), m
    # constant scorer: 0 on every strict metric
    const_mats = [np.full_like(g, const) for g in perfect]
    got = metrics(name, cases, const_mats)
    for m in STRICT[name]:
        assert got[m] == 0.0, m
    if name == "valse-prob":  # on the threshold neither caption nor foil is decided (strict)
        assert got["acc"] == (0.0 if const == 0.5 else 50.0)
    if name == "retrieval":  # R@K = share of queries with fewer than K false candidates
        for k in (5, 10):
            want = []
            for c in cases:
                rows = c.truth.any(1) & ~c.truth.all(1)
                cols = c.truth.any(0) & ~c.truth.all(0)
                want_i = (~c.truth[rows]).sum(1) < k
                want_t = (~c.truth[:, cols]).sum(0) < k
                want.append((want_i, want_t))
            wi = np.concatenate([w[0] for w in want]).mean() * 100
            wt = np.concatenate([w[1] for w in want]).mean() * 100
            assert got[f"i2t_r{k}"] == pytest.approx(wi) and got[f"t2i_r{k}"] == pytest.approx(wt)
    # a consistent permutation of candidates (texts + truth columns + roles, and images) changes nothing
    assert metrics(name, pcases, prand) == approx(metrics(name, cases, rand))
    if name not in ("spec", "retrieval"):  # one unit per case: outcomes are identical case by case
        for c, r, pc, pr in zip(cases, rand, pcases, prand, strict=True):
            assert p.outcomes(pc, pr) == p.outcomes(c, r)
