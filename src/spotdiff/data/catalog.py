"""Where every benchmark's data comes from: one short declaration per benchmark, official source first.

Each entry names the distribution its authors publish (a repository at a pinned commit, a hub
repository at a pinned revision, the host of the images), the size and the licence or terms, and the
parts that need a person (a form, a licence to accept). Optional parts are alternatives or extras
fetched only when named: MTEB's revision-pinned parquet mirrors of ARO (``--part mieb``, read with
``-o perturbations=mieb`` / ``-o source=mieb``), hub copies of the Karpathy test images, EqBen's
full set.

Checksums (see :class:`~spotdiff.data.sources.Checksum`): ``measured`` values were computed here on
byte-identical copies of the files (their git blob ids match the repository trees); ``git:`` values
are the blob ids the repositories' trees list; ``published`` values come from records of the
archives made by others (named in the origin). Sources listed without a checksum could not be
checked offline: their sha256 is measured at the first fetch and recorded in the manifest.
"""

from __future__ import annotations

from importlib import resources

from spotdiff.benchmarks.zeroshot_data import IMAGENET_CLASSNAMES
from spotdiff.data.sources import (
    BenchmarkSources,
    Checksum,
    Collection,
    HubSource,
    ImagesSource,
    ManualSource,
    Part,
    RemoteFile,
    Unpack,
    UrlSource,
)
from spotdiff.errors import ConfigError

MEASURED = "measured here on a byte-identical copy (git blob id matches the repository tree)"
GIT_TREE = "git blob id listed by the repository tree at the pinned commit"


def github_raw(repo: str, commit: str, path: str) -> str:
    """The raw.githubusercontent.com URL of ``path`` in ``repo`` at ``commit``."""
    return f"https://raw.githubusercontent.com/{repo}/{commit}/{path}"


def google_drive(file_id: str) -> str:
    """The direct-download URL of a public Google Drive file (the endpoint ``gdown`` uses)."""
    return f"https://drive.usercontent.google.com/download?id={file_id}&export=download&confirm=t"


def _github_files(repo: str, commit: str, files: list[tuple[str, str, int | None, str]]) -> UrlSource:
    """``files``: (path in the repository, local path, size, checksum text)."""
    return UrlSource(
        files=tuple(
            RemoteFile(
                github_raw(repo, commit, path),
                local,
                Checksum.parse(check, GIT_TREE if check.startswith("git:") else MEASURED),
                size,
            )
            for path, local, size, check in files
        ),
        origin=f"github.com/{repo}",
        revision=commit,
    )


# --------------------------------------------------------------------------------------------------
# Shared image collections
# --------------------------------------------------------------------------------------------------

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
    )
}


def _images(*folders: tuple[str, str], link: str = "images", name: str = "images", optional: bool = False,
            note: str = "") -> Part:
    licence = "; ".join(dict.fromkeys(COLLECTIONS[c].license for c, _ in folders))
    return Part(name, "images", ImagesSource(tuple(folders), link), optional=optional, license=licence, note=note)


# --------------------------------------------------------------------------------------------------
# Benchmarks
# --------------------------------------------------------------------------------------------------

_VISLA = ("Sri-Harsha/visla_benchmark", "adedd6974a3448ac9881466f801483dda13282e1")
_SUGARCREPE = ("RAIVNLab/sugar-crepe", "0047054b243992f0fad63d6f64f7544862daf846")
_VALSE = ("Heidelberg-NLP/VALSE", "2152d90d4aecd11f7f74cf03420abcb63efff9c5")
_VLC = ("om-ai-lab/VL-CheckList", "6f8d6a3281c401b89e4e154f46c6974ec2df3a82")
_CREPE = ("RAIVNLab/CREPE", "1fa81c425f442396fe304f170c8eb6dc0747c814")
_BLIP = "https://storage.googleapis.com/sfr-vision-language-research/datasets"
_KARPATHY_NOTE = "BLIP's Karpathy split files, the ones ARO downloads; no checksum could be checked offline"

