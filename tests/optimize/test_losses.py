"""Losses of spotdiff.optimize.losses on hand-worked 2 x 2 and 3 x 3 examples, gradients, equivariant zeros."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from spotdiff.optimize.losses import (
    clip_contrastive_loss,
    close_pair_mask,
    eqsim_loss,
    eqsim_v1,
    eqsim_v2,
    normalize_scores,
    spec_hn_i2t,
    spec_hn_loss,
    spec_hn_t2i,
    spec_loss,
)
from spotdiff.protocols.equivariance import equivariance_deviations, equivariance_score

S2 = [[0.5, 0.1], [0.3, 0.2]]
S3 = [[1.0, 0.2, 0.1], [0.5, 0.8, 0.3], [0.0, 0.4, 0.6]]


def t(x, dtype=torch.float64, grad=False):
    return torch.tensor(x, dtype=dtype, requires_grad=grad)


def nll(pos, *others):
    """-log(exp(pos) / sum(exp(all))) for the positive logit and the denominator's other logits."""
    return -pos + math.log(math.exp(pos) + sum(math.exp(o) for o in others))


# ------------------------------------------------------------------------------------------- CLIP


def test_clip_loss_2x2_by_hand():
    # logits = 2 * S = [[1.0, 0.2], [0.6, 0.4]]
    i2t = [math.log(1 + math.exp(-0.8)), math.log(1 + math.exp(0.2))]
    t2i = [math.log(1 + math.exp(-0.4)), math.log(1 + math.exp(-0.2))]
    expected = (sum(i2t) + sum(t2i)) / 4
    assert clip_contrastive_loss(t(S2), 2.0).item() == pytest.approx(expected, abs=1e-12)
    assert expected == pytest.approx(0.570099, abs=1e-6)
    per_pair = clip_contrastive_loss(t(S2), 2.0, reduction="none")
    assert per_pair.tolist() == pytest.approx([(i2t[0] + t2i[0]) / 2, (i2t[1] + t2i[1]) / 2])


def test_clip_loss_3x3_by_hand():
    s = np.array(S3)
    i2t = [nll(s[i, i], *[s[i, j] for j in range(3) if j != i]) for i in range(3)]
    t2i = [nll(s[i, i], *[s[j, i] for j in range(3) if j != i]) for i in range(3)]
    assert clip_contrastive_loss(t(S3)).item() == pytest.approx((sum(i2t) + sum(t2i)) / 6, abs=1e-12)
    assert clip_contrastive_loss(t(S3), reduction="sum").item() == pytest.approx((sum(i2t) + sum(t2i)) / 2)


def test_clip_loss_gradcheck_including_logit_scale():
    sim = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
    scale = torch.tensor(3.0, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda s, c: clip_contrastive_loss(s, c), (sim, scale))


def test_clip_loss_rejects_non_square():
    with pytest.raises(ValueError, match="square"):
        clip_contrastive_loss(torch.zeros(2, 3))


# ------------------------------------------------------------------------------------------- SPEC


def test_spec_hn_2x2_by_hand():
    sim = t(S2)
    hn_text = t([[0.4, 9.0], [0.0, 9.0]])  # column 1 is padding
    hn_text_mask = torch.tensor([[True, False], [False, False]])
    hn_image = t([[0.7], [0.9]])
    hn_image_mask = torch.tensor([[True], [True]])
    # Eq. 7: image 0 sees T0, T1 and its hard negative 0.4; image 1 sees T0, T1 only
    i2t = [nll(0.5, 0.1, 0.4), nll(0.2, 0.3)]
    # Eq. 8: text 0 sees I0, I1 and hard-negative image 0.7; text 1 sees I0, I1 and 0.9
    t2i = [nll(0.5, 0.3, 0.7), nll(0.2, 0.1, 0.9)]
    got_i2t = spec_hn_i2t(sim, hn_text, hn_text_mask=hn_text_mask, reduction="sum")
    got_t2i = spec_hn_t2i(sim, hn_image, hn_image_mask=hn_image_mask, reduction="sum")
    assert got_i2t.item() == pytest.approx(sum(i2t), abs=1e-12)
    assert got_t2i.item() == pytest.approx(sum(t2i), abs=1e-12)
    total = spec_hn_loss(sim, hn_text, hn_image, hn_text_mask=hn_text_mask, hn_image_mask=hn_image_mask)
    assert total.item() == pytest.approx(sum(i2t) / 2 + sum(t2i) / 2, abs=1e-12)


