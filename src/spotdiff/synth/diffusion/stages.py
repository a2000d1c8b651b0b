"""The optional generative backend: SPEC's stages with real models (SPEC Sec. 3.2.1-3.2.4).

Text-to-image sources, Grounding DINO + SAM isolation and inpainted backgrounds; needs the
``generate`` extra, imported lazily. Details: docs/synthesis.md.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from spotdiff.errors import ConfigError, DataError
from spotdiff.synth.canvas.objects import SPLITS, ObjectInstance, ObjectSource, tight_crop
from spotdiff.synth.diffusion.models import (
    DEFAULT_DETECTOR,
    DEFAULT_INPAINT,
    DEFAULT_SEGMENTER,
    DEFAULT_T2I,
    LIBRARY_SIZE,
    Models,
    check_model,
    check_stage_models,
    quiet_loading,
    require,
    resolve_device,
    weights_identity,
)
from spotdiff.synth.output import save_png

#: the 80 COCO classes SPEC draws its objects from (Sec. 3.2.1)
COCO_CLASSES = (
    "person",
    "bicycle",
    "car",
    "motorcycle",
    "airplane",
    "bus",
    "train",
    "truck",
    "boat",
    "traffic light",
    "fire hydrant",
    "stop sign",
    "parking meter",
    "bench",
    "bird",
    "cat",
    "dog",
    "horse",
    "sheep",
    "cow",
    "elephant",
    "bear",
    "zebra",
    "giraffe",
    "backpack",
    "umbrella",
    "handbag",
    "tie",
    "suitcase",
    "frisbee",
    "skis",
    "snowboard",
    "sports ball",
    "kite",
    "baseball bat",
    "baseball glove",
    "skateboard",
    "surfboard",
    "tennis racket",
    "bottle",
    "wine glass",
    "cup",
    "fork",
    "knife",
    "spoon",
    "bowl",
    "banana",
    "apple",
    "sandwich",
    "orange",
    "broccoli",
    "carrot",
    "hot dog",
    "pizza",
    "donut",
    "cake",
    "chair",
    "couch",
    "potted plant",
    "bed",
    "dining table",
    "toilet",
    "tv",
    "laptop",
    "mouse",
    "remote",
    "keyboard",
    "cell phone",
    "microwave",
    "oven",
    "toaster",
    "sink",
    "refrigerator",
    "book",
    "clock",
    "vase",
    "scissors",
    "teddy bear",
    "hair drier",
    "toothbrush",
)
OBJECT_PROMPT = "a photo of a single and fully visible {}"
BACKGROUND_PROMPT = "a photo of {}, empty, nothing in it"


def _torch_generator(seed: int):
    torch = require("torch", "the generative backend")
    return torch.Generator(device="cpu").manual_seed(int(seed))


def default_batch_size(device: str) -> int:
    """Text-to-image prompts per pipeline call when not given: 8 on CUDA, 1 elsewhere.

    >>> default_batch_size("cuda:0"), default_batch_size("cpu")
    (8, 1)
    """
    return 8 if device.startswith("cuda") else 1


def _class_offset(category: str) -> int:
    """Where a class's library starts in the seed space: fixed by its name (below 2**28)."""
    return int.from_bytes(hashlib.sha256(category.encode()).digest()[:4], "big") % 2**28


class PhotoCache:
    """Generated photos by key: PNG files in a folder (written whole, so a second run or a resumed one
    reuses them), or this process's memory without a folder. A key names everything a photo depends on
    (the weights by content, prompt, seed, size, steps)."""

    def __init__(self, folder: str | Path | None) -> None:
        self.folder = Path(folder) if folder else None
        self._memory: dict[str, Image.Image] = {}

    def _path(self, key: str) -> Path | None:
        return None if self.folder is None else self.folder / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.png"

    def __contains__(self, key: str) -> bool:
        path = self._path(key)
        return path.is_file() if path is not None else key in self._memory

    def get(self, key: str) -> Image.Image | None:
        path = self._path(key)
        if path is None:
            return self._memory.get(key)
        if not path.is_file():
            return None
        with Image.open(path) as im:
            return im.convert("RGB")

    def put(self, key: str, image: Image.Image) -> None:
        path = self._path(key)
        if path is None:
            self._memory[key] = image
        else:
            save_png(image, path)


