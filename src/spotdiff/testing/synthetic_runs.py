"""Synthetic runs written straight into a run store, for report demos, tests and speed checks.

Each benchmark's cases are either read through its real loader (``data={"winoground": DIR}``) or made
up in the benchmark's case shape; each model gets score matrices with a model-specific skill
(``noise + skill x truth``), the benchmark's protocol turns them into outcomes and metrics with
bootstrap intervals, and the run is recorded exactly as :func:`spotdiff.diagnose.runner.run_eval` records one.
Nothing here is a measurement of any real model.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from spotdiff.cases import Case, NoiseImage
from spotdiff.diagnose.recorder import MAX_SAVED_SCORES
from spotdiff.diagnose.store import RunStore
from spotdiff.protocols import UnitTable, evaluate_table, get_protocol
from spotdiff.version import __version__

#: benchmark -> (protocol, subsets) of the made-up cases.
SPECS: dict[str, tuple[str, tuple[str, ...]]] = {
    "winoground": ("group", ("Object", "Relation", "Both")),
    "eqben": ("group", ("eqbenag", "eqbenyoucook2", "eqbengebc", "eqbenkubric_cnt", "eqbensd_3d")),
    "visla-generic": ("visla-t2t", ("generic",)),
    "visla-spatial": ("visla-i2t", ("spatial",)),
    "sugarcrepe": ("i2t-top1", ("add_att", "add_obj", "replace_att", "replace_obj", "replace_rel", "swap_att")),
    "valse": ("valse-prob", ("actant-swap", "existence", "plurals", "counting-hard")),
    "spec": ("spec", ("absolute_size", "relative_size", "existence", "count")),
    "aro-vg-relation": ("aro-macro", ("vg-relation",)),
    "crepe": ("i2t-top1", ("prod/atom/complexity_4", "prod/swap/complexity_4")),
    "coco-retrieval": ("retrieval", ("test",)),
}
WORDS = ("dog", "cat", "cup", "table", "chair", "kite", "horse", "bowl", "boat", "lamp", "tree", "car")
RELATIONS = ("on", "under", "left of", "right of", "holding", "behind", "near", "wearing")


def _sentence(rng: np.random.Generator) -> str:
    a, b = rng.choice(WORDS, size=2, replace=False)
    return f"a {a} {rng.choice(RELATIONS)} a {b}"


def make_cases(benchmark: str, n: int, seed: int = 0) -> list[Case]:
    """``n`` made-up cases in the shape of ``benchmark``'s cases (no images).

    Args:
        benchmark: the benchmark whose case shape is imitated.
        n: the number of cases.
        seed: the random seed.
    """
    protocol, subsets = SPECS[benchmark]
    rng = np.random.default_rng(seed)
    cases = []
    if protocol == "retrieval":
        n_img = max(2, n)
        texts = tuple(f"{_sentence(rng)} ({i}.{k})" for i in range(n_img) for k in range(5))
        truth = np.kron(np.eye(n_img, dtype=bool), np.ones((1, 5), dtype=bool))
        images = tuple(NoiseImage(seed=i, size=(8, 8)) for i in range(n_img))
        return [Case("test", texts, truth, images=images, tags={"subset": subsets[0]})]
    for i in range(n):
        subset = subsets[i % len(subsets)]
        tags = {"subset": subset}
        if protocol == "group":
            s = _sentence(rng)
            texts, truth, roles = (s, s + " again"), np.eye(2, dtype=bool), ()
            tags["tag"] = str(rng.choice(["Noun", "Verb", "Adjective"]))
        elif protocol.startswith("visla"):
            p1, n_ = _sentence(rng), _sentence(rng)
            texts, roles = (p1, p1.replace("a ", "one ", 1), n_), ("p1", "p2", "n")
            truth = np.array([[True, True, False]])
            tags.update(d_p1_n=str(int(rng.integers(3, 20))), d_p2_n=str(int(rng.integers(8, 40))))
        elif protocol == "spec":
            k = 2 + i % 3
            texts, truth, roles = tuple(f"{_sentence(rng)} #{j}" for j in range(k)), np.eye(k, dtype=bool), ()
        elif protocol == "aro-macro":
            rel = str(rng.choice(RELATIONS))
            texts, truth, roles = (f"a dog {rel} a cat", f"a cat {rel} a dog"), np.array([[False, True]]), ()
            tags.update(relation=rel)
        elif benchmark == "crepe":
            texts = tuple(f"{_sentence(rng)} #{j}" for j in range(6))
            truth, roles = np.array([[True] + [False] * 5]), ()
        else:
            texts, truth, roles = (_sentence(rng), _sentence(rng) + "!"), np.array([[True, False]]), ()
        n_images = 0 if protocol == "visla-t2t" else truth.shape[0]
        images = tuple(NoiseImage(seed=1000 * i + j, size=(8, 8)) for j in range(n_images))
        cases.append(Case(f"{subset}/{i}", texts, truth, images=images, tags=tags, roles=roles))
    return cases


def synthetic_scores(case: Case, needs: str, skill: float, rng: np.random.Generator) -> np.ndarray:
    """A score matrix for ``case``: Gaussian noise plus ``skill`` on the true entries.

    Args:
        case: the case.
        needs: what the protocol needs (``image-text``, ``text-text`` or ``match-prob``).
        skill: what the true entries get on top of the noise.
        rng: the generator.
    """
    truth = case.truth.astype(float)
    if needs == "text-text":
        pos = truth[0]
        target = np.outer(pos, pos)
        s = rng.normal(0.0, 1.0, (len(pos), len(pos))) + skill * target
        s = (s + s.T) / 2
        np.fill_diagonal(s, 1.0 + skill)
        return s
    s = rng.normal(0.0, 1.0, truth.shape) + skill * truth
    if needs == "match-prob":
        return 1.0 / (1.0 + np.exp(-(s - skill / 2)))
    return s


def fill_store(
    store: RunStore,
    *,
    models: int = 3,
    benchmarks: Sequence[str] = tuple(SPECS),
    n_cases: int = 100,
    seed: int = 0,
    data: Mapping[str, str | Path] | None = None,
    n_boot: int = 200,
    alpha_curves: Sequence[str] = ("sugarcrepe", "crepe"),
) -> list[str]:
    """Record ``models x len(benchmarks)`` synthetic runs; returns their ids.

    ``data`` maps a benchmark to a real data location: its cases are then read through the loader
    (the first ``n_cases``), and the run records that location and digest so reports can show texts
    and images.

    Args:
        store: the run store to record into.
        models: the number of made-up models.
        benchmarks: the benchmarks to record runs on.
        n_cases: cases per run.
        seed: the random seed.
        data: benchmark -> a real data location, or None.
        n_boot: bootstrap resamples per run.
        alpha_curves: benchmarks whose ``i2t-top1`` runs also record a made-up alpha curve.
    """
    from spotdiff.benchmarks import get_benchmark

    ids = []
    for b, benchmark in enumerate(benchmarks):
        data_path, digest = f"/synthetic/{benchmark}", hashlib.sha256(benchmark.encode()).hexdigest()
        if data and benchmark in data:
            bench = get_benchmark(benchmark)(data[benchmark])
            cases = bench.load(limit=n_cases)
            protocol = get_protocol(bench.protocols[0] if benchmark not in SPECS else SPECS[benchmark][0])
            data_path, digest = str(Path(data[benchmark]).resolve()), bench.data_digest()
        else:
            cases = make_cases(benchmark, n_cases, seed + b)
            protocol = get_protocol(SPECS[benchmark][0])
        for m in range(models):
            rng = np.random.default_rng([seed, b, m])
            name = f"synthetic-model-{m:02d}"
            skill = 0.2 + 2.0 * m / max(models - 1, 1)
            table = UnitTable()
            units: list[dict[str, Any]] = []
            for case in cases:
                offset = 0.3 * ((zlib.crc32(case.subset.encode()) + m) % 3 - 1)
                matrix = synthetic_scores(case, protocol.needs, skill + offset, rng)
                for uid, outcome in table.add_case(protocol, case, matrix):
                    units.append(
                        {
                            "unit_id": uid,
                            "case_id": case.id,
                            "subset": case.subset,
                            "scores": matrix if matrix.size <= MAX_SAVED_SCORES else None,
                            "outcomes": outcome,
                            "tags": case.tags,
                        }
                    )
            evaluation = evaluate_table(protocol, table, n_boot=n_boot, seed=seed, n_cases=len(cases))
            identity = {
                "spec": name,
                "family": "synthetic",
                "weights_sha256": hashlib.sha256(f"w{m}".encode()).hexdigest(),
                "config_sha256": hashlib.sha256(f"c{m}".encode()).hexdigest(),
            }
            info: dict[str, Any] = {"options": {}, "n_boot": n_boot, "synthetic": True}
            run_id = store.start_run(
                benchmark=benchmark, subset=None, protocol=protocol.name, model=name, model_identity=identity,
                data_path=data_path, data_digest=digest, seed=seed, version=__version__, info=info,
            )  # fmt: skip
            store.add_units(run_id, units)
            if benchmark in alpha_curves and protocol.name == "i2t-top1":
                alphas = np.round(np.linspace(0, 1, 11), 2)
                acc = evaluation.metrics["all"]["accuracy"]
                info["alpha_curve"] = {"alpha": alphas.tolist(), "accuracy": (acc - 15 * (alphas - 0.3) ** 2).tolist()}
            store.finish_run(run_id, evaluation.metrics, len(cases), info=info)
            ids.append(run_id)
    return ids