def test_spec_hn_3x3_trivial_mask_and_scale_by_hand():
    s = np.array(S3)
    c = 2.0
    # T1 is not a trivial negative of I0
    trivial = torch.tensor([[True, False, True], [True, True, True], [True, True, True]])
    hn_text = t([[0.6], [0.1], [0.2]])
    i2t = [
        nll(c * s[0, 0], c * s[0, 2], c * 0.6),
        nll(c * s[1, 1], c * s[1, 0], c * s[1, 2], c * 0.1),
        nll(c * s[2, 2], c * s[2, 0], c * s[2, 1], c * 0.2),
    ]
    got = spec_hn_i2t(t(S3), hn_text, trivial_mask=trivial, logit_scale=c, reduction="none")
    assert got.tolist() == pytest.approx(i2t, abs=1e-12)
    # t2i: the mask is read as [image, text], so text 1 loses image 0 from its denominator
    t2i = [
        nll(c * s[0, 0], c * s[1, 0], c * s[2, 0]),
        nll(c * s[1, 1], c * s[2, 1]),
        nll(c * s[2, 2], c * s[0, 2], c * s[1, 2]),
    ]
    got = spec_hn_t2i(t(S3), None, trivial_mask=trivial, logit_scale=c, reduction="none")
    assert got.tolist() == pytest.approx(t2i, abs=1e-12)


def test_spec_hn_without_hard_negatives_is_twice_clip():
    sim = torch.randn(5, 5, dtype=torch.float64)
    assert spec_hn_loss(sim, logit_scale=7.0).item() == pytest.approx(
        2 * clip_contrastive_loss(sim, 7.0).item(), abs=1e-12
    )


def test_spec_hn_grouped_equals_union_infonce():
    """Case-mates moved from the trivial set to the hard negatives leave each denominator unchanged."""
    torch.manual_seed(0)
    sim = torch.randn(4, 4, dtype=torch.float64)
    group = torch.tensor([0, 0, 1, 1])
    same = group[:, None] == group[None, :]
    trivial = ~same | torch.eye(4, dtype=torch.bool)
    mate = torch.tensor([1, 0, 3, 2])
    hn_text = sim[torch.arange(4), mate].unsqueeze(1)
    hn_image = sim[mate, torch.arange(4)].unsqueeze(1)
    got = spec_hn_loss(sim, hn_text, hn_image, trivial_mask=trivial, logit_scale=2.0)
    assert got.item() == pytest.approx(2 * clip_contrastive_loss(sim, 2.0).item(), abs=1e-12)


def test_spec_loss_eq9_combines_terms():
    clip_sim = torch.randn(3, 3, dtype=torch.float64)
    hn_sim = torch.randn(2, 2, dtype=torch.float64)
    hn_text = torch.randn(2, 1, dtype=torch.float64)
    expected = clip_contrastive_loss(clip_sim, 5.0) + 0.2 * spec_hn_loss(hn_sim, hn_text, logit_scale=5.0)
    got = spec_loss(clip_sim, hn_sim, hn_text, lam=0.2, logit_scale=5.0)
    assert got.item() == pytest.approx(expected.item(), abs=1e-12)
    assert spec_loss(None, hn_sim, lam=1.0).item() == pytest.approx(spec_hn_loss(hn_sim).item())
    assert spec_loss(clip_sim, None).item() == pytest.approx(clip_contrastive_loss(clip_sim).item())


def test_spec_hn_gradcheck():
    torch.manual_seed(1)
    sim = torch.randn(3, 3, dtype=torch.float64, requires_grad=True)
    hn_text = torch.randn(3, 2, dtype=torch.float64, requires_grad=True)
    hn_image = torch.randn(3, 2, dtype=torch.float64, requires_grad=True)
    scale = torch.tensor(2.5, dtype=torch.float64, requires_grad=True)
    m_text = torch.tensor([[True, True], [True, False], [False, False]])
    m_image = torch.tensor([[True, False], [True, True], [False, True]])
    trivial = torch.tensor([[True, False, True], [True, True, True], [False, True, True]])

    def f(s, ht, hi, c):
        return spec_hn_loss(s, ht, hi, hn_text_mask=m_text, hn_image_mask=m_image, trivial_mask=trivial, logit_scale=c)

    assert torch.autograd.gradcheck(f, (sim, hn_text, hn_image, scale))