_SUGARCREPE_FILES = [
    ("add_att", 158863, "012d88d729693d193760e6f3393b06a1cf874380a9db0062e937201199fe044d"),
    ("add_obj", 484593, "1b9d76b93139a937b8dc1ada92a4f05ecc821bb3c291d752428bafadd4bb0682"),
    ("replace_att", 176843, "9fe55fd4c0a9ad1f85d486d9f6d0215b41f867eb025026e7f7b5ce44352545ee"),
    ("replace_obj", 361126, "9d299600639947e9d15281a9ded1382b376cf4ea088a8d08a1314bfe76e81898"),
    ("replace_rel", 312629, "356bcc2fc4c6aed3f4d9fd50acc58489bb1fe70c28791f9368d4cbf9ea39cdc9"),
    ("swap_att", 154665, "7a7ce04e5c4c80412b48c6f0c1347fb1a2f5d54c0be6aa429b64d390e442f8d0"),
    ("swap_obj", 57569, "073cdb8e253d053614e80710834d9773b09dbc1dd0a412f6f9492262caa1dcad"),
]
_VALSE_FILES = [
    ("actant-swap", 503017, "915294ac3ade7c4c067b1c6841d0db93b60cb8a61ac8e2fb6b125c2a1c0ca93a"),
    ("action-replacement", 664129, "336ba134f29a3475d0508809067218909a6bd30f079c59309d19244eccb7917f"),
    ("coreference-hard", 95649, "ef54d8d971d9e0f264e07de08d9915c6e3d6129a2f239888f2b938f5c2eb4139"),
    ("coreference-standard", 592329, "dae1d9eb018acb54e29a1c4983f3563f86ec3b6beb4037a261564270b0473e95"),
    ("counting-adversarial", 407394, "0d23529308449c98b37a91048a865a5f377325eceb9accd73f2947bc512d12b0"),
    ("counting-hard", 537197, "2cc83615653675fb50914ce2d8ab4041cce1278eed7ac0abf6f319dbce5c967a"),
    ("counting-small-quant", 534996, "ca0645885b05738f6c6df2dffec70c669aaff64114017f33425821faab4bc374"),
    ("existence", 420403, "b20fca52eba86c544083d423345a2e28e60e601ef61c56c9ac1c73a95a3a6d18"),
    ("foil-it", 538911, "6f6f0d7494271ed28f6e6f075c3ba36ba1bc45d00ecf7403920f060915130460"),
    ("plurals", 1097122, "43760db7fc8c6f2a21d3536d52f81539cb101f3370e8d2effb09de43d91486a3"),
    ("relations", 664587, "061fc557459c318ccd6734d07c21cfa5bf5ae87aa6b1110b8f5ec3d6b2911043"),
]


def _vl_checklist_files() -> list[tuple[str, str, int | None, str]]:
    text = resources.files("spotdiff.data").joinpath("pins/vl-checklist.tsv").read_text(encoding="utf-8")
    rows = []
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            path, size, check = line.split("\t")
            rows.append((path, path, None if size == "-" else int(size), check))
    return rows


def _karpathy(name: str) -> Part:
    return Part(
        "annotations",
        "annotations",
        UrlSource((RemoteFile(f"{_BLIP}/{name}", name),), origin="BLIP (storage.googleapis.com)"),
        license="BLIP's Karpathy split files (BSD-3-Clause, salesforce/BLIP); captions from COCO / Flickr30K",
        note=_KARPATHY_NOTE,
    )


def _mieb(repo: str, revision: str, size: int | None) -> Part:
    return Part(
        "mieb",
        "both",
        HubSource(repo, revision, ("data/test-*.parquet",), dest="mieb", total_bytes=size),
        optional=True,
        license="MIT (as MTEB declares it)",
        note="MTEB's revision-pinned parquet mirror (images inside), the revision MTEB's task pins",
    )


def _winoground() -> BenchmarkSources:
    return BenchmarkSources(
        "winoground",
        "Winoground (Thrush et al., CVPR 2022)",
        "Winoground licence agreement (license_agreement.txt in the repository): research use only; images "
        "licensed from Getty Images",
        "https://huggingface.co/datasets/facebook/winoground",
        (
            Part(
                "data",
                "both",
                HubSource(
                    "facebook/winoground",
                    "b400e173549071916ad1b3d449293bc8d8b4b763",
                    ("data/*.parquet",),
                    gated=True,
                ),
                note="the revision MTEB pins; the captions, tags and image bytes in parquet",
            ),
        ),
        notes="Gated: log in at huggingface.co, accept the conditions on the dataset page, create a read token and "
        "set HF_TOKEN (or run `hf auth login`).",
    )


