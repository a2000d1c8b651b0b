"""Where a model's files are (a local path, or the hub's cached snapshot; no network) and the
digests of its configuration and weights that identify it in every run's record and cache key."""

from __future__ import annotations

import contextlib
import hashlib
import pickle
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from spotdiff.errors import ConfigError

#: File suffixes that hold weights; every other file of a model folder counts as configuration.
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".onnx")
_NOT_CONFIG = {"README.md", ".gitattributes", "LICENSE", "LICENSE.txt"}
#: What a trainer writes beside the model it saves (spotdiff's ``train``, Hugging Face's ``Trainer``):
#: records and resumable checkpoints, which ``from_pretrained`` never reads. They are not part of the
#: model's identity, so a resumed training's folder has the digests of an uninterrupted one.
TRAINING_RECORDS = frozenset(
    {"train_log.jsonl", "training.json", "train_summary.json", "tensorboard", "runs", "trainer_state.json",
     "training_args.bin"}
)  # fmt: skip
CHECKPOINT_PREFIX = "checkpoint-"


def _model_file(relative: Path) -> bool:
    """Whether a file of a model folder (its path relative to the folder) belongs to the model."""
    return not any(
        part.startswith(".") or part in TRAINING_RECORDS or part.startswith(CHECKPOINT_PREFIX)
        for part in relative.parts
    )


def digest_files(paths: Sequence[Path]) -> str:
    """SHA-256 over files' names and bytes (weights or config), in a stable order."""
    from spotdiff.cases import file_digest

    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(p.name.encode())
        h.update(file_digest(p).encode())
    return h.hexdigest()


def local_path(name_or_path: str, what: str = "model") -> Path | None:
    """The local file or folder a spec names, or None when it is a hub name (``org/name``).

    Something that looks like a path (absolute, ``./``, ``~``, more than one ``/``) but does not exist
    raises :class:`ConfigError` naming it, before any model code runs.
    """
    if not name_or_path:
        raise ConfigError(f"{what}: empty name or path")
    p = Path(name_or_path).expanduser()
    if p.exists():
        return p.resolve()
    looks_local = (
        p.is_absolute()
        or name_or_path.startswith(("./", "../", "~", ".\\", "..\\"))
        or name_or_path in (".", "..")
        or name_or_path.count("/") > 1
        or "\\" in name_or_path
    )
    if looks_local:
        raise ConfigError(f"{what}: path {name_or_path} does not exist")
    return None


def model_dir_digests(directory: Path) -> tuple[str | None, str | None]:
    """(config digest, weights digest) of a model folder, recursively; hidden files and a trainer's records
    and checkpoints (:data:`TRAINING_RECORDS`, ``checkpoint-*``) skipped.

    Weights are the ``*.safetensors`` files when there are any (what ``from_pretrained`` prefers),
    else the other weight files; configuration is every other file (config.json, tokenizer and
    preprocessor files, sentence-transformers module configs), READMEs excepted.
    """
    files = [p for p in directory.rglob("*") if p.is_file() and _model_file(p.relative_to(directory))]
    weights = [p for p in files if p.suffix in WEIGHT_SUFFIXES]
    if any(p.suffix == ".safetensors" for p in weights):
        weights = [p for p in weights if p.suffix == ".safetensors"]
    config = [p for p in files if p.suffix not in WEIGHT_SUFFIXES and p.name not in _NOT_CONFIG]
    return (digest_files(config) if config else None, digest_files(weights) if weights else None)


def state_dict_digest(module: Any) -> str:
    """SHA-256 over a torch module's state_dict: names, dtypes, shapes and raw bytes."""
    import torch

    h = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        t = tensor.detach().to("cpu").contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def hub_snapshot_dir(repo_id: str) -> Path | None:
    """The cached snapshot folder of a hub model (no network), or None when it is not cached."""
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo_id, local_files_only=True))
    except Exception:
        return None


