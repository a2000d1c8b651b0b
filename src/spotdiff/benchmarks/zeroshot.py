"""Zero-shot image classification in the CLIP_benchmark convention (benchmark ``zeroshot-classification``).

Each image is a case against every class label, scored with the dataset's prompt ensemble (protocol
``zeroshot``). Formats (``wds``, ``cifar``, ``parquet``, ``folder``), class names and templates:
docs/loaders.md.
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
from PIL import Image

from spotdiff.benchmarks._io import option_choice, read_json, read_text
from spotdiff.benchmarks.base import BENCHMARKS, Benchmark, BenchmarkMetadata, LoadReport
from spotdiff.benchmarks.sources import MEASURED, Checksum, ManualSource, Part, RemoteFile, UrlSource
from spotdiff.benchmarks.zeroshot_data import DATASETS, IMAGENET_CLASSNAMES, IMAGENET_TEMPLATES, ZeroShotDataset
from spotdiff.cases import ArrayImage, Case, FileImage, ImageRef
from spotdiff.errors import ConfigError, DataError
from spotdiff.pickles import load_data

FORMATS = ("wds", "cifar", "parquet", "folder")
PARQUET_PATTERNS = ("data/{split}-*.parquet", "{split}/*.parquet", "{split}-*.parquet")
IMAGE_COLUMNS = ("image", "img", "jpg", "png", "webp")
LABEL_COLUMNS = ("label", "fine_label", "labels", "cls")
#: torchvision's ``IMG_EXTENSIONS`` (the folder format) and the webdataset image extensions.
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
WDS_IMAGE_EXTENSIONS = ("webp", "png", "jpg", "jpeg")
CIFAR_FOLDERS = {"cifar10": "cifar-10-batches-py", "cifar100": "cifar-100-python"}
SKIP_NOT_IMAGE = "file in a class folder without an image extension"
_WDS_KEY = re.compile(r"^((?:.*/|)[^./]+)\.([^/]*)$")  # webdataset's base_plus_ext


@dataclass(frozen=True, eq=False)
class TarMemberImage(ImageRef):
    """An image stored as a member of an uncompressed tar file (a webdataset shard), read in place."""

    tar: Path
    offset: int
    size: int
    name: str

    def _bytes(self) -> bytes:
        try:
            with open(self.tar, "rb") as f:
                f.seek(self.offset)
                data = f.read(self.size)
        except OSError as exc:
            raise DataError(f"cannot read image {self.describe()}: {exc}") from exc
        if len(data) != self.size:
            raise DataError(f"image {self.describe()} is truncated ({len(data)} of {self.size} bytes)")
        return data

    @cached_property
    def key(self) -> str:  # type: ignore[override]
        return "tar:" + hashlib.sha256(self._bytes()).hexdigest()

    def load(self) -> Image.Image:
        return self._decode(io.BytesIO(self._bytes()), None)

    def describe(self) -> str:
        return f"{self.tar}:{self.name}"


def read_list(path: Path, what: str, keys: tuple[str, ...] = ()) -> list[str]:
    """Non-empty stripped entries of a JSON list, of a JSON object's first of ``keys`` (CLIP_benchmark's
    files keyed by dataset name), or of a text file (one entry a line).

    Args:
        path: the file.
        what: what the entries are (``class names``, ...), for errors.
        keys: the keys a JSON object is looked up by, in order.
    """
    if not path.is_file():
        raise ConfigError(f"{what} file not found: {path}")
    if path.suffix.lower() == ".json":
        data = read_json(path)
        if isinstance(data, dict):
            key = next((k for k in keys if k in data), None)
            if key is None:
                raise DataError(f"no {what} list under any of {list(keys)}; keys: {sorted(data)[:8]}", file=path)
            data = data[key]
        if not isinstance(data, list):
            raise DataError(f"expected a JSON list of {what}, got {type(data).__name__}", file=path)
        for i, entry in enumerate(data):
            if not isinstance(entry, str) or not entry.strip():
                raise DataError(f"expected a non-empty string, got {entry!r:.60}", file=path, record=i, field=what)
        return [e.strip() for e in data]
    return [line.strip() for line in read_text(path).splitlines() if line.strip()]


def check_templates(templates: list[str], source: Path) -> tuple[str, ...]:
    """The templates as a tuple, each checked to hold ``{c}``."""
    if not templates:
        raise DataError("no prompt templates", file=source)
    for i, template in enumerate(templates):
        if "{c}" not in template:
            raise DataError(f"template {template!r:.60} has no '{{c}}' for the class name", file=source, record=i,
                            field="template")  # fmt: skip
    return tuple(templates)


def _unpickle(path: Path) -> dict:
    data = load_data(path, "a CIFAR file")  # arrays, lists and strings only: a pickle naming code is refused
    if not isinstance(data, dict):
        raise DataError(f"expected a pickled dict, got {type(data).__name__}", file=path)
    return data


@dataclass
class _Samples:
    """What a format reads: per sample its case id, image and label; the data's own class names and
    templates, when it holds them; the files whose digest identifies the data."""

    ids: list[str]
    images: list[ImageRef]
    labels: list[int]
    classnames: list[str] | None
    templates: list[str] | None
    files: list[Path]
    source: Path
    skipped: dict[str, int] = field(default_factory=dict)
    folders: list[str] = field(default_factory=list)


_PARTS = (
    Part(
        "classnames",
        "annotations",
        UrlSource(
            (RemoteFile(IMAGENET_CLASSNAMES.url, "en_classnames.json",
                        Checksum("sha256", IMAGENET_CLASSNAMES.sha256, MEASURED), 39429),),
            origin="github.com/LAION-AI/CLIP_benchmark",
            revision=IMAGENET_CLASSNAMES.url.split("/")[5],
        ),
        license="MIT (CLIP_benchmark)",
        note="the OpenAI class names of ImageNet-1k and others: -o classnames=<this file> (key imagenet1k); "
        "git blob 86de297547d0ec07b9b7ffe6345b5af4e433fc2e",
    ),
    Part(
        "datasets",
        "images",
        ManualSource(
            "a zero-shot classification dataset",
            "https://github.com/LAION-AI/CLIP_benchmark/blob/main/benchmark/webdatasets.txt",
            "Each dataset is its own folder under {target}: a hub webdataset (hf download --repo-type dataset "
            "clip-benchmark/wds_<name> --local-dir {target}/<name>, names as in CLIP_benchmark's "
            "benchmark/webdatasets.txt with / written -), torchvision's CIFAR-10/100 "
            "(torchvision.datasets.CIFAR10(root='{target}/cifar10', download=True)), or ImageNet val as "
            "torchvision's ImageNet lays it out ({target}/imagenet1k/val/<wnid>/); then evaluate with "
            "--data {target}/<name> -o dataset=<name> (spotdiff benchmarks zeroshot-classification).",
            (),
        ),
        optional=True,
        license="per dataset",
    ),
)


@BENCHMARKS.register("zeroshot-classification")
class ZeroShotClassification(Benchmark):
    # the -o options it reads
    option_names = ("dataset", "format", "split", "image_column", "label_column", "classnames", "templates")
    metadata = BenchmarkMetadata(
        title="Zero-shot classification in the CLIP_benchmark convention (Radford et al. 2021; Cherti et al. 2023)",
        protocols=("zeroshot",),
        description=(
            "zero-shot image classification with prompt ensembles, top-1 / top-5 / mean per-class recall, in the "
            "CLIP_benchmark convention (Radford et al. 2021; Cherti et al. 2023): ImageNet-1k, CIFAR-10/100 and the "
            "ELEVATER / VTAB sets as built-in datasets (-o dataset=NAME), or any image folder"
        ),
        layout=(
            "DIR in one of four formats (option format=wds|cifar|parquet|folder; by default the first found):\n"
            "  wds:    DIR/<split>/nshards.txt, DIR/<split>/0.tar ... (<key>.webp|png|jpg + <key>.cls),\n"
            "          DIR/classnames.txt, DIR/zeroshot_classification_templates.txt (hub: clip-benchmark/wds_<name>)\n"
            "  cifar:  DIR/cifar-10-batches-py/{test_batch,batches.meta} or DIR/cifar-100-python/{test,meta}\n"
            "  parquet: DIR/data/<split>-*.parquet (hub datasets: image/img + label columns, ClassLabel names)\n"
            "  folder: DIR/<class>/<image> (torchvision ImageFolder, sorted classes); ImageNet val: DIR/val/<wnid>/\n"
            "options: dataset=NAME, a built-in dataset: " + ", ".join(DATASETS) + "\n"
            "  classnames=FILE: a JSON list, a CLIP_benchmark JSON object or one name a line; ImageNet's 1,000\n"
            "    OpenAI names: " + IMAGENET_CLASSNAMES.url + " (key imagenet1k)\n"
            "  templates=FILE: a JSON list of strings with {c}, or one a line; split=test|val|train\n"
            "case: one image x every class name, the true class positive; id <split>/<sample>; tags subset, label"
        ),
        paper=(
            "Radford et al. Learning Transferable Visual Models From Natural Language Supervision. ICML 2021 "
            "(zero-shot classification with prompt ensembles, Sec. 3.1.4); Cherti et al. Reproducible Scaling Laws "
            "for Contrastive Language-Image Learning. CVPR 2023 (CLIP_benchmark)"
        ),
        reference="https://github.com/LAION-AI/CLIP_benchmark",
        citation="""\
