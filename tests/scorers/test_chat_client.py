"""The request client of any OpenAI-compatible server, alone (no scorer around it): a stream of plans is answered
in order, at most ``concurrency`` requests at a time, a transient failure asked again after a logged wait, and
the requests sent and their tokens counted in the owner's usage (issue 43, item 2: the client is its own module)."""

from __future__ import annotations

import logging
import re

import pytest

from spotdiff.scorers import ScorerOptions, load_scorer
from spotdiff.scorers.client import ChatClient
from spotdiff.testing.openai_server import ChatCompletionsServer
from spotdiff.testing.tiny_vlms import make_tiny_vlm


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = make_tiny_vlm("qwen2_vl", tmp_path_factory.mktemp("vlm") / "qwen2_vl")
    chat = load_scorer(f"vqa:{path}", ScorerOptions(device="cpu")).chat
    with ChatCompletionsServer(chat, delay=0.05) as srv:
        yield srv


def _plan(n: int):
    """One call: three text conversations; its result is ``n`` and the replies it read."""
    bodies = [{"model": "tiny-vlm", "messages": [{"role": "user", "content": f"Say {n}.{k}"}], "max_tokens": 2,
               "temperature": 0.0} for k in range(3)]  # fmt: skip
    docs = yield bodies, {}
    return n, [d["choices"][0]["message"]["content"] for d in docs]


def test_a_client_alone_answers_a_stream_of_plans_in_order_within_its_limit(server, caplog) -> None:
    usage = {"sent": 0, "prompt_tokens": 0, "completion_tokens": 0, "throttled": 0}
    checked = []
    client = ChatClient(server.base_url, None, "tiny-vlm", concurrency=2, retries=2, timeout=30.0, seed=0,
                        usage=usage, check=lambda doc, where, body: checked.append(where),
                        log=logging.getLogger("spotdiff.test"))  # fmt: skip
    server.reset_peak()
    server.inject("500")
    with caplog.at_level(logging.INFO, logger="spotdiff.test"):
        got = list(client.stream(_plan(n) for n in range(4)))
    assert [n for n, _ in got] == [0, 1, 2, 3] and all(len(replies) == 3 for _, replies in got)
    alone = client.answered(_plan(0))  # the same requests again, one call: the same replies (greedy)
    assert alone == got[0]
    assert usage["sent"] == 15 and usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    assert server.peak == 2
    assert checked == [f"endpoint {server.base_url} (model tiny-vlm)"] * 15
    (line,) = [r.getMessage() for r in caplog.records]  # the retry, on the owner's logger; 0.5 s less the jitter
    wait = float(re.fullmatch(rf"{re.escape(client.where)}: HTTP 500; retry 1 of 2 in ([\d.]+) s", line).group(1))
    assert 0.375 <= wait <= 0.5