_CATALOG: tuple[BenchmarkSources, ...] = (
    BenchmarkSources(
        "visla-generic",
        "VISLA Generic (Dumpala et al., 2024)",
        "no licence file in the repository",
        "https://github.com/Sri-Harsha/visla_benchmark",
        (
            Part(
                "annotations",
                "annotations",
                _github_files(*_VISLA, [("data/Generic_VISLA.tsv", "Generic_VISLA.tsv", 186537,
                                         "sha256:99cad867a688d70af10e08ed2548720c95f88d774fb3e5e41bf6fddcab3fc6a6")]),
                license="no licence file in the repository",
            ),
            _images(("coco-val2017", "")),
        ),
    ),
    BenchmarkSources(
        "visla-spatial",
        "VISLA Spatial (Dumpala et al., 2024)",
        "no licence file in the repository",
        "https://github.com/Sri-Harsha/visla_benchmark",
        (
            Part(
                "annotations",
                "annotations",
                _github_files(*_VISLA, [("data/Spatial_VISLA.tsv", "Spatial_VISLA.tsv", 104032,
                                         "sha256:f1ec14db70183bf6748cf71324e98062f9f7c395d8202f60dbfabb7a6f1ab891")]),
                license="no licence file in the repository",
            ),
            # VISLA paper Sec. 3.2: the Spatial set is built on VSR, a subset of COCO 2017 (train and val).
            _images(("coco-train2017", ""), ("coco-val2017", "")),
        ),
    ),
    BenchmarkSources(
        "sugarcrepe",
        "SugarCrepe (Hsieh et al., NeurIPS 2023)",
        "MIT (annotations); COCO images",
        "https://github.com/RAIVNLab/sugar-crepe",
        (
            Part(
                "annotations",
                "annotations",
                _github_files(*_SUGARCREPE, [(f"data/{s}.json", f"{s}.json", n, f"sha256:{h}")
                                             for s, n, h in _SUGARCREPE_FILES]),
                license="MIT",
            ),
            _images(("coco-val2017", "")),
        ),
        notes="The README names COCO val2017 as the images; CLIP_benchmark downloads the same archive.",
    ),
    BenchmarkSources(
        "valse",
        "VALSE (Parcalabescu et al., ACL 2022)",
        "MIT (annotations); images under their datasets' terms",
        "https://github.com/Heidelberg-NLP/VALSE",
        (
            Part(
                "annotations",
                "annotations",
                _github_files(*_VALSE, [(f"data/{s}.json", f"{s}.json", n, f"sha256:{h}") for s, n, h in _VALSE_FILES]),
                license="MIT",
            ),
            # The `dataset` / `original_split` fields: SWiG test, VisDial v1.0 val (val2018 images) and
            # train (COCO train2014), Visual7W, FOIL (COCO val2014), COCO 2017 val.
            _images(
                ("swig-images-512", ""),
                ("visdial-val2018", ""),
                ("coco-train2014", ""),
                ("coco-val2014", ""),
                ("coco-val2017", ""),
                ("visual7w", ""),
            ),
        ),
        notes="VALSE's README asks for each source dataset's own download; these are those datasets' archives.",
    ),
    BenchmarkSources(
        "vl-checklist",
        "VL-CheckList (Zhao et al., arXiv:2207.00221)",
        "no licence file in the repository; images under their datasets' terms",
        "https://github.com/om-ai-lab/VL-CheckList",
        (
            Part("annotations", "annotations", _github_files(*_VLC, _vl_checklist_files()),
                 license="no licence file in the repository"),
            _images(("visual-genome", ""), link="images/vg", name="images-vg"),
            _images(("swig-images-512", ""), link="images/swig", name="images-swig"),
            Part(
                "images-hake",
                "images",
                ManualSource(
                    "HAKE images",
                    "https://github.com/DirtyHarryLYL/HAKE/tree/master/Images#download-images-for-hake",
                    "HAKE's images come from HICO-DET, V-COCO, OpenImages, HCVRD, PIC and HAKE's own crawl, each "
                    "with its own download (some by request). Follow "
                    "https://github.com/DirtyHarryLYL/HAKE/tree/master/Images#download-images-for-hake and put "
                    "them under {target}/images/hake/ as hake_images_20190730/, hake_images_20200614/, hcvrd/, "
                    "hico_20160224_det/images/{{train2015,test2015}}/, openimages/, pic/ and vcoco/{{train2014,"
                    "val2014}}/ (VL-CheckList DATASETS.md).",
                    ("images/hake/hake_images_20190730", "images/hake/hcvrd", "images/hake/hico_20160224_det",
                     "images/hake/openimages", "images/hake/pic", "images/hake/vcoco"),
                ),
                license="HAKE and its source datasets' terms",
                note="needed by the HAKE corpora only; the VG, VAW and SWiG corpora evaluate without it",
            ),
        ),
    ),
    BenchmarkSources(
        "eqben",
        "EqBen (Wang et al., ICCV 2023)",
        "Apache-2.0 (repository); data terms not stated",
        "https://github.com/Wangt-CN/EqBen",
        (
            Part(
                "annotations",
                "annotations",
                UrlSource(
                    (RemoteFile(google_drive("18BSRf1SnBtGiEc42mzRLirXaBLzYE5Tt"),
                                "eqben_subset_10percent_final.json"),),
                    origin="Google Drive link of the EqBen README (10% subset, Winoground style)",
                ),
                note="the open-label 10% subset (~25K pairs); no checksum could be checked offline",
            ),
            Part(
                "images",
                "images",
                UrlSource(
                    (RemoteFile(google_drive("13Iuirsvx34-9F_1Mjhs4Dqn59yokyUjy"), "eqben_subset_images.tar.gz",
                                None, None, Unpack("images")),),
                    origin="Google Drive link of the EqBen README (subset images, ~10 GB)",
                ),
            ),
            Part(
                "full",
                "both",
                UrlSource(
                    (
                        RemoteFile(google_drive("1gNR4K2Cv4rbnjVRdHuBV6PuoJ5MlRXnZ"),
                                   "full/private_info_global.json"),
                        RemoteFile(google_drive("1e608uhd36ak_v7SnlMVaYcekBc4gBqzn"), "eqben_full_images.tar.gz",
                                   None, None, Unpack("full/images")),
                    ),
                    origin="Google Drive links of the EqBen README (full test set: original annotation and "
                    "images, ~100 GB)",
                ),
                optional=True,
                note="evaluate with --data $(spotdiff data path eqben)/full",
            ),
            Part(
                "vllm",
                "both",
                UrlSource(
                    (RemoteFile(google_drive("11YUTf06uzRHtFV8rYi96z4vTPi8_GNEM"), "eqben_vllm.zip", None, None,
                                Unpack("vllm", ("all_select.json", "images"))),),
                    origin="Google Drive file that t2v_metrics' EqBen_Mini downloads",
                ),
                optional=True,
                note="t2v_metrics' EqBen_Mini set; evaluate with --data $(spotdiff data path eqben)/vllm",
            ),
        ),
    ),
    _winoground(),
    BenchmarkSources(
        "spec",
        "SPEC (Peng et al., CVPR 2024)",
        "Apache-2.0 (the hub dataset card); no licence file in the GitHub repository",
        "https://github.com/wjpoom/SPEC",
        (
            Part(
                "data",
                "both",
                HubSource(
                    "wjpoom/SPEC",
                    "694dfdc74fe72acdc932fd5fc919b6b0268f7a07",
                    ("data.zip",),
                    unpack=(("data.zip", Unpack("")),),
                ),
                note="data.zip (about 1.56 GB, as the SPEC README downloads it), unpacked into the six subset "
                "folders",
            ),
        ),
    ),
    BenchmarkSources(
        "aro-vg-relation",
        "ARO VG-Relation (Yuksekgonul et al., ICLR 2023)",
        "MIT (repository); Visual Genome images CC BY 4.0",
        "https://github.com/mertyg/vision-language-models-are-bows",
        (
            Part(
                "annotations",
                "annotations",
                UrlSource(
                    (RemoteFile(google_drive("1kX2iCHEv0CADL8dSO1nMdW-V0NqIAiP3"), "visual_genome_relation.json"),),
                    origin="Google Drive file of ARO's dataset_zoo/aro_datasets.py",
                ),
                license="MIT",
                note="no checksum could be checked offline",
            ),
            _images(("aro-vg-images", "")),
            _mieb("mteb/ARO-Visual-Relation", "53c1115ab5871ab33b09d5bb8856236d46bdaf2d", 765255644),
        ),
    ),
    BenchmarkSources(
        "aro-vg-attribution",
        "ARO VG-Attribution (Yuksekgonul et al., ICLR 2023)",
        "MIT (repository); Visual Genome images CC BY 4.0",
        "https://github.com/mertyg/vision-language-models-are-bows",
        (
            Part(
                "annotations",
                "annotations",
                UrlSource(
                    (RemoteFile(google_drive("13tWvOrNOLHxl3Rm9cR3geAdHx2qR3-Tw"),
                                "visual_genome_attribution.json"),),
                    origin="Google Drive file of ARO's dataset_zoo/aro_datasets.py",
                ),
                license="MIT",
                note="no checksum could be checked offline",
            ),
            _images(("aro-vg-images", "")),
            _mieb("mteb/ARO-Visual-Attribution", "25fe9b460426ff67cdb0608a737c94f8f49a901e", None),
        ),
    ),
    BenchmarkSources(
        "aro-coco-order",
        "ARO COCO-Order (Yuksekgonul et al., ICLR 2023)",
        "MIT (ARO); COCO images under the Flickr terms",
        "https://github.com/mertyg/vision-language-models-are-bows",
        (
            _karpathy("coco_karpathy_test.json"),
            _images(("coco-val2014", ""), link="val2014"),
            _mieb("mteb/ARO-COCO-order", "53c20afc02a87fed8c0245dde2e00f054da4b861", 2517223830),
        ),
    ),
    BenchmarkSources(
        "aro-flickr-order",
        "ARO Flickr30k-Order (Yuksekgonul et al., ICLR 2023)",
        "MIT (ARO); Flickr30K images by request form",
        "https://github.com/mertyg/vision-language-models-are-bows",
        (
            _karpathy("flickr30k_test.json"),
            _images(("flickr30k", "flickr30k-images"), link="flickr30k-images"),
            _mieb("mteb/ARO-Flickr-Order", "e5d7f3502345b2c398a6645b4d09b44e650287bf", None),
            _images(("flickr30k-test-1k-hub", ""), link="flickr30k-images", name="hub-images", optional=True,
                    note="instead of the form: the 1K test images from a hub copy"),
        ),
    ),
    BenchmarkSources(
        "crepe",
        "CREPE (Ma et al., CVPR 2023)",
        "no licence file in the repository; Visual Genome images CC BY 4.0",
        "https://github.com/RAIVNLab/CREPE",
        (
            Part(
                "annotations",
                "annotations",
                UrlSource(
                    tuple(
                        RemoteFile(github_raw(*_CREPE, f"data/{name}.zip"), f"{name}.zip",
                                   Checksum.parse(f"git:{blob}", GIT_TREE), None, Unpack(name))
                        for name, blob in (
                            ("prod_hard_negatives", "e73068643923319ab8bd38a43404a34221d41b41"),
                            ("syst_hard_negatives", "54eebe3a52eaacd978a08f2a5c1aaa7e53b82b4b"),
                        )
                    ),
                    origin="github.com/RAIVNLab/CREPE",
                    revision=_CREPE[1],
                ),
                license="no licence file in the repository",
            ),
            _images(("visual-genome", "")),
        ),
    ),
    BenchmarkSources(
        "coco-retrieval",
        "COCO Karpathy 5K test retrieval",
        "COCO captions CC BY 4.0; images under the Flickr terms",
        "https://cocodataset.org",
        (
            _karpathy("coco_karpathy_test.json"),
            _images(("coco-val2014", ""), link="val2014"),
            _images(("coco2014-test-5k-hub", ""), link="val2014", name="hub-images", optional=True,
                    note="instead of val2014.zip (6.6 GB): the 5K test images from a hub copy"),
        ),
    ),
    BenchmarkSources(
        "flickr-retrieval",
        "Flickr30K Karpathy 1K test retrieval",
        "Flickr30K: non-commercial research (request form)",
        "https://shannon.cs.illinois.edu/DenotationGraph/",
        (
            _karpathy("flickr30k_test.json"),
            _images(("flickr30k", "flickr30k-images"), link="flickr30k-images"),
            _images(("flickr30k-test-1k-hub", ""), link="flickr30k-images", name="hub-images", optional=True,
                    note="instead of the form: the 1K test images from a hub copy"),
        ),
    ),
)

_ZEROSHOT = BenchmarkSources(
    "zeroshot-classification",
    "Zero-shot classification in the CLIP_benchmark convention (Radford et al. 2021; Cherti et al. 2023)",
    "per dataset (CLIP_benchmark's code and lists: MIT)",
    "https://github.com/LAION-AI/CLIP_benchmark",
    (
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
    ),
    notes="The images are per dataset and large (ImageNet val 6.4 GB); only the class-name list is fetched by "
    "default. Built-in datasets: spotdiff.benchmarks.zeroshot_data.",
)

CATALOG: dict[str, BenchmarkSources] = {b.name: b for b in (*_CATALOG, _ZEROSHOT)}


def benchmark_sources(name: str) -> BenchmarkSources:
    """The declaration of benchmark ``name`` (an alias is accepted)."""
    from spotdiff.benchmarks import canonical_benchmark

    canonical, _ = canonical_benchmark(name)
    try:
        return CATALOG[canonical]
    except KeyError:
        raise ConfigError(f"no data sources declared for benchmark {name!r}; known: {', '.join(CATALOG)}") from None