# ----------------------------------------------------------------------------------------- EqSim


def test_eqsim_v1_v2_2x2_by_hand():
    s = t([[0.9, 0.2], [0.4, 0.7]])
    s11, s12, s21, s22 = s[0, 0], s[0, 1], s[1, 0], s[1, 1]
    assert eqsim_v1(s12, s21).item() == pytest.approx(0.04)  # (0.2 - 0.4)^2
    assert eqsim_v1(s12, s21, alpha=0.01).item() == pytest.approx(0.03)
    assert eqsim_v1(s12, s21, alpha=0.1).item() == 0.0  # hinge
    # (0.9 - 0.2) - (0.7 - 0.4) = 0.4 ; (0.9 - 0.4) - (0.7 - 0.2) = 0
    assert eqsim_v2(s11, s12, s21, s22).item() == pytest.approx(0.16)
    assert eqsim_v2(s11, s12, s21, s22, alpha=0.06).item() == pytest.approx(0.10)  # second term hinged to 0
    assert eqsim_loss(s, variant="v1", score="raw").item() == pytest.approx(0.04)
    assert eqsim_loss(s, variant="v2", score="raw", beta=0.5).item() == pytest.approx(0.08)


def test_eqsim_3x3_by_hand():
    s = t(S3)
    # pairs (0,1), (0,2), (1,2): s12 - s21 = -0.3, 0.1, -0.1
    assert eqsim_loss(s, variant="v1", score="raw").item() == pytest.approx(0.11 / 3)
    # image-side deviations 0.5, 0.3, 0.3 ; text-side -0.1, 0.5, 0.1
    assert eqsim_loss(s, variant="v2", score="raw").item() == pytest.approx(0.43 / 3 + 0.27 / 3)
    # top-1 closeness: rows pick (0,1), (1,0), (2,1); columns pick (1,0), (2,1), (1,2) -> {(0,1), (1,2)}
    close = close_pair_mask(s, k=1)
    assert close.nonzero().tolist() == [[0, 1], [1, 2]]
    hybrid = 0.11 / 3 + (0.25 + 0.09) / 2 + (0.01 + 0.01) / 2
    assert eqsim_loss(s, variant="hybrid", k=1, score="raw").item() == pytest.approx(hybrid)
    assert eqsim_loss(s, variant="hybrid", k=1, score="raw", beta=0.5).item() == pytest.approx(hybrid / 2)
    # extra close pairs (a candidate set) join the top-k ones; k large makes hybrid = v1 + v2
    extra = torch.zeros(3, 3, dtype=torch.bool)
    extra[2, 0] = True
    assert close_pair_mask(s, k=1, close=extra).nonzero().tolist() == [[0, 1], [0, 2], [1, 2]]
    full = eqsim_loss(s, variant="v1", score="raw") + eqsim_loss(s, variant="v2", score="raw")
    assert eqsim_loss(s, variant="hybrid", k=8, score="raw").item() == pytest.approx(full.item())


def test_eqsim_cosine_is_row_softmax_and_itm_is_sigmoid():
    s = t(S3)
    p = torch.softmax(3.0 * s, dim=1)
    expected = eqsim_loss(p, variant="v2", score="raw")
    got = eqsim_loss(s, variant="v2", score="cosine", logit_scale=3.0)
    assert got.item() == pytest.approx(expected.item())
    assert torch.allclose(normalize_scores(s, "itm"), torch.sigmoid(s))
    q = torch.sigmoid(s)
    assert eqsim_loss(s, variant="v1", score="itm").item() == pytest.approx(
        eqsim_loss(q, variant="v1", score="raw").item()
    )


@pytest.mark.parametrize("variant", ["v1", "v2", "hybrid"])
@pytest.mark.parametrize("score", ["raw", "cosine", "itm"])
def test_eqsim_zero_on_equivariant_matrix(variant, score):
    # symmetric with a constant diagonal: s12 = s21 and s11 = s22 for every pair; circulant, so its
    # row softmax is symmetric with a constant diagonal as well
    n = 5
    base = torch.tensor([0.9, 0.3, -0.2, -0.2, 0.3], dtype=torch.float64)
    s = torch.stack([base.roll(i) for i in range(n)])
    assert torch.equal(s, s.t())
    loss = eqsim_loss(s, variant=variant, score=score, k=2, logit_scale=4.0)
    assert loss.item() == pytest.approx(0.0, abs=1e-15)


