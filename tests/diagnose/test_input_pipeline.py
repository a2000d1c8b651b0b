"""The input pipeline: worker processes, prefetch, GPU-decoding logic (run on the CPU), auto batch size.

Scores must not depend on the number of workers (same batches, same order, same numbers), a bad image
must raise the same DataError after the earlier batches were stored, and the CUDA-only paths are
exercised through the same code on CPU tensors.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from spotdiff.cases import ArrayImage, Case, FileImage
from spotdiff.diagnose.autobatch import DEFAULT_BATCH_SIZE, REMEMBERED, largest_batch, resolve_batch_size
from spotdiff.diagnose.cache import Cache
from spotdiff.diagnose.engine import Engine
from spotdiff.diagnose.pipeline import InputPipeline, default_workers
from spotdiff.errors import ConfigError, DataError
from spotdiff.scorers import EmbeddingScorer, ScorerOptions, load_scorer
from spotdiff.scorers.base import Prepared
from spotdiff.scorers.hf_dual import HFImagePreprocessor
from spotdiff.scorers.openclip import OpenClipImagePreprocessor
from spotdiff.testing.tiny_models import (
    make_tiny_blip_retrieval,
    make_tiny_clip,
    make_tiny_image_processor,
    make_tiny_open_clip,
)

WORDS = "a red blue cat dog cup on under left right two three the table".split()


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("pipeline-models")
    config, ckpt = make_tiny_open_clip(root / "openclip")
    return {
        "hf-clip": f"hf-clip:{make_tiny_clip(root / 'clip')}",
        "blip-itm": f"blip-itm:{make_tiny_blip_retrieval(root / 'blip')}",
        "open-clip": f"open-clip:{config}@{ckpt}",
    }


def _photo(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    """A smooth random image (what a JPEG keeps well), not white noise."""
    small = rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)
    return Image.fromarray(small).resize((w, h), Image.Resampling.BICUBIC)


@pytest.fixture(scope="module")
def image_cases(tmp_path_factory: pytest.TempPathFactory) -> list[Case]:
    """2 x 2 cases over JPEG and PNG files of varied sizes, some images shared between cases."""
    root = tmp_path_factory.mktemp("pipeline-images")
    rng = np.random.default_rng(0)
    refs = []
    for i in range(14):
        path = root / f"{i}.{'jpg' if i % 3 else 'png'}"
        _photo(rng, 40 + 7 * i, 30 + 5 * (i % 4)).save(path, quality=90)
        refs.append(FileImage(path))
    cases = []
    for c in range(9):
        texts = tuple(" ".join(rng.choice(WORDS, 5)) + f" {c} {k}" for k in range(2))
        images = (refs[c], refs[(c + 5) % len(refs)])
        cases.append(Case(f"c{c}", texts, np.eye(2, dtype=bool), images, {"subset": "s"}))
    return cases


def _matrices(
    scorer, cases: list[Case], need: str, workers: int, uint8: bool | None = None
) -> tuple[list[np.ndarray], dict]:
    with Engine(scorer, progress=False, workers=workers) as engine:  # a fresh (temporary) cache each time
        engine.pipeline = InputPipeline(workers, uint8=uint8)  # uint8 True: pixels finished as on a GPU
        return list(engine.case_matrices(cases, need)), dict(engine.stats)


@pytest.mark.parametrize(("model", "need"), [("hf-clip", "image-text"), ("blip-itm", "match-prob"),
                                             ("open-clip", "image-text")])  # fmt: skip
def test_scores_are_identical_with_one_and_several_workers(models, image_cases, model: str, need: str) -> None:
    """Worker processes, and pixels handed over in uint8 and finished where the model runs, change where
    preprocessing runs, never a score: bit-identical matrices."""
    scorer = load_scorer(models[model], ScorerOptions(device="cpu", batch_size=3))
    reference, stats = _matrices(scorer, image_cases, need, workers=0)
    for workers, uint8 in ((1, None), (2, None), (2, True)):
        got, got_stats = _matrices(scorer, image_cases, need, workers=workers, uint8=uint8)
        assert got_stats == stats
        for a, b in zip(got, reference, strict=True):
            assert np.array_equal(a, b)
    # and they are the model's own numbers, from decoded images, with no pipeline at all
    case = image_cases[0]
    images = [r.load() for r in case.images]
    if need == "image-text":
        direct = scorer.encode_images(images) @ scorer.encode_texts(list(case.texts)).T
    else:  # BLIP-ITM serves match-prob protocols with its two ITM logits per pair
        direct = np.stack(scorer.itm_logits(images, [list(case.texts)] * 2))
    np.testing.assert_allclose(reference[0], direct, atol=1e-6)


def test_batches_reach_the_model_in_order(models, image_cases, monkeypatch) -> None:
    """With several workers the model sees the same batches in the same order as with none."""
    seen: dict[int, list] = {}
    for workers in (0, 2):
        scorer = load_scorer(models["hf-clip"], ScorerOptions(device="cpu", batch_size=2))
        calls: list = []
        original = scorer.encode_images

        def spy(pixels, calls=calls, original=original):
            calls.append(pixels.to("cpu").sum(dim=(1, 2, 3)).tolist())
            return original(pixels)

        monkeypatch.setattr(scorer, "encode_images", spy)
        with Engine(scorer, progress=False, workers=workers) as engine:
            engine.embed_images([r for c in image_cases for r in c.images])
        seen[workers] = calls
    assert len(seen[0]) > 3 and seen[0] == seen[2]


def test_bad_image_raises_its_own_error_after_earlier_batches_are_stored(models, tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    refs = []
    for i in range(8):
        path = tmp_path / f"{i}.png"
        _photo(rng, 32, 32).save(path)
        refs.append(FileImage(path))
    refs[6].key  # content keys are read before the file is damaged  # noqa: B018
    refs[6].path.write_bytes(b"not an image")
    scorer = load_scorer(models["hf-clip"], ScorerOptions(device="cpu", batch_size=2))
    with Engine(scorer, tmp_path / "cache", progress=False, workers=2) as engine:
        with pytest.raises(DataError, match="cannot decode image") as info:
            engine.embed_images(refs)
        assert str(refs[6].path) in str(info.value)
    with Cache(tmp_path / "cache", scorer.identity_digest()) as cache:
        assert cache.count("image") == 6  # the three batches before the bad one


def test_workers_are_capped_at_the_cores(caplog) -> None:
    """``--workers 1000`` starts one process per core, not one per image, and says so (issue 22 item 14)."""
    cores = default_workers()
    with caplog.at_level("WARNING", logger="spotdiff.diagnose.pipeline"):
        assert InputPipeline(1000).workers == cores
    assert f"--workers 1000 is more than the {cores} cores" in caplog.text
    caplog.clear()
    assert InputPipeline(cores).workers == cores and InputPipeline(0).workers == 0
    assert not caplog.text


def test_stopping_early_stops_the_workers(tmp_path: Path) -> None:
    refs = []
    for i in range(12):  # files: images in memory would start no workers
        Image.fromarray(np.full((8, 8, 3), i, np.uint8)).save(tmp_path / f"a{i}.png")
        refs.append(FileImage(tmp_path / f"a{i}.png"))
    pipeline = InputPipeline(2)
    stream = pipeline.images(refs, [[i, i + 1] for i in range(0, 12, 2)], None)
    first = next(stream)
    assert [np.asarray(im)[0, 0, 0] for im in first] == [0, 1]
    stream.close()
    deadline = time.monotonic() + 10
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not multiprocessing.active_children()


class _PidArray(ArrayImage):
    """An array image that records the process that loaded it."""

    def load(self) -> Image.Image:
        image = super().load()
        image.info["pid"] = os.getpid()  # travels with the image when a worker pickles it
        return image


class _PidFile(FileImage):
    """An image file that records the process that loaded it."""

    def load(self) -> Image.Image:
        image = super().load()
        image.info["pid"] = os.getpid()
        return image


def test_images_in_memory_start_no_workers(tmp_path: Path) -> None:
    """Images already decoded, with nothing to prepare, are handed over by the calling process (a worker would
    only pickle them through a pipe); files are still decoded by the workers."""
    arrays = [np.full((8, 8, 3), i, np.uint8) for i in range(8)]
    batches = [[0, 1, 2], [3, 4, 5], [6, 7]]
    got = list(InputPipeline(2).images([_PidArray(a) for a in arrays], batches, None))
    assert [[int(np.asarray(im)[0, 0, 0]) for im in batch] for batch in got] == batches
    assert {im.info["pid"] for batch in got for im in batch} == {os.getpid()}
    for i, a in enumerate(arrays):
        Image.fromarray(a).save(tmp_path / f"{i}.png")
    files = list(InputPipeline(2).images([_PidFile(tmp_path / f"{i}.png") for i in range(8)], batches, None))
    assert [[int(np.asarray(im)[0, 0, 0]) for im in batch] for batch in files] == batches
    assert os.getpid() not in {im.info["pid"] for batch in files for im in batch}


def test_text_tokenisation_runs_ahead_in_order_and_bounded() -> None:
    texts = [f"text {i}" for i in range(40)]
    batches = [list(range(i, i + 4)) for i in range(0, 40, 4)]
    made: list[int] = []
    threads: set[str] = set()

    def prepare(chunk):
        threads.add(threading.current_thread().name)
        made.append(len(made))
        from spotdiff.scorers.base import Prepared

        return Prepared(list(chunk), len(chunk))

    pipeline = InputPipeline(0, prefetch=2)
    out = []
    for consumed, tokens in enumerate(pipeline.texts(texts, batches, prepare)):
        time.sleep(0.01)  # the "model": the thread may run ahead meanwhile, but only so far
        assert len(made) <= consumed + 1 + pipeline.prefetch + 1
        out.extend(tokens.data)
    assert out == texts
    assert threads and all(name.startswith("spotdiff-tokenize") for name in threads)


def test_worker_dataset_pickles_for_spawned_workers(models, image_cases) -> None:
    """Where workers are spawned (macOS, Windows) the dataset and the preprocessors travel by pickle."""
    import pickle

    from spotdiff.diagnose.pipeline import _ImageBatches

    refs = [r for c in image_cases for r in c.images][:4]
    for model in ("hf-clip", "open-clip"):
        prepare = load_scorer(models[model], ScorerOptions(device="cpu")).image_preprocessor()
        assert prepare.splits()
        dataset = _ImageBatches(refs, [[0, 1], [2, 3]], prepare, jpeg=False, split=True)
        copy = pickle.loads(pickle.dumps(dataset))
        assert torch.equal(copy[1].data, dataset[1].data)
        piece = pickle.loads(pickle.dumps(dataset[1]))  # uint8 pixels and their finishing, as a worker returns them
        assert piece.data.dtype == torch.uint8
        assert torch.equal(piece.to("cpu"), prepare([refs[2].load(), refs[3].load()]).data)


def test_workers_option_is_checked() -> None:
    assert default_workers() >= 1
    with pytest.raises(ConfigError, match="--workers"):
        InputPipeline(-1)


# ----------------------------------------------------------------------------- GPU decoding on CPU
#: Decoding and resizing on tensors differ from PIL by rounding only: per pixel at most this many
#: grey levels (of 255) after resizing, and on average a tenth of that.
DECODE_TOLERANCE_LEVELS = 3.0


def _jpegs(tmp_path: Path, n: int = 5) -> list[Path]:
    rng = np.random.default_rng(2)
    paths = []
    for i in range(n):
        path = tmp_path / f"photo{i}.jpg"
        _photo(rng, 300 + 37 * i, 240 - 11 * i).convert("RGB").save(path, quality=92)
        paths.append(path)
    return paths


def _decoded(paths: list[Path]) -> list[torch.Tensor]:
    from torchvision.io import ImageReadMode, decode_jpeg

    data = [torch.frombuffer(bytearray(p.read_bytes()), dtype=torch.uint8) for p in paths]
    return decode_jpeg(data, mode=ImageReadMode.RGB, device="cpu")


def _levels(a: torch.Tensor, b: torch.Tensor, std) -> tuple[float, float]:
    """Max and mean absolute difference of normalised pixels, in grey levels of 255."""
    scale = torch.tensor(std).view(1, 3, 1, 1) * 255.0
    diff = ((a - b).abs() * scale).float()
    return float(diff.max()), float(diff.mean())


@pytest.mark.parametrize("kind", ["clip", "blip"])
def test_tensor_preprocessing_of_decoded_jpegs_matches_the_processor(tmp_path: Path, kind: str) -> None:
    processor = make_tiny_image_processor(kind=kind, size=224)
    prepare = HFImagePreprocessor(processor)
    assert prepare.on_tensors()
    paths = _jpegs(tmp_path)
    reference = prepare([FileImage(p).load() for p in paths]).data
    got = prepare.from_uint8(_decoded(paths), "cpu").data
    assert got.shape == reference.shape
    worst, mean = _levels(got, reference, processor.image_std)
    assert worst <= DECODE_TOLERANCE_LEVELS and mean <= DECODE_TOLERANCE_LEVELS / 10


def test_open_clip_tensor_transform_matches_its_pil_transform(tmp_path: Path) -> None:
    import open_clip

    transform = open_clip.image_transform(224, is_train=False)
    prepare = OpenClipImagePreprocessor(transform)
    assert prepare.on_tensors()
    paths = _jpegs(tmp_path)
    reference = prepare([FileImage(p).load() for p in paths]).data
    got = prepare.from_uint8(_decoded(paths), "cpu").data
    std = transform.transforms[-1].std
    worst, mean = _levels(got, reference, std)
    assert worst <= DECODE_TOLERANCE_LEVELS and mean <= DECODE_TOLERANCE_LEVELS / 10
    from torchvision import transforms as T

    augmented = OpenClipImagePreprocessor(T.Compose([T.RandomResizedCrop(224), T.ToTensor()]))
    assert not augmented.on_tensors()  # not a standard resize / crop / normalise chain


def test_engine_decodes_jpegs_on_the_decode_device(models, tmp_path: Path) -> None:
    """The GPU-decoding path of the engine, run with the CPU as the decode device."""
    paths = _jpegs(tmp_path, 6)
    refs = [FileImage(p) for p in paths] + [FileImage(paths[0], bbox=(3, 4, 50, 40))]  # a crop: CPU path
    scorer = load_scorer(models["hf-clip"], ScorerOptions(device="cpu", batch_size=4))
    with Engine(scorer, tmp_path / "cache", progress=False, workers=2) as engine:
        plain = engine.embed_images(refs)
    with Engine(scorer, tmp_path / "cache", progress=False, workers=2, decode_device="cpu") as engine:
        decoded = engine.embed_images(refs)
        assert engine.stats == {"computed": len(refs), "cached": 0}  # rows of the two paths kept apart
    cosines = np.sum(plain * decoded, axis=1)
    assert np.all(cosines > 0.999)
    assert np.array_equal(plain[-1], decoded[-1])  # the crop took the same path as before


def test_gpu_decoding_pieces_and_the_cpu_pieces_beside_them_are_alike(tmp_path: Path) -> None:
    """With GPU decoding the pieces of a batch that take the CPU path (a PNG) come finished as the decoded JPEGs
    do, not as uint8: the batch is joined from pieces of one kind."""
    prepare = _split_preprocessors()["clip"]
    paths = _jpegs(tmp_path, 2)
    _photo(np.random.default_rng(7), 50, 40).save(tmp_path / "a.png")
    refs = [FileImage(p) for p in (paths[0], tmp_path / "a.png", paths[1], tmp_path / "a.png")]
    pipeline = InputPipeline(2, decode_device="cpu", uint8=True)
    (batch,) = list(pipeline.images(refs, [[0, 1, 2, 3]], prepare))
    assert all(piece.dtype == torch.float32 for piece in batch.data) and batch.finish is None
    assert torch.equal(batch.to("cpu")[1], prepare([refs[1].load()]).data[0])


def test_gpu_decoding_needs_tensor_preprocessing() -> None:
    with pytest.raises(ConfigError, match="GPU decoding"):  # a scorer that preprocesses nothing itself
        Engine(FakeGpuScorer(1), progress=False, decode_device="cuda")


# ----------------------------------------------------------------------------- --batch-size auto
class FakeGpuScorer(EmbeddingScorer):
    """A scorer that claims a CUDA device whose memory holds ``capacity`` items per batch."""

    capabilities = frozenset({"text-text"})

    def __init__(self, capacity: int) -> None:
        super().__init__("fake-gpu", ScorerOptions(device="cuda"))
        self.device = "cuda:0"
        self.capacity = capacity
        self.probes: list[int] = []
        self.batch_sizes: list[int] = []

    def identity(self) -> dict:
        return {"spec": self.spec, "capacity": self.capacity}

    def probe_batch(self, n: int) -> None:
        self.probes.append(n)
        self.batch_sizes.append(self.options.batch_size)
        if n > self.capacity:
            raise torch.cuda.OutOfMemoryError(f"CUDA out of memory: {n} items")

    def encode_images(self, images):
        raise NotImplementedError

    def encode_texts(self, texts):
        return np.ones((len(texts), 2), np.float32) / np.sqrt(2)


@pytest.mark.parametrize("capacity", [1, 7, 32, 300, 5000])
def test_largest_batch_finds_the_threshold(capacity: int) -> None:
    scorer = FakeGpuScorer(capacity)
    assert largest_batch(scorer.probe_batch, limit=1024) == min(capacity, 1024)
    assert len(scorer.probes) <= 25


def test_largest_batch_when_nothing_fits() -> None:
    with pytest.raises(ConfigError, match="even one item"):
        largest_batch(FakeGpuScorer(0).probe_batch)


def test_auto_batch_size_is_searched_once_per_model_and_device(tmp_path: Path) -> None:
    messages: list[str] = []
    scorer = FakeGpuScorer(300)
    assert resolve_batch_size(scorer, tmp_path, fingerprint="H100:80GB", say=messages.append) == 300
    assert scorer.probes and (tmp_path / REMEMBERED).is_file()
    again = FakeGpuScorer(300)
    assert resolve_batch_size(again, tmp_path, fingerprint="H100:80GB", say=messages.append) == 300
    assert again.probes == []  # remembered
    other_device = FakeGpuScorer(300)
    resolve_batch_size(other_device, tmp_path, fingerprint="T4:16GB", say=messages.append)
    assert other_device.probes  # a different device is searched again
    other_model = FakeGpuScorer(40)
    assert resolve_batch_size(other_model, tmp_path, fingerprint="H100:80GB", say=messages.append) == 40
    assert other_model.batch_sizes == other_model.probes  # each probe ran with its batch size set
    assert "largest that fits" in messages[0] and "found earlier" in messages[1]


def test_auto_batch_size_on_cpu_is_the_default_with_a_message(models, tmp_path: Path, capsys) -> None:
    from spotdiff.diagnose.runner import EvalConfig, run_eval
    from spotdiff.testing.formats import write_winoground

    data = write_winoground(tmp_path / "wino", n=3)
    config = EvalConfig(model=models["hf-clip"], benchmark="winoground", data=data, device="cpu",
                        batch_size="auto", cache=tmp_path / "cache", use_store=False, progress=False,
                        n_boot=0, workers=1)  # fmt: skip
    result = run_eval(config)
    assert "using batch size 32" in capsys.readouterr().out
    assert result.engine_stats["computed"] > 0 and DEFAULT_BATCH_SIZE == 32


# ----------------------------------------------------------------------------- uint8 from the workers
def _split_preprocessors() -> dict:
    import open_clip

    kinds = ("clip", "siglip", "blip")
    prepares = {kind: HFImagePreprocessor(make_tiny_image_processor(kind=kind, size=32)) for kind in kinds}
    prepares["open-clip"] = OpenClipImagePreprocessor(open_clip.image_transform(32, is_train=False))
    return prepares


@pytest.mark.parametrize("kind", ["clip", "siglip", "blip", "open-clip"])
def test_resized_uint8_pixels_finished_on_the_device_are_the_processors_own(kind: str) -> None:
    """The workers' half (resize, crop) in uint8 and the device's half (rescale, normalise) give the
    processor's own pixels to the bit, in float32 and in the model's float16, at a quarter of the bytes."""
    prepare = _split_preprocessors()[kind]
    assert prepare.splits()
    rng = np.random.default_rng(4)
    images = [_photo(rng, w, h) for w, h in [(61, 40), (32, 32), (25, 90)]]
    whole, half = prepare(images), prepare.resized(images)
    assert half.data.dtype == torch.uint8 and half.data.shape == whole.data.shape
    assert half.data.nbytes * 4 == whole.data.nbytes
    for dtype in (None, torch.float16):
        assert torch.equal(half.to("cpu", dtype), whole.to("cpu", dtype))
    joined = Prepared.join([prepare.resized(images[:1]), prepare.resized(images[1:])])
    assert torch.equal(joined.to("cpu"), whole.to("cpu"))  # pieces concatenated, then finished


def test_clips_split_as_their_frames_do() -> None:
    """A batch of clips through the clip-aware wrapper: the frames' uint8 pixels with the frame counts, finished to
    the wrapper's own pixels; a batch of images passes to the inner preprocessor's split."""
    from spotdiff.scorers.video import ClipPixels
    from spotdiff.video.clips import Clip

    prepare = ClipPixels(_split_preprocessors()["clip"])
    rng = np.random.default_rng(6)
    frames = [_photo(rng, 48, 40) for _ in range(5)]
    clips = [
        Clip(tuple(frames[:3]), (0, 1, 2), (0.0, 0.5, 1.0), 3, 2.0, "a"),
        Clip(tuple(frames[3:]), (0, 1), (0.0, 0.5), 2, 2.0, "b"),
    ]
    assert prepare.splits()
    whole, half = prepare(clips), prepare.resized(clips)
    assert half.data["pixel_values"].dtype == torch.uint8 and half.data["frames"].tolist() == [3, 2]
    got, want = half.to("cpu", torch.float16), whole.to("cpu", torch.float16)
    assert torch.equal(got["pixel_values"], want["pixel_values"]) and torch.equal(got["frames"], want["frames"])
    assert torch.equal(prepare.resized(frames).to("cpu"), prepare(frames).to("cpu"))


def test_only_the_standard_chains_split() -> None:
    """A processor that pads, one on the PIL backend, a training transform or a chain that resizes after
    the to-tensor step is run whole in the workers."""
    from torchvision import transforms as T
    from transformers import CLIPImageProcessorPil

    padded = make_tiny_image_processor(kind="clip", size=32)
    padded.do_pad = True
    assert not HFImagePreprocessor(padded).splits()
    assert not HFImagePreprocessor(CLIPImageProcessorPil()).splits()
    assert not OpenClipImagePreprocessor(T.Compose([T.RandomResizedCrop(32), T.ToTensor()])).splits()
    late = T.Compose([T.ToTensor(), T.Resize(32), T.Normalize((0.5,) * 3, (0.5,) * 3)])
    assert OpenClipImagePreprocessor(late).on_tensors() and not OpenClipImagePreprocessor(late).splits()


def test_workers_hand_over_uint8_pieces(tmp_path: Path) -> None:
    """Through two worker processes the pieces arrive as uint8 (float32 on the CPU by default) and the batches
    they make are the processor's."""
    prepare = _split_preprocessors()["clip"]
    rng = np.random.default_rng(5)
    refs = []
    for i in range(6):
        _photo(rng, 40 + 3 * i, 36).save(tmp_path / f"{i}.png")
        refs.append(FileImage(tmp_path / f"{i}.png"))
    reference = prepare([r.load() for r in refs]).data
    for uint8, dtype in ((True, torch.uint8), (None, torch.float32)):  # None: on CUDA only (this is the CPU)
        batches = list(InputPipeline(2, uint8=uint8).images(refs, [[0, 1, 2, 3], [4, 5]], prepare))
        assert [len(b) for b in batches] == [4, 2]
        assert all(piece.dtype == dtype for piece in batches[0].data)
        assert torch.equal(torch.cat([b.to("cpu") for b in batches]), reference)
    assert InputPipeline(0, device="cuda").pin == torch.cuda.is_available()  # the default's test