class TextToImageSource(ObjectSource):
    """Stage 1 with a diffusers text-to-image pipeline: a library of instances per class (SPEC Sec. 3.2.1).

    As in the paper, each class has a library of generated photos (``library_size`` of them per
    split), and a case picks its instances from it. Each instance keeps its own seed (one
    ``torch.Generator`` per image), so a photo does not depend on the batch it was rendered in and
    the disk cache holds across batch sizes. A library is rendered as it is needed: the first
    instance drawn from it renders its run of ``batch_size`` neighbours in one pipeline call.

    Args:
        pipeline: a built text-to-image pipeline; None: loaded from ``model`` when first used.
        model: the diffusers model id or path.
        classes: the class names an instance is drawn from.
        size: the generated image side in pixels.
        steps: the number of inference steps.
        device: the device the pipeline runs on.
        cache_dir: a folder of generated images (one PNG per weights, prompt, seed, size and steps), so
            a second set reuses the instances of the first; None: the images are kept in memory.
        library_size: the instances per class (and split) a case picks from.
        batch_size: the prompts per pipeline call; None: :func:`default_batch_size` of ``device``.
        models: the run's shared pipelines (backgrounds use the same text-to-image pipeline); None: own.
        weights: what identifies the weights in the cache key
            (:func:`~spotdiff.synth.diffusion.models.weights_identity`); None: worked out from ``model``.
    """

    name = "text-to-image"

    def __init__(
        self,
        pipeline: Any = None,
        *,
        model: str = DEFAULT_T2I,
        classes: Sequence[str] = COCO_CLASSES,
        size: int = 512,
        steps: int = 30,
        device: str = "cpu",
        cache_dir: str | Path | None = None,
        library_size: int = LIBRARY_SIZE,
        batch_size: int | None = None,
        models: Models | None = None,
        weights: str | None = None,
    ) -> None:
        if int(library_size) < 1 or (batch_size is not None and int(batch_size) < 1):
            raise ConfigError(f"library size and batch size must be >= 1, got {library_size} and {batch_size}")
        self._pipeline = pipeline
        self.model = model
        self.models = models or Models(device)
        self._weights = weights
        self.classes = list(classes)
        self.size = int(size)
        self.steps = int(steps)
        self.device = device
        self.library_size = int(library_size)
        self.batch_size = int(batch_size) if batch_size else default_batch_size(device)
        self.cache = PhotoCache(cache_dir)
        #: instances served from the cache (disk or memory) without rendering
        self.cache_hits = 0
        #: pipeline calls made and images they rendered
        self.calls = 0
        self.rendered = 0

    @property
    def pipeline(self) -> Any:
        if self._pipeline is None:
            self._pipeline = self.models.pipeline("text2image", self.model)
        return self._pipeline

    @property
    def weights(self) -> str:
        """What identifies the weights (the snapshot's commit or the weight files' SHA-256), not the path;
        without a cache folder the photos live in this process only, and the model's name will do."""
        if self._weights is None:
            if self.cache.folder is None:
                return self.model
            self._weights = weights_identity(self.model, check_model(self.model, "text2image", "--t2i"))
        return self._weights

    def categories(self) -> list[str]:
        return list(self.classes)

    def library_seed(self, category: str, index: int, split: str = "test") -> int:
        """The seed of instance ``index`` of a class's library: fixed by the class, not by the run.

        Every set draws from the same library, so a second set reuses the first one's cached photos;
        test seeds are even and training seeds odd, as for every source.

        Args:
            category: the class.
            index: the position in the library, ``0 <= index < library_size``.
            split: ``test`` or ``train``.
        """
        if split not in SPLITS:
            raise ConfigError(f"unknown split {split!r}; known: {', '.join(SPLITS)}")
        return (_class_offset(category) + int(index)) * 2 + SPLITS[split]

    def library(self, category: str, split: str = "test") -> list[ObjectInstance]:
        """The instances of a class's library, in order."""
        return [self._instance(category, self.library_seed(category, j, split)) for j in range(self.library_size)]

    @staticmethod
    def _instance(category: str, seed: int) -> ObjectInstance:
        return ObjectInstance(category, None, "plain", seed, source="text-to-image")

    def sample(self, rng, *, split="test", category=None, exclude=(), colour=None, texture=None):
        if category is None:
            options = [c for c in self.classes if c not in exclude]
            category = options[int(rng.integers(len(options)))]
        return self._instance(category, self.library_seed(category, int(rng.integers(self.library_size)), split))

    def _key(self, instance: ObjectInstance) -> str:
        return f"{self.weights}|{OBJECT_PROMPT.format(instance.category)}|{instance.seed}|{self.size}|{self.steps}"

    def render(self, instances: Iterable[ObjectInstance]) -> int:
        """Render the instances not yet stored, ``batch_size`` prompts per pipeline call.

        Each photo is stored (on disk, or in memory without a cache folder) as soon as its batch
        returns, so a run that fails or is interrupted keeps every finished batch.

        Args:
            instances: the instances to render (duplicates and stored ones are skipped).

        Returns:
            The number of photos rendered.
        """
        todo = [inst for inst in dict.fromkeys(instances) if self._key(inst) not in self.cache]
        for start in range(0, len(todo), self.batch_size):
            batch = todo[start : start + self.batch_size]
            out = self.pipeline(
                prompt=[OBJECT_PROMPT.format(inst.category) for inst in batch],
                height=self.size,
                width=self.size,
                num_inference_steps=self.steps,
                generator=[_torch_generator(inst.seed) for inst in batch],
            )
            self.calls += 1
            if len(out.images) != len(batch):
                got = len(out.images)
                raise DataError(
                    f"the text-to-image pipeline {self.model} returned {got} images for {len(batch)} prompts"
                )
            for inst, image in zip(batch, out.images, strict=True):
                self.cache.put(self._key(inst), image.convert("RGB"))
                self.rendered += 1
        return len(todo)

    def render_library(self, categories: Sequence[str] | None = None, split: str = "test") -> int:
        """Render whole class libraries ahead (batches may span classes); return the photos rendered.

        Args:
            categories: the classes; None: all of ``classes``.
            split: ``test`` or ``train``.
        """
        names = self.classes if categories is None else categories
        return self.render(inst for c in names for inst in self.library(c, split))

    def batch(self, instance: ObjectInstance) -> list[ObjectInstance]:
        """The instances made with ``instance``: its run of ``batch_size`` in its library (rendered, then
        isolated, together)."""
        return self._neighbours(instance)

    def _neighbours(self, instance: ObjectInstance) -> list[ObjectInstance]:
        """The batch an instance is rendered in: its run of ``batch_size`` in its library, or itself."""
        index = instance.seed // 2 - _class_offset(instance.category)
        if not 0 <= index < self.library_size or instance != self._instance(instance.category, instance.seed):
            return [instance]
        start = index // self.batch_size * self.batch_size
        return self.library(instance.category, instance.split)[start : start + self.batch_size]

    def generate(self, instance: ObjectInstance) -> Image.Image:
        """The photo of one instance: the paper's prompt for its class, seeded by the instance."""
        image = self.cache.get(self._key(instance))
        if image is not None:
            self.cache_hits += 1
            return image
        self.render(self._neighbours(instance))
        image = self.cache.get(self._key(instance))
        assert image is not None
        return image