def test_eqsim_zero_on_equivariant_raw_matrix_any_symmetric():
    torch.manual_seed(0)
    a = torch.randn(6, 6, dtype=torch.float64)
    s = (a + a.t()) / 2
    s.fill_diagonal_(2.0)
    for variant in ("v1", "v2", "hybrid"):
        assert eqsim_loss(s, variant=variant, score="raw", k=3).item() == pytest.approx(0.0, abs=1e-15)


@pytest.mark.parametrize("variant", ["v1", "v2", "hybrid"])
@pytest.mark.parametrize("score", ["cosine", "itm"])
def test_eqsim_gradcheck(variant, score):
    torch.manual_seed(2)
    sim = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
    scale = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda s, c: eqsim_loss(s, variant=variant, score=score, k=1, logit_scale=c, alpha=1e-6, beta=0.7),
        (sim, scale),
    )


def test_eqsim_single_pair_batch_and_empty():
    one = torch.tensor([[1.0]], requires_grad=True)
    for variant in ("v1", "v2", "hybrid"):
        loss = eqsim_loss(one, variant=variant)
        assert loss.item() == 0.0
        loss.backward()  # no pairs: a zero that still backpropagates


def test_eqsim_rejects_unknown_variant():
    with pytest.raises(ValueError, match="variant"):
        eqsim_loss(torch.eye(2), variant="v3")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- equivariance score


def test_equivariance_score_by_hand_numpy_and_torch():
    cases = np.array([[[0.9, 0.2], [0.4, 0.7]], [[0.8, 0.1], [0.1, 0.8]], [[0.5, 0.6], [0.2, 0.1]]])
    # case 0: (0.4, 0.0); case 1: exactly equivariant; case 2: (-0.1 - (-0.1), 0.3 - (-0.5))
    dev = equivariance_deviations(cases)
    assert dev.shape == (3, 2)
    assert np.allclose(dev, [[0.4, 0.0], [0.0, 0.0], [0.0, 0.8]])
    score = equivariance_score(cases)
    assert isinstance(score, np.ndarray)
    assert score.tolist() == pytest.approx([0.16, 0.0, 0.64])
    tscore = equivariance_score(torch.tensor(cases))
    assert isinstance(tscore, torch.Tensor)
    assert tscore.tolist() == pytest.approx([0.16, 0.0, 0.64])
    # one case's score is EqSim-v2 with alpha = 0 on that case
    s = torch.tensor(cases[2])
    assert tscore[2].item() == pytest.approx(eqsim_loss(s, variant="v2", score="raw").item())


def test_equivariance_score_vectorised_shapes_and_softmax():
    rng = np.random.default_rng(0)
    cases = rng.normal(size=(4, 3, 2, 2))
    score = equivariance_score(cases, normalize="softmax")
    assert score.shape == (4, 3)
    e = np.exp(cases)
    p = e / e.sum(-1, keepdims=True)
    assert score == pytest.approx(equivariance_score(p))
    torch_score = equivariance_score(torch.tensor(cases), normalize="softmax")
    assert torch_score.numpy() == pytest.approx(score)
    with pytest.raises(ValueError, match=r"2, 2"):
        equivariance_score(np.zeros((3, 3)))


def test_equivariance_score_gradcheck():
    x = torch.randn(3, 2, 2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda s: equivariance_score(s, normalize="softmax"), (x,))


def test_equivariance_plot(tmp_path):
    from spotdiff.report.equivariance import equivariance_scores_from_matrices, plot_equivariance

    rng = np.random.default_rng(0)
    pt = equivariance_scores_from_matrices(rng.normal(scale=0.5, size=(200, 2, 2)))
    ours = equivariance_scores_from_matrices(rng.normal(scale=0.1, size=(200, 2, 2)))
    path = tmp_path / "eq.png"
    fig = plot_equivariance({"PT": pt, "Ours": ours}, group_scores={"PT": 10.0, "Ours": 12.5}, path=path)
    assert path.stat().st_size > 1000
    ax = fig.axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels[0].startswith("PT (group 10.00)") and labels[1].startswith("Ours (group 12.50)")
    # the tighter distribution has the higher peak near 0
    assert ax.get_lines()[1].get_ydata().max() > ax.get_lines()[0].get_ydata().max()
    fig_log = plot_equivariance({"PT": pt}, log_x=True)
    assert len(fig_log.axes[0].get_lines()) == 1
