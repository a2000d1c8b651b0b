"""The sigmoid (SigLIP) losses and the EqBen reference EqSim: hand-worked values, agreement with
transformers' SiglipModel loss, float64 gradchecks."""

from __future__ import annotations

import math

import pytest
import torch

from spotdiff.optimize.losses import (
    eqsim_loss,
    eqsim_reference,
    eqsim_v2,
    normalize_scores,
    reference_close_pairs,
    siglip_hn_loss,
    siglip_loss,
    spec_loss,
)

S2 = [[0.5, 0.1], [0.3, 0.2]]
S3 = [[1.0, 0.2, 0.1], [0.5, 0.8, 0.3], [0.0, 0.4, 0.6]]


def t(x, grad=False):
    return torch.tensor(x, dtype=torch.float64, requires_grad=grad)


def nls(x: float) -> float:
    """-log sigmoid(x)."""
    return math.log1p(math.exp(-x))


# ------------------------------------------------------------------------------------------ SigLIP


def test_siglip_loss_2x2_by_hand():
    # logits = 10 * S - 2 = [[3, -1], [1, 0]]; positives on the diagonal
    rows = [nls(3.0) + nls(1.0), nls(-1.0) + nls(0.0)]
    got = siglip_loss(t(S2), 10.0, -2.0, reduction="none")
    assert got.tolist() == pytest.approx(rows, abs=1e-12)
    assert siglip_loss(t(S2), 10.0, -2.0).item() == pytest.approx(sum(rows) / 2, abs=1e-12)
    assert sum(rows) / 2 == pytest.approx(1.18413, abs=1e-5)
    assert siglip_loss(t(S2), 10.0, -2.0, reduction="sum").item() == pytest.approx(sum(rows), abs=1e-12)


