"""Data shared by several benchmarks, declared once: image collections and the Karpathy split files.

Shared image :class:`~spotdiff.benchmarks.sources.Collection` s (COCO, Visual Genome, Flickr30K, ...) are
fetched once into ``<data home>/_shared/<name>`` and linked into every benchmark folder that uses them.
"""

from __future__ import annotations

from spotdiff.benchmarks.sources import (
    Checksum,
    Collection,
    HubSource,
    ImagesSource,
    ManualSource,
    Part,
    RemoteFile,
    Unpack,
    UrlSource,
    github_files,
    google_drive,
    pinned_files,
)

#: The data home's folder of shared image collections, ``<data home>/_shared/<name>``.
SHARED = "_shared"
#: The manifest ``spotdiff data fetch`` writes in every folder it fetches (:mod:`spotdiff.data.home`).
MANIFEST = "spotdiff-manifest.json"
#: The annotations' licence where the official repository states none.
NO_LICENCE = "no licence file in the repository"

_COCO_NOTE = "records of the archive by several downloaders (LAVIS, torch for R, CVAT scripts); not checked here"


def _coco(split: str, size: int, checksum: str | None, expect: tuple[str, ...] = ()) -> Collection:
    return Collection(
        f"coco-{split}",
        f"COCO {split} images",
        UrlSource(
            (
                RemoteFile(
                    f"http://images.cocodataset.org/zips/{split}.zip",
                    f"{split}.zip",
                    Checksum.parse(checksum, "published: " + _COCO_NOTE) if checksum else None,
                    size,
                    Unpack("", expect),
                ),
            ),
            origin="cocodataset.org",
        ),
        "COCO images: the Flickr terms of use of each image (cocodataset.org/#termsofuse)",
    )


#: The files of the hub dataset HanSolo9682/Vinoground (the authors' README: clone it, unzip both archives).
_VINOGROUND_VIDEOS = ("vinoground_videos", "vinoground_videos_concated")
_VINOGROUND_FILES = ("vinoground.csv", "vinoground_textscore.json", "vinoground_videoscore.json",
                     *(f"{name}.zip" for name in _VINOGROUND_VIDEOS))  # fmt: skip
_VG_URL = "https://cs.stanford.edu/people/rak248/VG_100K_2"

COLLECTIONS: dict[str, Collection] = {
    c.name: c
    for c in (
        # sha256 from two independent records of val2017.zip (815,585,330 bytes); md5
        # 442b8da7639aecaf257c1dceb8ba8c80 is the value most downloaders publish.
        _coco(
            "val2017",
            815585330,
            "sha256:4f7e2ccb2866ec5041993c9cf2a952bbed69647b115d0f74da7ce8f4bef82f05",
            ("000000397133.jpg",),
        ),
        _coco("train2017", 19336861798, "md5:cced6f7f71b7629ddf16f17bbcfab6b2"),
        _coco("val2014", 6645013297, "md5:a3d79f5ed8d289b7a7554ce06a5782b3"),
        # train2014.zip: downloaders publish two different md5 values, so none is pinned.
        _coco("train2014", 13510573713, None),
        Collection(
            "visual-genome",
            "Visual Genome 1.2 images (VG_100K, VG_100K_2)",
            UrlSource(
                (
                    RemoteFile(f"{_VG_URL}/images.zip", "images.zip", None, 9731705982, Unpack("VG_100K")),
                    RemoteFile(f"{_VG_URL}/images2.zip", "images2.zip", None, None, Unpack("VG_100K_2")),
                ),
                origin="visualgenome.org (Stanford)",
            ),
            "Visual Genome: CC BY 4.0",
        ),
        Collection(
            "swig-images-512",
            "SWiG / imSitu images, 512 px",
            UrlSource(
                (
                    RemoteFile(
                        "https://swig-data-weights.s3.us-east-2.amazonaws.com/images_512.zip",
                        "images_512.zip",
                        None,
                        None,
                        Unpack(""),
                    ),
                ),
                origin="github.com/allenai/swig (the link VL-CheckList's DATASETS.md gives)",
            ),
            "imSitu / SWiG terms: research use",
        ),
        Collection(
            "visual7w",
            "Visual7W images",
            UrlSource(
                (RemoteFile("http://vision.stanford.edu/yukezhu/visual7w_images.zip", "visual7w_images.zip",
                            None, None, Unpack("")),),
                origin="ai.stanford.edu/~yukez/visual7w",
            ),
            "Visual7W: see ai.stanford.edu/~yukez/visual7w (COCO images)",
        ),
        Collection(
            "visdial-val2018",
            "VisDial v1.0 validation images",
            UrlSource(
                (RemoteFile("https://www.dropbox.com/s/twmtutniktom7tu/VisualDialog_val2018.zip?dl=1",
                            "VisualDialog_val2018.zip", None, None, Unpack("")),),
                origin="visualdialog.org (Dropbox link of the VisDial v1.0 download page)",
            ),
            "VisDial: CC BY 4.0 annotations; images from Flickr",
        ),
        Collection(
            "aro-vg-images",
            "ARO VG-Relation / VG-Attribution images (vgr_vga_images.zip)",
            UrlSource(
                (RemoteFile(google_drive("1qaPlrwhGNMrR3a11iopZUT_GPP_LrgP9"), "vgr_vga_images.zip", None,
                            None, Unpack("")),),
                origin="Google Drive file of github.com/mertyg/vision-language-models-are-bows "
                "(dataset_zoo/aro_datasets.py)",
            ),
            "Visual Genome / GQA images: CC BY 4.0",
        ),
        Collection(
            "flickr30k",
            "Flickr30K images",
            ManualSource(
                "Flickr30K images (form)",
                "https://forms.illinois.edu/sec/229675",
                "Flickr30K images are distributed only after a request form: fill it in at "
                "https://forms.illinois.edu/sec/229675, download the image archive you are sent, and extract it "
                "so that the folder flickr30k-images/ (31,783 <id>.jpg files) is inside {target}.",
                ("flickr30k-images",),
            ),
            "Flickr30K: non-commercial research, Flickr terms of use (request form)",
        ),
        Collection(
            "flickr30k-test-1k-hub",
            "Flickr30K 1K test images (hub copy by nlphuji)",
            HubSource(
                "nlphuji/flickr_1k_test_image_text_retrieval",
                "c4a4cdc67b77fce148b45484a067957bf75ec4c3",
                ("images_flickr_1k_test.zip",),
                unpack=(("images_flickr_1k_test.zip", Unpack("")),),
            ),
            "Flickr30K terms (a third-party copy of the 1K test images; layout not checked here)",
        ),
        Collection(
            "coco2014-test-5k-hub",
            "COCO Karpathy 5K test images (hub copy by nlphuji)",
            HubSource(
                "nlphuji/mscoco_2014_5k_test_image_text_retrieval",
                "551c4f7667f06fa82b4ef0a07617bfc4cf324ac3",
                ("images_mscoco_2014_5k_test.zip",),
                unpack=(("images_mscoco_2014_5k_test.zip", Unpack("")),),
            ),
            "COCO terms (a third-party copy of the 5K test images; layout not checked here)",
        ),
        Collection(
            "vinoground-hub",
            "Vinoground (the gated hub dataset: annotations, prompts and both video folders)",
            HubSource(
                "HanSolo9682/Vinoground",
                None,
                _VINOGROUND_FILES,
                unpack=tuple((f"{name}.zip", Unpack(name)) for name in _VINOGROUND_VIDEOS),
                gated=True,
            ),
            "the terms of the hub dataset card of HanSolo9682/Vinoground (gated: accept them on the hub; not "
            "recorded here); the clips are cut from YouTube videos",
        ),
    )
}