class GroundingSamIsolator:
    """Stage 2: Grounding DINO box from the class prompt, then a SAM mask from that box (Sec. 3.2.2).

    ``detector``/``segmenter`` are model ids or paths (loaded with ``from_pretrained``), or
    ``(model, processor)`` pairs. The box with the highest score is used; with no detection above
    ``box_threshold`` the best-scoring box is still taken (the image holds one prominent object by
    construction), and an empty mask is a DataError.

    Args:
        detector: the Grounding DINO model id or path, or a ``(model, processor)`` pair.
        segmenter: the SAM model id or path, or a ``(model, processor)`` pair.
        box_threshold: the box score of a confident detection (kept as an attribute: the best box is
            taken whatever its score).
        text_threshold: the text score of a confident detection (kept as an attribute, likewise).
        device: the device the models run on.
    """

    name = "grounding-dino+sam"

    def __init__(
        self,
        detector: Any = DEFAULT_DETECTOR,
        segmenter: Any = DEFAULT_SEGMENTER,
        *,
        box_threshold: float = 0.3,
        text_threshold: float = 0.25,
        device: str = "cpu",
    ) -> None:
        self._detector_spec = detector
        self._segmenter_spec = segmenter
        self._detector: tuple[Any, Any] | None = None
        self._segmenter: tuple[Any, Any] | None = None
        self.box_threshold = box_threshold
        self.text_threshold = text_threshold
        self.device = device

    def _load(self, spec: Any, kind: str) -> tuple[Any, Any]:
        if isinstance(spec, tuple):
            return spec
        transformers = require("transformers", "object isolation")
        with quiet_loading():
            if kind == "detector":
                model = transformers.GroundingDinoForObjectDetection.from_pretrained(spec)
            else:
                model = transformers.SamModel.from_pretrained(spec)
            processor = transformers.AutoProcessor.from_pretrained(spec)
        return model.to(self.device).eval(), processor

    @property
    def detector(self) -> tuple[Any, Any]:
        if self._detector is None:
            self._detector = self._load(self._detector_spec, "detector")
        return self._detector

    @property
    def segmenter(self) -> tuple[Any, Any]:
        if self._segmenter is None:
            self._segmenter = self._load(self._segmenter_spec, "segmenter")
        return self._segmenter

    def detect(self, images: Sequence[Image.Image], categories: Sequence[str]) -> list[tuple[list[float], float]]:
        """For each photo, the best box ``[x0, y0, x1, y1]`` (pixels) for ``"a <category>."`` and its score;
        the photos go through Grounding DINO as one batch."""
        torch = require("torch", "object isolation")
        model, processor = self.detector
        texts = [f"a {c}." for c in categories]
        inputs = processor(images=list(images), text=texts, return_tensors="pt", padding=True).to(self.device)
        with torch.no_grad():
            outputs = model(**inputs)
        sizes = [(im.size[1], im.size[0]) for im in images]
        results = processor.post_process_grounded_object_detection(
            outputs, inputs["input_ids"], threshold=0.0, text_threshold=0.0, target_sizes=sizes
        )
        return [_best_box(r["boxes"], r["scores"], *im.size) for r, im in zip(results, images, strict=True)]

    def segment(self, images: Sequence[Image.Image], boxes: Sequence[list[float]]) -> list[np.ndarray]:
        """For each photo, SAM's best mask (by predicted IoU) for its box prompt, as an HxW bool array; the
        photos go through SAM as one batch."""
        torch = require("torch", "object isolation")
        model, processor = self.segmenter
        inputs = processor(images=list(images), input_boxes=[[list(b)] for b in boxes], return_tensors="pt")
        inputs = inputs.to(self.device)
        with torch.no_grad():
            outputs = model(**inputs, multimask_output=True)
        masks = processor.image_processor.post_process_masks(
            outputs.pred_masks.cpu(), inputs["original_sizes"].cpu(), inputs["reshaped_input_sizes"].cpu()
        )  # per photo: (boxes, masks, H, W)
        best = outputs.iou_scores[:, 0].argmax(dim=-1).tolist()
        return [m[0, k].numpy().astype(bool) for m, k in zip(masks, best, strict=True)]

    def isolate_batch(self, images: Sequence[Image.Image], instances: Sequence[ObjectInstance]) -> list[Image.Image]:
        """SPEC Sec. 3.2.2 for a batch of photos: Grounding DINO boxes, then SAM masks, each model called once."""
        rgb = [im.convert("RGB") for im in images]
        boxes = [box for box, _score in self.detect(rgb, [inst.category for inst in instances])]
        cuts = []
        for photo, mask, inst in zip(rgb, self.segment(rgb, boxes), instances, strict=True):
            if not mask.any():
                raise DataError(f"SAM found no object pixels for {inst.category!r} ({inst.key})")
            rgba = photo.convert("RGBA")
            rgba.putalpha(Image.fromarray(np.where(mask, 255, 0).astype(np.uint8), "L"))
            cuts.append(tight_crop(rgba))
        return cuts

    def isolate(self, image: Image.Image, instance: ObjectInstance) -> Image.Image:
        return self.isolate_batch([image], [instance])[0]


