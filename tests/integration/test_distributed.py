"""Sharded evaluation: ownership of unique items, cache shards and their merging, and real
``torchrun --nproc_per_node 2 -m spotdiff eval`` runs (gloo on the CPU) compared with one process.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import hashlib
import json
import re
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from spotdiff.cases import ArrayImage, Case
from spotdiff.cli import main
from spotdiff.diagnose.cache import CACHE_FILE, SHARD_DIR, Cache, Shard, merge_shards, shard_files
from spotdiff.diagnose.engine import Engine
from spotdiff.diagnose.store import RunStore
from spotdiff.errors import ConfigError, DataError, DistributedError
from spotdiff.ranks import DistEnv, detect, owner, rank_device, step
from spotdiff.scorers import EmbeddingScorer, PairScorer, ScorerOptions

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------------ fakes
def _vector(data: bytes, dim: int = 8) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(data).digest()[:8], "big")
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


class FakeEmbedding(EmbeddingScorer):
    """Deterministic embeddings from the content; records what it encoded."""

    capabilities = frozenset({"image-text", "text-text"})

    def __init__(self) -> None:
        super().__init__("fake-embedding", ScorerOptions(batch_size=3))
        self.encoded: list[str] = []

    def identity(self) -> dict:
        return {"spec": self.spec}

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        self.encoded += [f"t:{t}" for t in texts]
        return np.stack([_vector(t.encode()) for t in texts])

    def encode_images(self, images) -> np.ndarray:
        self.encoded += [f"i:{np.asarray(im).sum()}" for im in images]
        return np.stack([_vector(np.asarray(im).tobytes()) for im in images])


class FakePair(PairScorer):
    """Joint scores and a text prior; records how many images it saw."""

    capabilities = frozenset({"image-text", "match-prob", "text-prior"})

    def __init__(self) -> None:
        super().__init__("fake-pair", ScorerOptions(batch_size=2))
        self.images_seen = 0
        self.priors = 0

    def identity(self) -> dict:
        return {"spec": self.spec}

    def score_pairs(self, images, texts):
        self.images_seen += len(images)
        out = []
        for im, ts in zip(images, texts, strict=True):
            base = float(np.asarray(im).mean()) / 255.0
            out.append(np.array([(base + len(t) % 7 / 7.0) / 2.0 for t in ts], dtype=np.float32))
        return out

    def text_logprob(self, texts):
        self.priors += len(texts)
        return np.array([[-float(len(t))] for t in texts], dtype=np.float32)


def _cases(n: int = 24) -> list[Case]:
    """Cases sharing images and texts across cases (so deduplication matters)."""
    images = [ArrayImage(np.full((4, 4, 3), 10 * k, dtype=np.uint8), name=f"im{k}") for k in range(7)]
    out = []
    for c in range(n):
        texts = (f"caption {c % 9}", f"foil {c % 5}", f"other {c % 4}")
        out.append(
            Case(
                id=f"c{c}",
                texts=texts,
                truth=np.array([[True, False, False]]),
                images=(images[c % 7],),
                tags={"subset": "s"},
            )
        )
    return out


def _unique_items(cases: list[Case], need: str, pair: bool) -> int:
    texts = {t for c in cases for t in c.texts}
    images = {r.key for c in cases for r in c.images}
    if need in ("text-text", "text-prior"):
        return len(texts)
    if pair:
        return len({(r.key, t) for c in cases for r in c.images for t in c.texts})
    return len(texts) + len(images)


# ------------------------------------------------------------------------------- unit tests
def test_detect_reads_the_launcher_environment() -> None:
    assert detect({}) is None
    assert detect({"WORLD_SIZE": "1", "RANK": "0"}) is None
    assert detect({"WORLD_SIZE": "4", "RANK": "2", "LOCAL_RANK": "0"}) == DistEnv(4, 2, 0)
    assert detect({"WORLD_SIZE": "2", "RANK": "1"}) == DistEnv(2, 1, 1)
    with pytest.raises(ConfigError, match="WORLD_SIZE"):
        detect({"WORLD_SIZE": "two", "RANK": "0"})
    with pytest.raises(ConfigError, match="RANK=5"):
        detect({"WORLD_SIZE": "2", "RANK": "5"})


def test_owner_is_stable_and_balanced() -> None:
    keys = [f"text:{k}" for k in range(4000)]
    owners = [owner(k, 4) for k in keys]
    assert owners == [owner(k, 4) for k in keys]  # a pure function of the key
    assert owner("text:abc", 3) == int.from_bytes(hashlib.sha256(b"text:abc").digest()[:8], "big") % 3
    counts = np.bincount(owners, minlength=4)
    assert counts.min() > 900 and counts.max() < 1100


def test_rank_device_keeps_explicit_devices() -> None:
    assert rank_device("cpu", 3) == "cpu"
    assert rank_device("cuda:1", 0) == "cuda:1"
    import torch

    expected = "cuda:0" if torch.cuda.is_available() else "auto"
    assert rank_device("auto", 0 if torch.cuda.is_available() else 5) == expected


@pytest.mark.parametrize(
    ("make", "need"),
    [(FakeEmbedding, "text-text"), (FakeEmbedding, "image-text"), (FakePair, "image-text"), (FakePair, "text-prior")],
)
def test_shards_split_the_work_and_merge_to_a_full_cache(tmp_path: Path, make, need: str) -> None:
    """Three simulated ranks compute disjoint shares; after the merge nothing is left to compute
    and the matrices equal a single-process run's."""
    cases = _cases()
    world = 3
    computed = []
    for rank in range(world):
        scorer = make()
        shard = Shard(tmp_path, scorer.identity_digest(), f"tok-rank{rank}")
        engine = Engine(scorer, progress=False, cache=shard.cache)
        engine.prefill(cases, need, owns=lambda key, r=rank: owner(key, world) == r)
        computed.append(engine.stats["computed"])
        assert shard.rows() == engine.stats["computed"]
        shard.close()
        if isinstance(scorer, FakePair) and need == "image-text":
            owned = {r.key for c in cases for r in c.images if owner(r.key, world) == rank}
            assert scorer.images_seen == len(owned)  # the vision side once per owned image
    pair = make is FakePair and need != "text-prior"
    assert sum(computed) == _unique_items(cases, need, pair)
    assert min(computed) > 0
    assert len(shard_files(tmp_path)) == world
    assert merge_shards(tmp_path) == sum(computed)
    assert shard_files(tmp_path) == []
    engine = Engine(make(), tmp_path, progress=False)
    merged = list(engine.case_matrices(cases, need))
    assert engine.stats["computed"] == 0
    engine.close()
    reference = list(Engine(make(), progress=False).case_matrices(cases, need))
    for a, b in zip(merged, reference, strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


def test_shard_reads_the_main_cache_so_a_resumed_rank_recomputes_nothing(tmp_path: Path) -> None:
    cases = _cases()
    scorer = FakeEmbedding()
    Engine(scorer, tmp_path, progress=False).prefill(cases[:12], "text-text")
    done = Cache(tmp_path, scorer.identity_digest()).count()
    shard = Shard(tmp_path, scorer.identity_digest(), "resume-rank0")
    engine = Engine(FakeEmbedding(), progress=False, cache=shard.cache)
    engine.prefill(cases, "text-text")
    shard.close()
    assert engine.stats["cached"] == done
    assert engine.stats["computed"] == _unique_items(cases, "text-text", False) - done


def test_a_shard_in_use_is_not_merged_and_a_dead_ones_is(tmp_path: Path) -> None:
    scorer = FakeEmbedding()
    live = Shard(tmp_path, scorer.identity_digest(), "live-rank0")
    Engine(scorer, progress=False, cache=live.cache).embed_texts(["a", "b"])
    dead = Shard(tmp_path, scorer.identity_digest(), "dead-rank1")
    Engine(scorer, progress=False, cache=dead.cache).embed_texts(["c"])
    dead.close()  # what SIGKILL leaves: the file, and a lock the OS has released
    assert merge_shards(tmp_path) == 1
    assert [p.name for p in shard_files(tmp_path)] == ["live-rank0.sqlite"]
    live.close()
    assert merge_shards(tmp_path) == 2
    assert Cache(tmp_path, scorer.identity_digest()).count() == 3


def test_an_unreadable_shard_is_moved_aside(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    folder = tmp_path / SHARD_DIR
    folder.mkdir()
    (folder / "junk-rank0.sqlite").write_bytes(b"this is not a database" * 100)
    assert merge_shards(tmp_path) == 0
    assert (folder / "junk-rank0.corrupt").is_file()
    assert "unreadable" in caplog.text
    assert (tmp_path / CACHE_FILE).is_file()


class _FakeGroup:
    def __init__(self, others: list) -> None:
        self.others = others

    def all_gather(self, value):
        return [value, *self.others]


def test_a_failing_rank_stops_every_rank_with_its_message() -> None:
    assert step(_FakeGroup([("ok", 2)]), lambda: 1) == [1, 2]
    with pytest.raises(DistributedError, match="rank 1: DataError: file x: broken"):
        step(_FakeGroup([("error", "DataError: file x: broken")]), lambda: 1)

    def boom():
        raise DataError("bad image", file="img.png")

    with pytest.raises(DataError, match=r"img\.png"):  # the failing rank raises its own error
        step(_FakeGroup([("ok", 2)]), boom)


# ------------------------------------------------------------------------ real torchrun runs
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun(args: list[str], nproc: int = 2, timeout: float = 900) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("torchrun")
    launcher = [str(exe)] if exe.is_file() else [sys.executable, "-m", "torch.distributed.run"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TRANSFORMERS_VERBOSITY": "error"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    cmd = [*launcher, "--nproc_per_node", str(nproc), "--master_port", str(_free_port()), "-m", "spotdiff", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


def _compare_outputs(single: Path, sharded: Path, atol: float = 1e-5) -> None:
    a = json.loads((single / "metrics.json").read_text())
    b = json.loads((sharded / "metrics.json").read_text())
    assert {k: v for k, v in a.items() if k != "run_id"} == {k: v for k, v in b.items() if k != "run_id"}
    lines_a = (single / "scores.jsonl").read_text().splitlines()
    lines_b = (sharded / "scores.jsonl").read_text().splitlines()
    assert len(lines_a) == len(lines_b) == a["n_cases"]
    for la, lb in zip(lines_a, lines_b, strict=True):
        ra, rb = json.loads(la), json.loads(lb)
        assert (ra["id"], ra["subset"], ra["correct"]) == (rb["id"], rb["subset"], rb["correct"])
        np.testing.assert_allclose(ra["scores"], rb["scores"], rtol=0, atol=atol)


@pytest.mark.slow
def test_torchrun_two_processes_equal_one_process(shared_data: Path, tmp_path: Path) -> None:
    """The CI check: ``torchrun --nproc_per_node 2 -m spotdiff eval`` with minilm on VISLA (gloo)."""
    common = [
        "--model", "minilm", "--benchmark", "visla-generic", "--data", str(shared_data / "visla"),
        "--protocol", "t2t", "--limit", "80", "--batch-size", "16", "--n-boot", "200",
        "--store", str(tmp_path / "runs.sqlite"), "--quiet",
    ]  # fmt: skip
    assert main(["eval", *common, "--cache", str(tmp_path / "c1"), "--out", str(tmp_path / "single")]) == 0
    proc = _torchrun(["eval", *common, "--cache", str(tmp_path / "c2"), "--out", str(tmp_path / "sharded")])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    _compare_outputs(tmp_path / "single", tmp_path / "sharded")
    assert proc.stdout.count(" recorded") == 1  # only rank 0 reports
    runs = {r.id: r for r in RunStore(tmp_path / "runs.sqlite").runs()}
    single_id = json.loads((tmp_path / "single" / "metrics.json").read_text())["run_id"]
    sharded_id = json.loads((tmp_path / "sharded" / "metrics.json").read_text())["run_id"]
    assert len(runs) == 2  # the worker rank recorded nothing
    dist_info = runs[sharded_id].info["distributed"]
    assert dist_info["world_size"] == 2
    assert all(n > 0 for n in dist_info["computed"])  # both ranks worked
    assert sum(dist_info["computed"]) == runs[single_id].info["engine"]["computed"]  # no item twice
    assert runs[sharded_id].info["engine"]["computed"] == 0  # rank 0 found everything merged
    assert shard_files(tmp_path / "c2") == []
    with sqlite3.connect(tmp_path / "c2" / CACHE_FILE) as db:
        (rows,) = db.execute("SELECT COUNT(*) FROM items").fetchone()
    assert rows == sum(dist_info["computed"])


def _write_sugarcrepe(root: Path, n_images: int = 5) -> Path:
    import spotdiff.testing.tiny_models as tm
    from spotdiff.benchmarks.sugarcrepe import SUBSETS

    (root / "images").mkdir(parents=True)
    for k, image in enumerate(tm.tiny_images(n_images, size=32)):
        image.save(root / "images" / f"{k}.png")
    words = ("cat", "dog", "horse", "car", "tree", "table")
    for s, subset in enumerate(SUBSETS):
        data = {
            str(i): {
                "filename": f"{(s + i) % n_images}.png",
                "caption": f"a {words[(s + i) % 6]} on the grass",
                "negative_caption": f"a {words[(s + 2 * i + 1) % 6]} on the grass",
            }
            for i in range(3)
        }
        (root / f"{subset}.json").write_text(json.dumps(data), encoding="utf-8")
    return root


@pytest.mark.slow
def test_torchrun_images_without_cache(tmp_path: Path) -> None:
    """Image-text sharding with a tiny CLIP and ``--no-cache`` (a temporary shared cache)."""
    import spotdiff.testing.tiny_models as tm

    clip = tm.make_tiny_clip(tmp_path / "clip")
    data = _write_sugarcrepe(tmp_path / "sugarcrepe")
    common = [
        "--model", f"hf-clip:{clip}", "--benchmark", "sugarcrepe", "--data", str(data), "--device", "cpu",
        "--batch-size", "2", "--n-boot", "100", "--no-store", "--no-cache", "--quiet",
    ]  # fmt: skip
    assert main(["eval", *common, "--out", str(tmp_path / "single")]) == 0
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    os.environ["SPOTDIFF_DIST_TMPDIR"] = str(tmpdir)
    try:
        proc = _torchrun(["eval", *common, "--out", str(tmp_path / "sharded")])
    finally:
        del os.environ["SPOTDIFF_DIST_TMPDIR"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    _compare_outputs(tmp_path / "single", tmp_path / "sharded")
    assert list(tmpdir.iterdir()) == []  # the temporary cache is removed


@pytest.mark.slow
def test_torchrun_bad_model_path_fails_every_rank_clearly(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "model"
    proc = _torchrun(
        ["eval", "--model", f"hf-clip:{missing}", "--benchmark", "sugarcrepe", "--data",
         str(_write_sugarcrepe(tmp_path / "sc")), "--no-store", "--cache", str(tmp_path / "c"), "--quiet"]
    )  # fmt: skip
    assert proc.returncode != 0
    # Once one rank exits non-zero, torchrun's agent sends SIGTERM to the other, which may die before
    # it prints: at least one rank's line is guaranteed, not both.
    errors = [line for line in proc.stderr.splitlines() if line.startswith("spotdiff eval: error:")]
    assert 1 <= len(errors) <= 2, proc.stderr[-3000:]
    assert all(f"path {missing} does not exist" in line for line in errors)
    # no traceback through spotdiff's own modules (torchrun's may run from a checkout that is named spotdiff)
    assert not re.search(r'File "[^"]*(src|site-packages)[/\\]spotdiff[/\\]', proc.stderr), proc.stderr[-3000:]
