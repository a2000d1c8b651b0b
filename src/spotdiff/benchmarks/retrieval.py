"""COCO and Flickr30K image-text retrieval on the Karpathy test splits (one gallery case, R@1/5/10).

Reads the BLIP / ARO annotation files as ARO's ``COCO_Retrieval`` does. Format and options:
docs/loaders.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from spotdiff.benchmarks._io import find_file, nonempty_strings, option_bool, option_choice, option_int, read_json
from spotdiff.benchmarks.base import BENCHMARKS, Benchmark, BenchmarkMetadata, LoadReport
from spotdiff.benchmarks.shared import hub_test_images, karpathy_parts
from spotdiff.cases import Case, FileImage
from spotdiff.errors import ConfigError, DataError

SPLITS = ("test", "val")
KARPATHY_FILES = {"coco": "coco_karpathy_{split}.json", "flickr": "flickr30k_{split}.json"}

_PUNCT = re.compile(r"([.!\"()*#:;~])")
_SPACES = re.compile(r"\s{2,}")


def pre_caption(caption: str, max_words: int = 50) -> str:
    """BLIP's ``pre_caption`` as ARO ships it, transcribed: ``dataset_zoo/retrieval.py`` lines 15-34 of
    github.com/mertyg/vision-language-models-are-bows at commit 81fdd20dc5b6f434aa5a4a971717bc80d1cedb0d;
    ARO's ``COCO_Retrieval`` / ``Flickr30k_Retrieval`` and its order datasets call it with ``max_words=30``.

    Lowercases, replaces each of ``.!"()*#:;~`` by a space, collapses runs of whitespace, strips
    surrounding newlines and spaces, and keeps the first ``max_words`` space-separated words.

    Args:
        caption: the caption.
        max_words: the number of words kept.

    >>> pre_caption("A man (left) rides a horse.  ", 4)
    'a man left rides'
    """
    caption = _PUNCT.sub(" ", caption.lower())
    caption = _SPACES.sub(" ", caption)
    caption = caption.rstrip("\n").strip(" ")
    words = caption.split(" ")
    if len(words) > max_words:
        caption = " ".join(words[:max_words])
    return caption


def read_karpathy(path: Path) -> list[tuple[str, list[str]]]:
    """The ``(image, captions)`` records of a BLIP-format Karpathy split file, validated."""
    data = read_json(path)
    if not isinstance(data, list):
        raise DataError(f"expected a JSON list of per-image records, got {type(data).__name__}", file=path)
    out: list[tuple[str, list[str]]] = []
    seen: dict[str, int] = {}
    for i, record in enumerate(data):
        if not isinstance(record, dict):
            raise DataError(f"expected an object, got {type(record).__name__}", file=path, record=i)
        if "image" not in record:
            raise DataError("missing field", file=path, record=i, field="image")
        image = record["image"]
        if not isinstance(image, str) or not image.strip():
            raise DataError(
                f"expected a non-empty string, got {image!r:.60}", file=path, record=i, field="image"
            )
        if image in seen:
            raise DataError(
                f"image {image!r} is listed twice (first as record {seen[image]})",
                file=path,
                record=i,
                field="image",
            )
        seen[image] = i
        if "caption" not in record:
            raise DataError("missing field", file=path, record=i, field="caption")
        captions = record["caption"]
        if isinstance(captions, str):
            captions = [captions]
        if not isinstance(captions, list) or not captions:
            raise DataError(
                f"expected a non-empty list of captions, got {captions!r:.60}",
                file=path,
                record=i,
                field="caption",
            )
        out.append((image, nonempty_strings(captions, "caption", file=path, record_id=i, name="caption")))
    return out


KARPATHY_CITATION = """\
@inproceedings{karpathy2015deep,
  title     = {Deep Visual-Semantic Alignments for Generating Image Descriptions},
  author    = {Karpathy, Andrej and Fei-Fei, Li},
  booktitle = {IEEE Conference on Computer Vision and Pattern Recognition (CVPR)},
  year      = {2015}
}
"""
COCO_CITATION = """\
@inproceedings{lin2014microsoft,
  title     = {Microsoft {COCO}: Common Objects in Context},
  author    = {Lin, Tsung-Yi and Maire, Michael and Belongie, Serge and Hays, James and Perona, Pietro and
               Ramanan, Deva and Doll{\\'a}r, Piotr and Zitnick, C. Lawrence},
  booktitle = {European Conference on Computer Vision (ECCV)},
  year      = {2014}
}
"""
FLICKR_CITATION = """\
@article{young2014image,
  title   = {From Image Descriptions to Visual Denotations: New Similarity Metrics for Semantic Inference over
             Event Descriptions},
  author  = {Young, Peter and Lai, Alice and Hodosh, Micah and Hockenmaier, Julia},
  journal = {Transactions of the Association for Computational Linguistics},
  volume  = {2},
  pages   = {67--78},
  year    = {2014}
}
"""


RETRIEVAL_TIES = (
    "strict (pessimistic): a false candidate tied with the truth ranks above it; --ties argmax ranks a tied "
    "candidate above only when it is listed first (index order, as a stable sort)"
)


class _KarpathyBenchmark(Benchmark):
    """Shared file resolution for the benchmarks built on the BLIP Karpathy split files."""
    option_names = ("split", "images")  # the -o options it reads

    dataset = "coco"

    def _split(self) -> str:
        return option_choice(self.options, "split", SPLITS, "test")

    def _annotation(self) -> Path:
        name = KARPATHY_FILES[self.dataset].format(split=self._split())
        return find_file(self.root, (name, f"annotations/{name}"), what=f"Karpathy split file {name}")

    def _image_root(self, ann: Path) -> Path:
        value = self.options.get("images")
        if value:
            return Path(str(value)).expanduser()
        return self.root if self.root.is_dir() else ann.parent

    def data_files(self) -> list[Path]:
        return [self._annotation()]

    def check_subset(self, subset: str | None) -> None:
        split = self._split()
        if subset is not None and subset != split:
            raise ConfigError(
                f"benchmark {self.name!r} reads one split at a time (option split={split}); its subset is "
                f"the split name, not {subset!r}"
            )


class _Retrieval(_KarpathyBenchmark):
    option_names = ("pre_caption", "max_words")  # the -o options it reads
    def cases(self, subset: str | None = None) -> Iterator[Case]:
        self.check_subset(subset)
        self.report = LoadReport()
        split = self._split()
        ann = self._annotation()
        records = read_karpathy(ann)
        self.report.records = len(records)
        base = self._image_root(ann)
        clean = option_bool(self.options, "pre_caption", True)
        max_words = option_int(self.options, "max_words", 30)
        texts: list[str] = []
        owner: list[int] = []
        for i, (_, captions) in enumerate(records):
            for caption in captions:
                text = pre_caption(caption, max_words) if clean else caption
                if not text.strip():
                    raise DataError(f"caption {caption!r:.60} is empty after pre_caption",
                                    file=ann, record=i, field="caption")
                texts.append(text)
                owner.append(i)
        if not records:
            return
        truth = np.zeros((len(records), len(texts)), dtype=bool)
        truth[np.asarray(owner), np.arange(len(texts))] = True
        yield Case(
            id=f"{self.dataset}-{split}",
            texts=tuple(texts),
            truth=truth,
            images=tuple(FileImage(base / image) for image, _ in records),
            tags={"subset": split, "dataset": self.dataset},
        )


_LAYOUT = """\
DIR/{file} (BLIP/ARO Karpathy split; option split=val reads the _val file; DIR may be the file)
  [{{"image": "<path relative to DIR>", "caption": [5 captions], ...}}]
images: DIR/<image>, or option images=PATH as the image root
case: one gallery, N images x T captions, truth[i, t] = caption t is one of image i's; id {name}-<split>
texts pass through ARO's pre_caption(caption, max_words=30) as its COCO_Retrieval does (ARO Table 6);
  option max_words=N, option pre_caption=false keeps them verbatim
tags: subset = the split, dataset"""


def _declare(dataset: str, **fields: str) -> BenchmarkMetadata:
    """A Karpathy test split of ``dataset`` (coco or flickr) as a retrieval benchmark."""
    return BenchmarkMetadata(
        protocols=("retrieval",),
        subsets=SPLITS,
        layout=_LAYOUT.format(file=KARPATHY_FILES[dataset].format(split="test"), name=dataset),
        parts=(*karpathy_parts(dataset), hub_test_images(dataset)),
        main_score=("retrieval", "rsum"),
        ties=RETRIEVAL_TIES,
        **fields,
    )


@BENCHMARKS.register("coco-retrieval")
class CocoRetrieval(_Retrieval):
    dataset = "coco"
    metadata = _declare(
        dataset,
        title="COCO Karpathy 5K test retrieval",
        description="COCO Karpathy 5K test split image-text retrieval, R@1/5/10 both directions "
        "(Karpathy & Fei-Fei 2015; BLIP annotation files, as in ARO and VisualGPTScore)",
        paper="Lin et al. Microsoft COCO: Common Objects in Context. ECCV 2014; Karpathy and Fei-Fei. Deep "
        "Visual-Semantic Alignments for Generating Image Descriptions. CVPR 2015 (5K test split)",
        reference="https://cocodataset.org",
        citation=COCO_CITATION + KARPATHY_CITATION,
        reproduces="VisualGPTScore Table 4b; ARO Table 6",
        license="COCO captions CC BY 4.0; images under the Flickr terms",
    )


@BENCHMARKS.register("flickr-retrieval")
class FlickrRetrieval(_Retrieval):
    dataset = "flickr"
    metadata = _declare(
        dataset,
        title="Flickr30K Karpathy 1K test retrieval",
        description="Flickr30K 1K test split image-text retrieval, R@1/5/10 both directions "
        "(Young et al. 2014, Karpathy split; BLIP annotation files, as in ARO and VisualGPTScore)",
        paper="Young, Lai, Hodosh, Hockenmaier. From Image Descriptions to Visual Denotations. TACL 2014; "
        "Karpathy and Fei-Fei. CVPR 2015 (1K test split)",
        reference="https://shannon.cs.illinois.edu/DenotationGraph/",
        citation=FLICKR_CITATION + KARPATHY_CITATION,
        reproduces="VisualGPTScore Table 4b",
        license="Flickr30K: non-commercial research (request form)",
    )