def _best_box(boxes, scores, width: int, height: int) -> tuple[list[float], float]:
    """The highest-scoring box clipped to the photo; the whole photo when there is none or it is degenerate."""
    if len(scores) == 0:
        return [0.0, 0.0, float(width), float(height)], 0.0
    best = int(scores.argmax())
    x0, y0, x1, y1 = (float(v) for v in boxes[best])
    x0, x1 = sorted((max(0.0, min(width, x0)), max(0.0, min(width, x1))))
    y0, y1 = sorted((max(0.0, min(height, y0)), max(0.0, min(height, y1))))
    if x1 - x0 < 2 or y1 - y0 < 2:
        return [0.0, 0.0, float(width), float(height)], float(scores[best])
    return [x0, y0, x1, y1], float(scores[best])


class InpaintBackground:
    """Stage 4 with diffusion: an initial background expanded by inpainting (Sec. 3.2.4, Fig. 4).

    ``fill`` is called once per case and its result shared by all candidates. ``initial`` is the
    fraction of the canvas side the initial background covers (centred); the rest is inpainted.

    Args:
        text_to_image: a built text-to-image pipeline; None: loaded from ``t2i_model`` when first used.
        inpaint: a built inpainting pipeline; None: loaded from ``inpaint_model`` when first used.
        t2i_model: the text-to-image model id or path.
        inpaint_model: the inpainting model id or path.
        scenes: the scenes a background is drawn from.
        initial: the fraction of the canvas side the initial background covers.
        steps: the number of inference steps.
        device: the device the pipelines run on.
        models: the run's shared pipelines (the objects' text-to-image pipeline is reused); None: own.
        cache_dir: a folder keeping every background (keyed by both models' weights, scene, seed, size,
            steps), so a resumed or repeated run reuses it; None: this process's memory.
        batch_size: backgrounds per pipeline call when several are made ahead (:meth:`prefetch`).
        weights: what identifies the two models' weights in the cache key; None: their names as given.
    """

    name = "inpaint"

    def __init__(
        self,
        text_to_image: Any = None,
        inpaint: Any = None,
        *,
        t2i_model: str = DEFAULT_T2I,
        inpaint_model: str = DEFAULT_INPAINT,
        scenes: Sequence[str] = ("a meadow", "a living room", "a beach", "a wooden table", "a kitchen", "a street"),
        initial: float = 0.5,
        steps: int = 30,
        device: str = "cpu",
        models: Models | None = None,
        cache_dir: str | Path | None = None,
        batch_size: int | None = None,
        weights: tuple[str, str] | None = None,
    ) -> None:
        self._t2i = text_to_image
        self._inpaint = inpaint
        self.t2i_model = t2i_model
        self.inpaint_model = inpaint_model
        self.scenes = tuple(scenes)
        self.initial = float(initial)
        self.steps = int(steps)
        self.device = device
        self.models = models or Models(device)
        self.cache = PhotoCache(cache_dir)
        self.batch_size = int(batch_size) if batch_size else default_batch_size(device)
        self.weights = weights or (t2i_model, inpaint_model)
        #: pipeline calls made (text-to-image and inpainting each count one) and backgrounds rendered
        self.calls = 0
        self.rendered = 0

    @property
    def text_to_image(self) -> Any:
        if self._t2i is None:
            self._t2i = self.models.pipeline("text2image", self.t2i_model)
        return self._t2i

    @property
    def inpaint(self) -> Any:
        if self._inpaint is None:
            self._inpaint = self.models.pipeline("inpainting", self.inpaint_model)
        return self._inpaint

    def draw(self, rng: np.random.Generator, scene: str | None = None) -> tuple[str, int]:
        """A case's scene and background seed, drawn from its generator (what :meth:`fill` draws)."""
        scene = scene or self.scenes[int(rng.integers(len(self.scenes)))]
        return scene, int(rng.integers(0, 2**31))

    def fill(self, size: int, rng: np.random.Generator, scene: str | None = None) -> tuple[Image.Image, str]:
        """Generate one background and expand it to the canvas; return it with its scene.

        Args:
            size: the square image side in pixels.
            rng: the case's generator (it seeds the diffusion).
            scene: the scene to draw; None: one of ``scenes``, drawn with ``rng``.
        """
        scene, seed = self.draw(rng, scene)
        return self.render([(scene, seed)], size)[0], scene

    def prefetch(self, size: int, rngs: Sequence[np.random.Generator]) -> int:
        """Make the backgrounds of cases ahead, ``batch_size`` per pipeline call; return how many were made.

        Args:
            size: the square image side in pixels.
            rngs: each case's generator as :meth:`fill` will get it (they are consumed here).
        """
        return len(self.render([self.draw(rng) for rng in rngs], size, count=True))

    def _key(self, scene: str, seed: int, size: int) -> str:
        t2i, inpaint = self.weights
        return f"background|{t2i}|{inpaint}|{BACKGROUND_PROMPT.format(scene)}|{seed}|{size}|{self.initial}|{self.steps}"

    def render(self, requests: Sequence[tuple[str, int]], size: int, count: bool = False) -> list:
        """The backgrounds of ``(scene, seed)`` requests; the ones not stored yet made in batches (each image
        from its own generators, so a background does not depend on its batch) and stored.

        Args:
            requests: ``(scene, seed)`` pairs.
            size: the square image side in pixels.
            count: return the requests made now instead of the images.
        """
        todo = list(dict.fromkeys(r for r in requests if self._key(*r, size) not in self.cache))
        for start in range(0, len(todo), self.batch_size):
            batch = todo[start : start + self.batch_size]
            for (scene, seed), image in zip(batch, self._expand(batch, size), strict=True):
                self.cache.put(self._key(scene, seed, size), image)
            self.rendered += len(batch)
        if count:
            return todo
        return [self.cache.get(self._key(scene, seed, size)) for scene, seed in requests]

    def _expand(self, batch: Sequence[tuple[str, int]], size: int) -> list[Image.Image]:
        """SPEC Fig. 4 for a batch: initial backgrounds in one text-to-image call, expanded in one inpainting call."""
        prompts = [BACKGROUND_PROMPT.format(scene) for scene, _seed in batch]
        inner = max(8, int(size * self.initial)) // 8 * 8
        firsts = self.text_to_image(
            prompt=prompts,
            height=inner,
            width=inner,
            num_inference_steps=self.steps,
            generator=[_torch_generator(seed) for _scene, seed in batch],
        ).images
        off = (size - inner) // 2
        canvases, mask = [], Image.new("L", (size, size), 255)
        mask.paste(0, (off, off, off + inner, off + inner))
        for first in firsts:
            canvas = Image.new("RGB", (size, size), (127, 127, 127))
            canvas.paste(first.convert("RGB"), (off, off))
            canvases.append(canvas)
        expanded = self.inpaint(
            prompt=prompts,
            image=canvases,
            mask_image=[mask] * len(batch),
            height=size,
            width=size,
            num_inference_steps=self.steps,
            generator=[_torch_generator(seed + 1) for _scene, seed in batch],
        ).images
        self.calls += 2
        out = []
        for first, image in zip(firsts, expanded, strict=True):
            image = image.convert("RGB")
            if image.size != (size, size):
                image = image.resize((size, size), Image.Resampling.LANCZOS)
            image.paste(first.convert("RGB"), (off, off))  # the initial background kept exactly
            out.append(image)
        return out


