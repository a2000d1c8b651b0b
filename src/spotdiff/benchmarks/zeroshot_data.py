"""The built-in zero-shot classification datasets, declared as data: class names, templates, source.

Each :class:`ZeroShotDataset` is a short declaration over the shared loader
(:mod:`spotdiff.benchmarks.zeroshot`). Which datasets and where their lists come from: docs/loaders.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

#: The OpenAI ImageNet prompt ensemble (80 templates), in the published order (``lists/imagenet-templates.txt``).
IMAGENET_TEMPLATES: tuple[str, ...] = tuple(
    resources.files("spotdiff.benchmarks").joinpath("lists/imagenet-templates.txt").read_text(encoding="utf-8").splitlines()
)

#: The OpenAI CIFAR-10 / CIFAR-100 templates (18).
CIFAR_TEMPLATES: tuple[str, ...] = tuple(
    f"a {quality}photo of {article} {size}{{c}}."
    for article in ("a", "the")
    for quality, size in (
        ("", ""), ("blurry ", ""), ("black and white ", ""), ("low contrast ", ""), ("high contrast ", ""),
        ("bad ", ""), ("good ", ""), ("", "small "), ("", "big "),
    )
)  # fmt: skip

CIFAR10_CLASSES: tuple[str, ...] = (
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck",
)  # fmt: skip

#: CIFAR-100's fine label names in label order (alphabetical), as the dataset's ``meta`` stores them.
CIFAR100_CLASSES: tuple[str, ...] = (
    "apple", "aquarium_fish", "baby", "bear", "beaver", "bed", "bee", "beetle", "bicycle", "bottle",
    "bowl", "boy", "bridge", "bus", "butterfly", "camel", "can", "castle", "caterpillar", "cattle",
    "chair", "chimpanzee", "clock", "cloud", "cockroach", "couch", "crab", "crocodile", "cup", "dinosaur",
    "dolphin", "elephant", "flatfish", "forest", "fox", "girl", "hamster", "house", "kangaroo", "keyboard",
    "lamp", "lawn_mower", "leopard", "lion", "lizard", "lobster", "man", "maple_tree", "motorcycle", "mountain",
    "mouse", "mushroom", "oak_tree", "orange", "orchid", "otter", "palm_tree", "pear", "pickup_truck", "pine_tree",
    "plain", "plate", "poppy", "porcupine", "possum", "rabbit", "raccoon", "ray", "road", "rocket",
    "rose", "sea", "seal", "shark", "shrew", "skunk", "skyscraper", "snail", "snake", "spider",
    "squirrel", "streetcar", "sunflower", "sweet_pepper", "table", "tank", "telephone", "television", "tiger",
    "tractor", "train", "trout", "tulip", "turtle", "wardrobe", "whale", "willow_tree", "wolf", "woman", "worm",
)  # fmt: skip


@dataclass(frozen=True)
class ListSource:
    """Where an official list too long to write out here lives: a pinned URL, its SHA-256, and the
    key of the list inside the JSON file (``spotdiff data fetch`` downloads it into the data home)."""

    url: str
    sha256: str
    key: str


#: The 1,000 OpenAI ImageNet class names, in class-index order (CLIP_benchmark, pinned commit).
IMAGENET_CLASSNAMES = ListSource(
    url="https://raw.githubusercontent.com/LAION-AI/CLIP_benchmark/542bee780d3659dd3e8fe60e70bcd6b8ffa6728d/"
    "clip_benchmark/datasets/en_classnames.json",
    sha256="73d279021a4bc88059884d01fae66c35ec33793ede8bc9ae54c46632625c4993",
    key="imagenet1k",
)


@dataclass(frozen=True)
class ZeroShotDataset:
    """One built-in zero-shot classification dataset.

    Attributes:
        name: the ``dataset=`` option value (CLIP_benchmark's name, ``/`` written ``-``).
        kind: CLIP_benchmark's dataset type: natural, specialized or structured.
        formats: the on-disk formats that hold it (``wds``, ``cifar``, ``folder``).
        hub: the hub dataset of CLIP_benchmark's webdataset, when it is distributed there.
        classnames: the class names in label order, when built in.
        classnames_source: where the official class names are, when not built in.
        templates: the prompt templates, when built in (else the data's, else ImageNet's 80).
        n_classes: the number of classes, when known (checked on load).
        splits: the splits read when ``split=`` is not given, in order of preference: the first that the
            data folder holds (``DIR/<split>/``), else the first. ImageNet: ``test`` is the hub webdataset's
            (``clip-benchmark/wds_imagenet1k`` has ``train`` and ``test``), ``val`` torchvision's folder.
    """

    name: str
    kind: str
    formats: tuple[str, ...] = ("wds",)
    hub: str | None = None
    classnames: tuple[str, ...] | None = None
    classnames_source: ListSource | None = None
    templates: tuple[str, ...] | None = None
    n_classes: int | None = None
    splits: tuple[str, ...] = ("test",)


def _wds(name: str, kind: str) -> ZeroShotDataset:
    return ZeroShotDataset(name, kind, ("wds",), f"clip-benchmark/wds_{name}")


DATASETS: dict[str, ZeroShotDataset] = {
    d.name: d
    for d in (
        ZeroShotDataset(
            "imagenet1k",
            "natural",
            ("folder", "wds"),
            "clip-benchmark/wds_imagenet1k",
            classnames_source=IMAGENET_CLASSNAMES,
            templates=IMAGENET_TEMPLATES,
            n_classes=1000,
            splits=("test", "val"),
        ),
        ZeroShotDataset("cifar10", "natural", ("cifar",), None, CIFAR10_CLASSES, None, CIFAR_TEMPLATES, 10),
        ZeroShotDataset("cifar100", "natural", ("cifar",), None, CIFAR100_CLASSES, None, CIFAR_TEMPLATES, 100),
        *(
            _wds(name, kind)
            for name, kind in (
                ("imagenetv2", "natural"), ("imagenet_sketch", "specialized"), ("imagenet-a", "natural"),
                ("imagenet-r", "natural"), ("imagenet-o", "natural"), ("objectnet", "natural"),
                ("fer2013", "natural"), ("voc2007", "natural"), ("sun397", "natural"), ("cars", "natural"),
                ("fgvc_aircraft", "natural"), ("mnist", "specialized"), ("stl10", "natural"), ("gtsrb", "natural"),
                ("country211", "natural"), ("renderedsst2", "specialized"), ("vtab-caltech101", "natural"),
                ("vtab-cifar10", "natural"), ("vtab-cifar100", "natural"), ("vtab-clevr_count_all", "structured"),
                ("vtab-clevr_closest_object_distance", "structured"), ("vtab-diabetic_retinopathy", "specialized"),
                ("vtab-dmlab", "structured"), ("vtab-dsprites_label_orientation", "structured"),
                ("vtab-dsprites_label_x_position", "structured"), ("vtab-dsprites_label_y_position", "structured"),
                ("vtab-dtd", "natural"), ("vtab-eurosat", "specialized"),
                ("vtab-kitti_closest_vehicle_distance", "structured"), ("vtab-flowers", "natural"),
                ("vtab-pets", "natural"), ("vtab-pcam", "specialized"), ("vtab-resisc45", "specialized"),
                ("vtab-smallnorb_label_azimuth", "structured"), ("vtab-smallnorb_label_elevation", "structured"),
                ("vtab-svhn", "natural"),
            )
        ),
    )
}  # fmt: skip