@inproceedings{radford2021learning,
  title     = {Learning Transferable Visual Models From Natural Language Supervision},
  author    = {Radford, Alec and Kim, Jong Wook and Hallacy, Chris and Ramesh, Aditya and Goh, Gabriel and
               Agarwal, Sandhini and Sastry, Girish and Askell, Amanda and Mishkin, Pamela and Clark, Jack and
               Krueger, Gretchen and Sutskever, Ilya},
  booktitle = {International Conference on Machine Learning (ICML)},
  year      = {2021}
}
@inproceedings{cherti2023reproducible,
  title     = {Reproducible Scaling Laws for Contrastive Language-Image Learning},
  author    = {Cherti, Mehdi and Beaumont, Romain and Wightman, Ross and Wortsman, Mitchell and Ilharco, Gabriel and
               Gordon, Cade and Schuhmann, Christoph and Schmidt, Ludwig and Jitsev, Jenia},
  booktitle = {IEEE/CVF Conference on Computer Vision and Pattern Recognition (CVPR)},
  year      = {2023}
}
""",
        main_score=("zeroshot", "top1"),
        reproduces="SPEC Table 3 'Zero-shot' (ELEVATER average); the retention checks of SPEC Sec. 5.2",
        license="per dataset (ImageNet: non-commercial research terms; CIFAR: MIT-style terms of its authors); "
        "CLIP_benchmark's code and lists: MIT",
        parts=_PARTS,
        data_notes="The images are per dataset and large (ImageNet val 6.4 GB); only the class-name list is fetched "
        "by default. Built-in datasets: spotdiff.benchmarks.zeroshot_data.",
    )

    # ------------------------------------------------------------------------------- options
    @cached_property
    def dataset(self) -> ZeroShotDataset | None:
        """The built-in dataset: ``dataset=NAME``, or the CIFAR data the folder holds."""
        name = self.options.get("dataset")
        if name is not None and str(name) not in DATASETS:
            raise ConfigError(f"unknown zero-shot dataset {name!r}; built in: {', '.join(DATASETS)}")
        held = None
        if self.options.get("format") in (None, "auto", "cifar"):
            held = next((n for n, folder in CIFAR_FOLDERS.items() if (self.root / folder).is_dir()), None)
        if name is not None and held is not None and str(name) != held:
            raise ConfigError(f"dataset={name} but {self.root} holds {held}")
        return DATASETS[str(name or held)] if (name or held) else None

    @cached_property
    def split(self) -> str:
        if self.options.get("split"):
            return str(self.options["split"])
        splits = self.dataset.splits if self.dataset else ("test",)
        return next((s for s in splits if (self.root / s).is_dir()), splits[0])

    def check_subset(self, subset: str | None) -> None:
        if subset is not None and subset != self.split:
            raise ConfigError(
                f"benchmark {self.name!r} reads one split at a time (split={self.split}); its subset is the split"
            )

    @cached_property
    def format(self) -> str:
        fmt = option_choice(self.options, "format", ("auto", *FORMATS), "auto")
        if fmt != "auto":
            return fmt
        if (self.root / self.split / "nshards.txt").is_file():
            return "wds"
        if any((self.root / folder).is_dir() for folder in CIFAR_FOLDERS.values()):
            return "cifar"
        if any(any(self.root.glob(p.format(split=self.split))) for p in PARQUET_PATTERNS):
            return "parquet"
        if self.root.is_dir():
            return "folder"
        raise DataError(f"no zero-shot classification data (wds, cifar or an image folder) in {self.root}")

    # ------------------------------------------------------------------------------- reading
    @cached_property
    def samples(self) -> _Samples:
        readers = {"wds": self._read_wds, "cifar": self._read_cifar, "parquet": self._read_parquet}
        return readers.get(self.format, self._read_folder)()

    def _read_wds(self) -> _Samples:
        base = self.root / self.split
        nshards_file = base / "nshards.txt"
        try:
            nshards = int(read_text(nshards_file).strip())
        except ValueError as exc:
            raise DataError("expected the number of shards, an integer", file=nshards_file) from exc
        ids, images, labels, files = [], [], [], [nshards_file]
        for shard in range(nshards):
            path = base / f"{shard}.tar"
            if not path.is_file():
                raise DataError(f"shard {shard}.tar is missing ({nshards} shards listed)", file=nshards_file)
            files.append(path)
            found: dict[str, dict[str, tarfile.TarInfo]] = {}
            try:
                with tarfile.open(path, "r:") as tar:
                    members = [m for m in tar.getmembers() if m.isfile()]
                    for member in members:
                        match = _WDS_KEY.match(member.name)
                        if match:
                            found.setdefault(match.group(1), {})[match.group(2).lower()] = member
                    cls_values = {k: tar.extractfile(m["cls"]).read() for k, m in found.items() if "cls" in m}
            except (tarfile.TarError, OSError, EOFError) as exc:
                raise DataError(f"not a readable tar shard: {exc}", file=path) from exc
            for key, parts in found.items():
                image = next((parts[e] for e in WDS_IMAGE_EXTENSIONS if e in parts), None)
                if image is None:
                    raise DataError("sample has no .webp/.png/.jpg image", file=path, record=key, field="image")
                if key not in cls_values:
                    raise DataError("sample has no .cls label", file=path, record=key, field="cls")
                try:
                    label = int(cls_values[key].decode("utf-8").strip())
                except (UnicodeDecodeError, ValueError) as exc:
                    raise DataError(f"label is not an integer: {cls_values[key][:20]!r}", file=path, record=key,
                                    field="cls") from exc  # fmt: skip
                ids.append(f"{self.split}/{shard}/{key}")
                images.append(TarMemberImage(path, image.offset_data, image.size, image.name))
                labels.append(label)
        names, templates, lists = self._own_lists(self.root)
        return _Samples(ids, images, labels, names, templates, files + lists, base)

    def _own_lists(self, *folders: Path) -> tuple[list[str] | None, list[str] | None, list[Path]]:
        """The data's own ``classnames.txt`` (first of ``folders`` holding one) and templates file."""
        names = next((f / "classnames.txt" for f in folders if (f / "classnames.txt").is_file()), None)
        templates = self.root / "zeroshot_classification_templates.txt"
        return (
            read_list(names, "class names") if names else None,
            read_list(templates, "templates") if templates.is_file() else None,
            [p for p in (names, templates) if p is not None and p.is_file()],
        )

    def _read_cifar(self) -> _Samples:
        name = self.dataset.name if self.dataset is not None else None
        if name not in CIFAR_FOLDERS:
            raise DataError(f"no {' or '.join(CIFAR_FOLDERS.values())} folder in {self.root}")
        folder = self.root / CIFAR_FOLDERS[name]
        split = self.split
        if name == "cifar10":
            batch_files = ["test_batch"] if split == "test" else [f"data_batch_{i}" for i in range(1, 6)]
            meta_file, names_key, labels_key = folder / "batches.meta", "label_names", "labels"
        else:
            batch_files = [split]
            meta_file, names_key, labels_key = folder / "meta", "fine_label_names", "fine_labels"
        if split not in ("test", "train"):
            raise ConfigError(f"{name} has splits test and train, not {split!r}")
        ids, images, labels, files = [], [], [], []
        for batch_name in batch_files:
            path = folder / batch_name
            files.append(path)
            batch = _unpickle(path)
            data, batch_labels = batch.get("data"), batch.get(labels_key)
            if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
                raise DataError("expected an N x 3072 uint8 array", file=path, field="data")
            if not isinstance(batch_labels, list) or len(batch_labels) != len(data):
                raise DataError(f"expected {len(data)} labels", file=path, field=labels_key)
            pixels = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
            for i, (array, label) in enumerate(zip(pixels, batch_labels, strict=True)):
                if not isinstance(label, int):
                    raise DataError(f"label is not an integer: {label!r:.20}", file=path, record=i, field=labels_key)
                ids.append(f"{split}/{len(ids):05d}")
                images.append(ArrayImage(array, name=f"{path}[{i}]"))
                labels.append(label)
        meta = _unpickle(meta_file) if meta_file.is_file() else {}
        stored = meta.get(names_key)
        if meta and (not isinstance(stored, list) or not all(isinstance(n, str) for n in stored)):
            raise DataError("expected a list of class names", file=meta_file, field=names_key)
        return _Samples(ids, images, labels, stored, None, files + ([meta_file] if meta else []), folder)

    def _read_parquet(self) -> _Samples:
        import json

        import pyarrow.parquet as pq

        from spotdiff.benchmarks._parquet import find_parquet, iter_rows

        patterns = [p.format(split=self.split) for p in PARQUET_PATTERNS]
        files = find_parquet(self.root, patterns, what=f"{self.split} split")
        try:
            schema = pq.read_schema(files[0])
        except (OSError, ValueError) as exc:
            raise DataError(f"cannot read parquet file: {exc}", file=files[0]) from exc

        def column(option: str, candidates: tuple[str, ...]) -> str:
            name = self.options.get(option) or next((c for c in candidates if c in schema.names), None)
            if name is None:
                raise DataError(f"no {' / '.join(candidates)} column (columns: {', '.join(schema.names)}); "
                                f"name it with -o {option}=NAME", file=files[0])  # fmt: skip
            return str(name)

        image, label = column("image_column", IMAGE_COLUMNS), column("label_column", LABEL_COLUMNS)
        try:
            features = json.loads((schema.metadata or {}).get(b"huggingface", b"{}"))["info"]["features"]
            names = features[label]["names"]
        except (KeyError, TypeError, ValueError):
            names = None
        ids, images, labels = [], [], []
        for path, row, values in iter_rows(files, [label], [image]):
            if not isinstance(values[label], int):
                raise DataError(f"label is not an integer: {values[label]!r:.20}", file=path, record=row, field=label)
            ids.append(f"{self.split}/{path.stem}/{row}")
            images.append(values[image])
            labels.append(values[label])
        return _Samples(ids, images, labels, names, None, files, files[0].parent)

    def _read_folder(self) -> _Samples:
        base = self.root / self.split if (self.root / self.split).is_dir() else self.root
        classes = sorted(entry.name for entry in base.iterdir() if entry.is_dir())
        if not classes:
            raise DataError(f"no class folders in {base}")
        ids, images, labels, skipped = [], [], [], 0
        for label, cls in enumerate(classes):
            for path in sorted(p for p in (base / cls).rglob("*") if p.is_file()):
                if path.suffix.lower() not in IMAGE_EXTENSIONS:
                    skipped += 1
                    continue
                ids.append(f"{self.split}/{path.relative_to(base).as_posix()}")
                images.append(FileImage(path))
                labels.append(label)
        names, templates, lists = self._own_lists(base, self.root)
        skips = {SKIP_NOT_IMAGE: skipped} if skipped else {}
        return _Samples(ids, images, labels, names or classes, templates, lists, base, skips, classes)

    # ------------------------------------------------------------------------------- lists
    def _lookup_keys(self) -> tuple[str, ...]:
        if self.dataset is None:
            return ()
        name = self.dataset.name
        return (name, name.replace("vtab-", "vtab/"), name.removeprefix("vtab-"))

    @cached_property
    def classnames(self) -> tuple[str, ...]:
        option = self.options.get("classnames")
        if option:
            names = read_list(Path(str(option)).expanduser(), "class names", self._lookup_keys())
        elif self.dataset is not None and self.dataset.classnames is not None:
            names = list(self.dataset.classnames)
            stored = self.samples.classnames
            if stored is not None and list(stored) != names:
                raise DataError(f"the data's class names are not {self.dataset.name}'s: {stored[:5]} ...",
                                file=self.samples.files[-1])  # fmt: skip
        elif self.format == "folder" and self.dataset is not None and self.dataset.classnames_source is not None:
            src = self.dataset.classnames_source
            if not (self.samples.source / "classnames.txt").is_file() and not (self.root / "classnames.txt").is_file():
                raise ConfigError(
                    f"{self.dataset.name}: give the class names with -o classnames=FILE; `spotdiff data fetch "
                    f"zeroshot-classification` downloads the official list, {src.url} (key {src.key!r}, sha256 "
                    f"{src.sha256})"
                )
            names = self.samples.classnames or []
        else:
            names = self.samples.classnames or []
        expected = self.dataset.n_classes if self.dataset is not None else None
        if expected is not None and len(names) != expected:
            raise DataError(f"{len(names)} class names for {self.dataset.name}, which has {expected} classes")
        if self.format == "folder" and len(names) != len(self.samples.folders):
            raise DataError(f"{len(names)} class names for {len(self.samples.folders)} class folders",
                            file=self.samples.source)  # fmt: skip
        if not names:
            raise DataError(f"no class names for {self.root}")
        return tuple(names)

    @cached_property
    def templates(self) -> tuple[str, ...]:
        option = self.options.get("templates")
        if option:
            path = Path(str(option)).expanduser()
            return check_templates(read_list(path, "templates", (*self._lookup_keys(), "imagenet1k")), path)
        if self.dataset is not None and self.dataset.templates is not None:
            return self.dataset.templates
        if self.samples.templates is not None:
            return check_templates(self.samples.templates, self.root / "zeroshot_classification_templates.txt")
        return IMAGENET_TEMPLATES

    # ------------------------------------------------------------------------------- cases
    def data_files(self) -> list[Path]:
        files = list(self.samples.files)
        for key in ("classnames", "templates"):
            if self.options.get(key):
                files.append(Path(str(self.options[key])).expanduser())
        return files

    def data_digest(self) -> str:
        """SHA-256 over the annotation files, the class names, the templates and every sample's id and
        label (image bytes are identified by the cache keys of the images themselves)."""
        h = hashlib.sha256(super().data_digest().encode())
        h.update(repr((self.format, self.split, self.classnames, self.templates)).encode())
        for sample_id, label in zip(self.samples.ids, self.samples.labels, strict=True):
            h.update(f"{sample_id}\t{label}\n".encode())
        return h.hexdigest()

    def cases(self, subset: str | None = None) -> Iterator[Case]:
        self.check_subset(subset)
        self.report = LoadReport()
        samples = self.samples
        names, templates = self.classnames, self.templates
        self.report.records = len(samples.ids) + sum(samples.skipped.values())
        for rule, n in samples.skipped.items():
            self.report.skip(rule, n)
        truth = np.eye(len(names), dtype=bool)
        tags = [{"subset": self.split, "label": name} for name in names]
        for sample_id, image, label in zip(samples.ids, samples.images, samples.labels, strict=True):
            if not 0 <= label < len(names):
                raise DataError(
                    f"label {label} outside the {len(names)} classes", file=samples.source, record=sample_id,
                    field="label",
                )  # fmt: skip
            yield Case(sample_id, names, truth[label : label + 1], (image,), tags[label], prompts=templates)