def make_generative_stages(
    *,
    t2i_model: str = DEFAULT_T2I,
    inpaint_model: str = DEFAULT_INPAINT,
    detector: Any = DEFAULT_DETECTOR,
    segmenter: Any = DEFAULT_SEGMENTER,
    classes: Sequence[str] = COCO_CLASSES,
    device: str = "auto",
    object_size: int = 512,
    steps: int = 30,
    cache_dir: str | Path | None = None,
    library_size: int = LIBRARY_SIZE,
    batch_size: int | None = None,
    dtype: str = "auto",
) -> tuple[TextToImageSource, GroundingSamIsolator, InpaintBackground]:
    """The three model-backed stages, every model checked first (one line for a wrong one, nothing loaded).

    The text-to-image pipeline is loaded once and shared by the objects and the backgrounds.

    Args:
        t2i_model: the text-to-image model id or path.
        inpaint_model: the inpainting model id or path.
        detector: the Grounding DINO model id or path, or a ``(model, processor)`` pair.
        segmenter: the SAM model id or path, or a ``(model, processor)`` pair.
        classes: the class names objects are drawn from.
        device: the device the models run on; ``auto``: CUDA when available.
        object_size: the side in pixels of a generated object image.
        steps: the number of inference steps.
        cache_dir: the on-disk cache of generated object images (see :class:`TextToImageSource`).
        library_size: the generated instances per class a case picks from.
        batch_size: text-to-image prompts per pipeline call; None: 8 on CUDA, 1 on the CPU.
        dtype: the diffusion pipelines' precision (``auto``: fp16 on CUDA, fp32 on the CPU; ``bf16``).
    """
    t2i_folder = check_stage_models(t2i_model, inpaint_model, detector, segmenter)
    device = resolve_device(device)
    models = Models(device, dtype)
    source = TextToImageSource(
        model=t2i_model,
        classes=classes,
        size=object_size,
        steps=steps,
        device=device,
        cache_dir=cache_dir,
        library_size=library_size,
        batch_size=batch_size,
        models=models,
        weights=weights_identity(t2i_model, t2i_folder),
    )
    isolator = GroundingSamIsolator(detector, segmenter, device=device)
    background = InpaintBackground(
        t2i_model=t2i_model,
        inpaint_model=inpaint_model,
        steps=steps,
        device=device,
        models=models,
        cache_dir=cache_dir,
        batch_size=batch_size,
        weights=(
            source.weights,
            weights_identity(inpaint_model, check_model(inpaint_model, "inpainting", "--inpaint")),
        ),
    )
    return source, isolator, background


__all__ = [
    "COCO_CLASSES",
    "LIBRARY_SIZE",
    "GroundingSamIsolator",
    "InpaintBackground",
    "TextToImageSource",
    "default_batch_size",
    "make_generative_stages",
]