def model_sources(name_or_path: str, directory: Path | None = None) -> list[Path]:
    """Where a model's files are (:meth:`spotdiff.scorers.Scorer.sources`): its local folder or file, or the
    cached hub snapshot of a hub name with the repository's ``refs`` (moving ``main`` changes the model); empty
    when neither is found.

    Args:
        name_or_path: the hub name or path the model was loaded from.
        directory: its local folder when already known.
    """
    path = directory if directory is not None else Path(name_or_path).expanduser()
    if path.exists():
        return [path.resolve()]
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", name_or_path):
        return []
    snapshot = hub_snapshot_dir(name_or_path)
    return [] if snapshot is None else [snapshot, snapshot.parent.parent / "refs"]


#: Weight files that ``torch.load`` reads (pickles, in a zip archive or not).
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt")


@contextlib.contextmanager
def naming_damaged_weights(what: str, name_or_path: str | Path) -> Iterator[None]:
    """Around the loading of a model: a failure caused by a damaged weights file, or by a pickle that
    asks to run code (``torch.load(weights_only=True)`` refuses it), becomes one :class:`ConfigError`
    naming the file, why, and what to do; any other failure propagates unchanged.

    Args:
        what: the model, as errors name it (``hf-clip``, ``vqa model``, ...).
        name_or_path: the model's local file or folder, or its hub name (its cached snapshot is searched).
    """
    try:
        yield
    except Exception as exc:
        found = damaged_weights(name_or_path, exc)
        if found is None:
            raise
        raise ConfigError(f"{what}: {found}") from exc


def damaged_weights(name_or_path: str | Path, exc: BaseException) -> str | None:
    """What is wrong with the model's weights when ``exc`` (or an exception it was raised from) is a weight
    library's error: safetensors' header check, or ``torch.load``'s refused or broken pickle. The message
    names the file: the one that fails to open, or the only file of that kind; None for any other error,
    or when the model has no weights file of that kind (the error then comes from elsewhere).

    Args:
        name_or_path: the model's local file or folder, or its hub name.
        exc: the error its loading raised.
    """
    from safetensors import SafetensorError

    chain = []
    while exc is not None and len(chain) < 8:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    broken_zip = [e for e in chain if isinstance(e, RuntimeError) and "PytorchStreamReader" in str(e)]
    cause = next((e for e in chain if isinstance(e, (SafetensorError, pickle.UnpicklingError, EOFError))), None)
    cause = cause or (broken_zip[0] if broken_zip else None)
    if cause is None:
        return None
    suffixes = (".safetensors",) if isinstance(cause, SafetensorError) else PICKLE_SUFFIXES
    files = _weight_files(name_or_path, suffixes)
    if not files:
        return None
    bad = next((p for p in files if _fails_to_open(p)), None) if len(files) > 1 else files[0]
    where = f"weights file {bad}" if bad is not None else f"the weights of {name_or_path}"
    refused = re.search(r"GLOBAL ([\w.]+)", str(cause)) if isinstance(cause, pickle.UnpicklingError) else None
    if refused:
        return (
            f"{where} is a pickle that asks to run {refused.group(1)}; spotdiff reads weights with "
            "torch.load(weights_only=True) and runs no code from a model file: use the model's safetensors "
            "weights, or convert them from a copy you trust"
        )
    first = (str(cause).strip().splitlines() or [""])[0].split(". ")[0][:200]  # its first sentence
    return f"{where} is damaged or incomplete ({type(cause).__name__}: {first}); download or save the model again"


def _weight_files(name_or_path: str | Path, suffixes: tuple[str, ...]) -> list[Path]:
    """The model's weight files with ``suffixes``: the file itself, those of its folder (a trainer's
    records left out), or those of its cached hub snapshot."""
    path = Path(name_or_path).expanduser()
    if path.is_file():
        return [path] if path.suffix in suffixes else []
    folder = path if path.is_dir() else hub_snapshot_dir(str(name_or_path))
    if folder is None or not folder.is_dir():
        return []
    found = (p for p in folder.rglob("*") if p.suffix in suffixes and p.is_file())
    return sorted(p for p in found if _model_file(p.relative_to(folder)))


def _fails_to_open(path: Path) -> bool:
    """Whether a weights file fails its library's own check (its safetensors header; the unpickling
    of a pickle with ``weights_only=True``, which runs no code)."""
    try:
        if path.suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(str(path), framework="np"):
                pass
        else:
            import torch

            torch.load(path, map_location="cpu", weights_only=True, mmap=True)  # no tensor read
    except Exception:
        return True
    return False