def images_part(*folders: tuple[str, str], link: str = "images", name: str = "images", optional: bool = False,
                note: str = "") -> Part:
    """A part linking shared image collections into the benchmark folder; its licence is theirs.

    Args:
        folders: ``(collection name, folder inside it)`` pairs (:class:`~spotdiff.benchmarks.sources.ImagesSource`).
        link: where they appear in the benchmark folder.
        name: the part's name.
        optional: fetched only when named (``--part NAME``).
        note: what ``spotdiff data list`` adds about it.
    """
    licence = "; ".join(dict.fromkeys(COLLECTIONS[c].license for c, _ in folders))
    return Part(name, "images", ImagesSource(tuple(folders), link), optional=optional, license=licence, note=note)


def pinned_annotations(repository: tuple[str, str], name: str, license: str, strip: str = "") -> Part:
    """The ``annotations`` part: the files pinned in ``pins/<name>.tsv`` from a GitHub repository at a commit.

    Args:
        repository: ``(owner/name, commit)``.
        name: the pins file's name.
        license: the annotations' licence.
        strip: the prefix each file's path loses where it lands (``data/``).
    """
    files = github_files(*repository, pinned_files(name, strip=strip))
    return Part("annotations", "annotations", files, license=license)


_BLIP = "https://storage.googleapis.com/sfr-vision-language-research/datasets"


def karpathy_parts(dataset: str) -> tuple[Part, Part]:
    """BLIP's Karpathy test split file of ``dataset`` (coco or flickr) and its images: the data of ARO's
    order sets and of retrieval."""
    if dataset == "coco":
        return _karpathy("coco_karpathy_test.json"), images_part(("coco-val2014", ""), link="val2014")
    return _karpathy("flickr30k_test.json"), images_part(("flickr30k", "flickr30k-images"), link="flickr30k-images")


def hub_test_images(dataset: str) -> Part:
    """The optional part ``hub-images``: a hub copy of the Karpathy test images of ``dataset``."""
    if dataset == "coco":
        return images_part(("coco2014-test-5k-hub", ""), link="val2014", name="hub-images", optional=True,
                           note="instead of val2014.zip (6.6 GB): the 5K test images from a hub copy")
    return images_part(("flickr30k-test-1k-hub", ""), link="flickr30k-images", name="hub-images", optional=True,
                       note="instead of the form: the 1K test images from a hub copy")


def _karpathy(name: str) -> Part:
    return Part(
        "annotations",
        "annotations",
        UrlSource((RemoteFile(f"{_BLIP}/{name}", name),), origin="BLIP (storage.googleapis.com)"),
        license="BLIP's Karpathy split files (BSD-3-Clause, salesforce/BLIP); captions from COCO / Flickr30K",
        note="BLIP's Karpathy split files, the ones ARO downloads; no checksum could be checked offline",
    )


def mieb_part(repo: str, revision: str, size: int | None) -> Part:
    """MTEB's revision-pinned parquet mirror of an ARO set (optional part ``mieb``).

    Args:
        repo: the hub dataset.
        revision: the commit MTEB's task pins.
        size: its download size in bytes, when the hub states it.
    """
    return Part(
        "mieb",
        "both",
        HubSource(repo, revision, ("data/test-*.parquet",), dest="mieb", total_bytes=size),
        optional=True,
        license="MIT (as MTEB declares it)",
        note="MTEB's revision-pinned parquet mirror (images inside), the revision MTEB's task pins",
    )