def test_siglip_loss_matches_transformers_siglip_model(tmp_path):
    from transformers import AutoTokenizer, SiglipModel

    from spotdiff.testing.tiny_models import make_tiny_siglip

    path = make_tiny_siglip(tmp_path / "siglip")
    model = SiglipModel.from_pretrained(path).double().eval()
    tok = AutoTokenizer.from_pretrained(path)
    enc = tok(["a red cat", "two dogs", "a big bus"], padding="max_length", max_length=16, return_tensors="pt")
    pixels = torch.randn(3, 3, 32, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        model.logit_bias.fill_(-1.5)  # away from the initial value, so a dropped bias would show
        out = model(input_ids=enc["input_ids"], pixel_values=pixels, return_loss=True)
        img = torch.nn.functional.normalize(out.image_embeds, dim=-1)
        txt = torch.nn.functional.normalize(out.text_embeds, dim=-1)
        ours = siglip_loss(img @ txt.t(), model.logit_scale.exp(), model.logit_bias)
    assert ours.item() == pytest.approx(out.loss.item(), rel=1e-10)


def test_siglip_loss_gradcheck_including_scale_and_bias():
    sim = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
    scale = t(3.0, grad=True)
    bias = t(-1.0, grad=True)
    assert torch.autograd.gradcheck(lambda s, c, b: siglip_loss(s, c, b), (sim, scale, bias))


def test_siglip_hn_2x2_by_hand_and_reduces_to_siglip():
    sim = t(S2)
    hn_text = t([[0.4, 9.0], [0.0, 9.0]])  # column 1 is padding
    hn_text_mask = torch.tensor([[True, False], [False, False]])
    hn_image = t([[0.7], [0.9]])
    # logits l = 2 * s - 1
    # anchor 0: positive 0.5 (logit 0); T1 0.1 (-0.8); hn text 0.4 (-0.2); hn image 0.7 (0.4)
    a0 = nls(0.0) + nls(0.8) + nls(0.2) + nls(-0.4)
    # anchor 1: positive 0.2 (-0.6); T0 0.3 (-0.4); hn image 0.9 (0.8)
    a1 = nls(-0.6) + nls(0.4) + nls(-0.8)
    got = siglip_hn_loss(
        sim, hn_text, hn_image, hn_text_mask=hn_text_mask, logit_scale=2.0, logit_bias=-1.0, reduction="none"
    )
    assert got.tolist() == pytest.approx([a0, a1], abs=1e-12)
    plain = siglip_hn_loss(sim, logit_scale=2.0, logit_bias=-1.0)
    assert plain.item() == pytest.approx(siglip_loss(sim, 2.0, -1.0).item(), abs=1e-12)


def test_siglip_hn_trivial_mask_moves_case_mates_to_hard_negatives():
    """Case-mates taken out of the trivial set and given back as hard negatives leave the loss unchanged."""
    torch.manual_seed(0)
    sim = torch.randn(4, 4, dtype=torch.float64)
    group = torch.tensor([0, 0, 1, 1])
    trivial = group[:, None] != group[None, :]
    mate = torch.tensor([1, 0, 3, 2])
    hn_text = sim[torch.arange(4), mate].unsqueeze(1)
    got = siglip_hn_loss(sim, hn_text, trivial_mask=trivial, logit_scale=2.0, logit_bias=0.5)
    assert got.item() == pytest.approx(siglip_loss(sim, 2.0, 0.5).item(), abs=1e-12)


def test_siglip_hn_gradcheck():
    torch.manual_seed(1)
    sim = torch.randn(3, 3, dtype=torch.float64, requires_grad=True)
    hn_text = torch.randn(3, 2, dtype=torch.float64, requires_grad=True)
    hn_image = torch.randn(3, 2, dtype=torch.float64, requires_grad=True)
    scale, bias = t(2.5, grad=True), t(-0.5, grad=True)
    m_text = torch.tensor([[True, True], [True, False], [False, False]])
    m_image = torch.tensor([[True, False], [True, True], [False, True]])
    trivial = torch.tensor([[True, False, True], [True, True, True], [False, True, True]])

    def f(s, ht, hi, c, b):
        return siglip_hn_loss(
            s, ht, hi, hn_text_mask=m_text, hn_image_mask=m_image, trivial_mask=trivial, logit_scale=c, logit_bias=b
        )

    assert torch.autograd.gradcheck(f, (sim, hn_text, hn_image, scale, bias))


# ----------------------------------------------------------------------------------- EqSim, sigmoid


def test_eqsim_sigmoid_scores_are_siglip_probabilities():
    s = t(S3)
    p = torch.sigmoid(4.0 * s - 1.0)
    assert torch.allclose(normalize_scores(s, "sigmoid", logit_scale=4.0, logit_bias=-1.0), p)
    got = eqsim_loss(s, variant="v2", score="sigmoid", logit_scale=4.0, logit_bias=-1.0)
    assert got.item() == pytest.approx(eqsim_loss(p, variant="v2", score="raw").item(), abs=1e-12)


def test_eqsim_sigmoid_zero_on_equivariant_matrix_and_gradcheck():
    base = torch.tensor([0.9, 0.3, -0.2, -0.2, 0.3], dtype=torch.float64)
    s = torch.stack([base.roll(i) for i in range(5)])  # symmetric, constant diagonal
    for variant in ("v1", "v2", "hybrid"):
        assert eqsim_loss(s, variant=variant, score="sigmoid", logit_scale=5.0, logit_bias=-2.0, k=2).item() == 0.0
    sim = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
    scale, bias = t(2.0, grad=True), t(-1.0, grad=True)
    assert torch.autograd.gradcheck(
        lambda x, c, b: eqsim_loss(x, score="sigmoid", k=1, logit_scale=c, logit_bias=b, alpha=1e-6), (sim, scale, bias)
    )


# --------------------------------------------------------------------------- EqSim, reference code


def test_eqsim_reference_3x3_by_hand():
    s = t(S3)
    first, second = torch.tensor([0, 0]), torch.tensor([1, 1])  # (0, 1) drawn twice
    # v1 on the easy pairs (0,2), (1,2), both orders, over 9 entries: 2 * (0.1^2 + 0.1^2) / 9
    v1 = 2 * (0.01 + 0.01) / 9
    # v2 on (0,1) twice: image side (1.0 - 0.2) - (0.8 - 0.5) = 0.5, text side (1.0 - 0.5) - (0.8 - 0.2) = -0.1
    v2 = 0.25 + 0.01
    assert eqsim_reference(s, first, second).item() == pytest.approx(v1 + v2, abs=1e-12)
    v2_alpha = max(0.25 - 0.1, 0.0) + max(0.01 - 0.1, 0.0)  # the margin hinges v2 only
    assert eqsim_reference(s, first, second, alpha=0.1).item() == pytest.approx(v1 + v2_alpha, abs=1e-12)
    assert eqsim_v2(t([1.0]), t([0.2]), t([0.5]), t([0.8])).item() == pytest.approx(v2, abs=1e-12)


def test_reference_close_pairs_follow_the_softmax():
    n = 6
    logits = torch.full((n, n), -50.0, dtype=torch.float64)
    for a in range(n):
        logits[a, (a + 1) % n] = 50.0  # text a+1 is image a's only likely text, image a-1 text a's only image
    first, second = reference_close_pairs(logits, k=2, generator=torch.Generator().manual_seed(0))
    assert first.tolist() == list(range(n)) * 2
    assert second.tolist() == [(a + 1) % n for a in range(n)] + [(a - 1) % n for a in range(n)]
    # k = 8 draws 4 texts and 4 images per anchor, never the anchor itself
    torch.manual_seed(0)
    f, s = reference_close_pairs(torch.randn(9, 9), k=8)
    assert len(f) == 9 * 8 and not torch.any(f == s)
    assert reference_close_pairs(torch.zeros(1, 1), k=8)[0].numel() == 0


def test_eqsim_reference_variant_in_eqsim_loss_and_gradcheck():
    torch.manual_seed(3)
    sim = torch.randn(5, 5, dtype=torch.float64)
    close = torch.zeros(5, 5, dtype=torch.bool)
    close[0, 4] = True
    gen = torch.Generator().manual_seed(7)
    got = eqsim_loss(sim, variant="reference", k=2, logit_scale=3.0, beta=0.5, close=close, generator=gen)
    f, s = reference_close_pairs(sim * 3.0, 2, generator=torch.Generator().manual_seed(7))
    f, s = torch.cat([f, torch.tensor([0])]), torch.cat([s, torch.tensor([4])])
    expected = 0.5 * eqsim_reference(torch.softmax(3.0 * sim, dim=1), f, s)
    assert got.item() == pytest.approx(expected.item(), abs=1e-12)
    # an equivariant matrix gives zero whatever is drawn
    base = torch.tensor([0.9, 0.3, -0.2, -0.2, 0.3], dtype=torch.float64)
    eq = torch.stack([base.roll(i) for i in range(5)])
    assert eqsim_loss(eq, variant="reference", k=4, logit_scale=4.0).item() == pytest.approx(0.0, abs=1e-15)
    x = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
    scale = t(2.0, grad=True)
    assert torch.autograd.gradcheck(
        lambda a, c: eqsim_loss(
            a, variant="reference", k=2, logit_scale=c, alpha=1e-6, generator=torch.Generator().manual_seed(1)
        ),
        (x, scale),
    )


def test_spec_loss_named_terms_in_both_forms():
    """Eq. 9 with its terms apart, in the train log's order; a bias switches both terms to the sigmoid form."""
    torch.manual_seed(2)
    clip_sim, hn_sim, hn_text = t(S3), t(S2), torch.randn(2, 1, dtype=torch.float64)
    terms = spec_loss(clip_sim, hn_sim, hn_text, lam=0.5, logit_scale=3.0, output_dict=True)
    assert list(terms) == ["total", "hn", "clip"]
    assert terms["total"].item() == pytest.approx(spec_loss(clip_sim, hn_sim, hn_text, lam=0.5, logit_scale=3.0).item())
    sig = spec_loss(clip_sim, hn_sim, hn_text, lam=0.5, logit_scale=3.0, logit_bias=-1.0, output_dict=True)
    assert list(sig) == ["total", "hn", "siglip"]
    assert sig["siglip"].item() == pytest.approx(siglip_loss(clip_sim, 3.0, -1.0).item(), abs=1e-12)
    assert sig["hn"].item() == pytest.approx(siglip_hn_loss(hn_sim, hn_text, logit_scale=3.0, logit_bias=-1.0).item())
    assert sig["total"].item() == pytest.approx((sig["siglip"] + 0.5 * sig["hn"]).item(), abs=1e-12)
    assert list(spec_loss(None, hn_sim, output_dict=True)) == ["total", "hn"]
