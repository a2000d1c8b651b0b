"""Small hub repositories in the real layouts, for :class:`~spotdiff.testing.hub_server.HubServer`.

Each builder returns ``{path in the repository: bytes}``, deterministic for a seed. The layouts:
docs/testing.md.
"""

from __future__ import annotations

import io
import json
import tempfile
import zipfile
from pathlib import Path

import numpy as np
from PIL import Image

_NOUNS = ("dog", "cat", "man", "woman", "horse", "car", "tree", "table", "cup", "ball")
_RELATIONS = ("on", "under", "near", "behind")


def png_bytes(rng: np.random.Generator, size: tuple[int, int] = (40, 32)) -> bytes:
    """A random RGB PNG of ``size`` (width, height)."""
    pixels = rng.integers(0, 256, size=(size[1], size[0], 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels, mode="RGB").save(buf, format="PNG")
    return buf.getvalue()


def _image_struct(rng: np.random.Generator, name: str) -> dict:
    return {"bytes": png_bytes(rng), "path": name}


def _parquet(columns: dict[str, list], row_group_size: int = 2) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.table(columns), buf, row_group_size=row_group_size)
    return buf.getvalue()


def winoground_repo(n: int = 6, seed: int = 0) -> dict[str, bytes]:
    """Winoground's parquet layout; example ``i`` is Object / Relation / Both for ``i % 3`` = 0 / 1 / 2."""
    rng = np.random.default_rng(seed)
    tags = (("Object", "Noun", ""), ("Relation", "Verb", "Symbolic"), ("Both", "Adjective-Color", ""))
    rows: dict[str, list] = {k: [] for k in (
        "id", "image_0", "image_1", "caption_0", "caption_1", "tag", "secondary_tag", "num_main_preds",
        "collapsed_tag")}
    for i in range(n):
        a, b = rng.choice(_NOUNS, size=2, replace=False)
        collapsed, tag, secondary = tags[i % 3]
        rows["id"].append(i)
        rows["image_0"].append(_image_struct(rng, f"ex_{i}_img_0.png"))
        rows["image_1"].append(_image_struct(rng, f"ex_{i}_img_1.png"))
        rows["caption_0"].append(f"the {a} is on the {b}")
        rows["caption_1"].append(f"the {b} is on the {a}")
        rows["tag"].append(tag)
        rows["secondary_tag"].append(secondary)
        rows["num_main_preds"].append(1 + i % 2)
        rows["collapsed_tag"].append(collapsed)
    return {"data/test-00000-of-00001.parquet": _parquet(rows)}


def spec_repo(n: int = 1, seed: int = 0, size: int = 32) -> dict[str, bytes]:
    """``data.zip``: a SPEC dataset from :func:`spotdiff.synth.canvas.spec.write_spec`, under ``data/``.

    Args:
        n: candidate sets per subset.
        seed: the random seed.
        size: the image side in pixels.
    """
    from spotdiff.synth.canvas.spec import write_spec

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "data"
        write_spec(out, n=n, seed=seed, size=size, cls=False)
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            for path in sorted(out.rglob("*")):
                if path.is_file():
                    zf.write(path, path.relative_to(Path(tmp)).as_posix())
    return {"data.zip": buf.getvalue()}


def mteb_order_repo(n: int = 6, seed: int = 0) -> dict[str, bytes]:
    """MTEB's ARO-COCO-order / ARO-Flickr-Order layout; row 0's first hard text equals its true caption."""
    rng = np.random.default_rng(seed)
    rows: dict[str, list] = {k: [] for k in ("images", "correct_caption", *(f"hard_text_{j}" for j in range(1, 5)))}
    for i in range(n):
        a, b = rng.choice(_NOUNS, size=2, replace=False)
        true = f"a {a} on a {b}"
        rows["images"].append(_image_struct(rng, f"{i}.jpg"))
        rows["correct_caption"].append(true)
        hard = [f"a {b} on a {a}", f"on a {a} a {b}", f"a on {a} {b} a", f"{b} a on a {a}"]
        if i == 0:
            hard[0] = true
        for j, text in enumerate(hard, start=1):
            rows[f"hard_text_{j}"].append(text)
    return {"data/test-00000-of-00001.parquet": _parquet(rows)}


def mteb_vg_repo(kind: str = "relation", n: int = 6, seed: int = 0) -> dict[str, bytes]:
    """MTEB's ARO-Visual-Relation (``kind="relation"``) or -Attribution (``"attribution"``) layout.

    Args:
        kind: ``relation`` or ``attribution``.
        n: the number of rows.
        seed: the random seed.
    """
    rng = np.random.default_rng(seed)
    rows: dict[str, list] = {k: [] for k in ("image", "true_caption", "false_caption", "bbox")}
    rows["relation_name" if kind == "relation" else "attributes"] = []
    for i in range(n):
        a, b = rng.choice(_NOUNS, size=2, replace=False)
        rel = _RELATIONS[i % len(_RELATIONS)]
        rows["image"].append(_image_struct(rng, f"{i}.jpg"))
        rows["bbox"].append({"x": 2.0, "y": 3.0, "w": 20.0, "h": 16.0})
        if kind == "relation":
            rows["true_caption"].append(f"the {a} is {rel} the {b}")
            rows["false_caption"].append(f"the {b} is {rel} the {a}")
            rows["relation_name"].append(rel)
        else:
            rows["true_caption"].append(f"the red {a} and the white {b}")
            rows["false_caption"].append(f"the white {a} and the red {b}")
            rows["attributes"].append(["red", "white"])
    return {"data/test-00000-of-00001.parquet": _parquet(rows)}


def jpeg_bytes(rng: np.random.Generator, size: tuple[int, int] = (40, 32)) -> bytes:
    """A random RGB JPEG of ``size`` (width, height)."""
    pixels = rng.integers(0, 256, size=(size[1], size[0], 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels, mode="RGB").save(buf, format="JPEG")
    return buf.getvalue()


#: ColorSwap's test split holds some of the 2,000 examples' ids (its vlm_results list 9, 11, ...): not 0..n-1.
COLORSWAP_TEST_IDS = (9, 11, 18, 23, 30, 42, 57, 61)


def colorswap_repo(n: int = 4, seed: int = 0) -> dict[str, bytes]:
    """ColorSwap's hub parquet layout (``data/test-*.parquet``; the README's fields, images as ``Image``
    structs named ``img_<id>_<k>.png``), with the test split's ids (:data:`COLORSWAP_TEST_IDS`, not
    contiguous) and captions in lower case without a final period, as the authors' vlm_results quote them
    (commit 4f2c9e4); example ``i``'s captions swap two colour words."""
    rng = np.random.default_rng(seed)
    rows: dict[str, list] = {
        k: [] for k in ("id", "caption_1", "caption_2", "image_1", "image_2", "image_source", "caption_source")
    }
    for i in range(n):
        a, b = rng.choice(_NOUNS, size=2, replace=False)
        ex = COLORSWAP_TEST_IDS[i % len(COLORSWAP_TEST_IDS)] + 100 * (i // len(COLORSWAP_TEST_IDS))
        rows["id"].append(ex)
        rows["caption_1"].append(f"a yellow {a} next to a white {b}")
        rows["caption_2"].append(f"a white {a} next to a yellow {b}")
        rows["image_1"].append(_image_struct(rng, f"img_{ex}_1.png"))
        rows["image_2"].append(_image_struct(rng, f"img_{ex}_2.png"))
        rows["image_source"].append("midjourney" if i % 2 else "dalle3")
        rows["caption_source"].append("human")
    return {"data/test-00000-of-00001.parquet": _parquet(rows)}


def bivlc_repo(n: int = 6, seed: int = 0) -> dict[str, bytes]:
    """BiVLC's hub parquet layout (``data/test-*.parquet``: image, caption, negative_image,
    negative_caption, type, subtype; no id column), with the real split's quirks (its README and the
    generation list src/BiVLC_Generation/BiVLC_negative_imgs.csv, commit 84f0d17): JPEG images, the
    generated negatives 512 x 512 (here 48 x 48) beside COCO photos of other sizes, one COCO image and
    caption serving several rows (rows ``2k`` and ``2k + 1`` here), a caption with a trailing space; row
    ``i`` has type replace / swap / add for ``i % 3``."""
    rng = np.random.default_rng(seed)
    rows: dict[str, list] = {
        k: [] for k in ("image", "caption", "negative_image", "negative_caption", "type", "subtype")
    }
    positives = [(jpeg_bytes(rng, (40 + 8 * k, 32)), f"a {_NOUNS[k]} next to a {_NOUNS[k + 1]}") for k in range(n)]
    for i in range(n):
        image, caption = positives[i // 2]
        kind = ("replace", "swap", "add")[i % 3]
        rows["image"].append({"bytes": image, "path": None})
        rows["caption"].append(caption + (" " if i == 1 else ""))
        rows["negative_image"].append({"bytes": jpeg_bytes(rng, (48, 48)), "path": None})
        rows["negative_caption"].append(f"a {_NOUNS[(i // 2) + 1]} next to a {_NOUNS[i // 2]} {i}")
        rows["type"].append(kind)
        rows["subtype"].append({"replace": "obj", "swap": "att", "add": "obj"}[kind])
    return {"data/test-00000-of-00001.parquet": _parquet(rows)}


def naturalbench_repo(
    n: int = 6, seed: int = 0, type_column: str = "Question Type", shards: int = 1
) -> dict[str, bytes]:
    """NaturalBench's hub parquet layout (``data/train-*.parquet``: Index, Image_0, Image_1, Question_0,
    Image_0_Question_0, Image_1_Question_0, Question_1, Image_0_Question_1, Image_1_Question_1, the
    question type, Source); sample ``i`` is yes_no for even ``i``, multiple_choice for odd, with the
    published gold pattern (Yes/A for (q0, i0) and (q1, i1), No/B for the others).

    Args:
        n: samples.
        seed: the random images' seed.
        type_column: ``"Question Type"`` (the card's main revision) or ``"Question_Type"`` (earlier ones).
        shards: the parquet files the rows are split into, in order (the hub's main revision has three,
            ``data/train-0000k-of-00003.parquet``).
    """
    rng = np.random.default_rng(seed)
    names = ("Index", "Image_0", "Image_1", "Question_0", "Image_0_Question_0", "Image_1_Question_0",
             "Question_1", "Image_0_Question_1", "Image_1_Question_1", type_column, "Source")  # fmt: skip
    rows: dict[str, list] = {k: [] for k in names}
    for i in range(n):
        a, b = rng.choice(_NOUNS, size=2, replace=False)
        mc = i % 2 == 1
        first, second = ("A", "B") if mc else ("Yes", "No")
        rows["Index"].append(i)
        rows["Image_0"].append(_image_struct(rng, f"{i}_0.jpg"))
        rows["Image_1"].append(_image_struct(rng, f"{i}_1.jpg"))
        if mc:
            rows["Question_0"].append(f"What is shown? Option: A: a {a}; B: a {b};")
            rows["Question_1"].append(f"What is shown? Option: A: a {b}; B: a {a};")
        else:
            rows["Question_0"].append(f"Is there a {a}?")
            rows["Question_1"].append(f"Is there a {b}?")
        for column, gold in (("Image_0_Question_0", first), ("Image_1_Question_0", second),
                             ("Image_0_Question_1", second), ("Image_1_Question_1", first)):  # fmt: skip
            rows[column].append(gold)
        rows[type_column].append("multiple_choice" if mc else "yes_no")
        rows["Source"].append(("Flickr30K", "DOCCI")[i % 2])
    bounds = [n * k // shards for k in range(shards + 1)]
    parts = [{c: v[bounds[k] : bounds[k + 1]] for c, v in rows.items()} for k in range(shards)]
    return {f"data/train-{k:05d}-of-{shards:05d}.parquet": _parquet(part) for k, part in enumerate(parts)}


def naturalbench_retrieval_repo(n: int = 4, seed: int = 0) -> dict[str, bytes]:
    """``NaturalBench-Retrieval.zip`` as the hub dataset ``BaiqiL/NaturalBench`` publishes it (read by
    naturalbench_retrieval.py and t2v_metrics' ``NaturalBench_Retrieval``): one top folder
    ``NaturalBench-Retrieval/`` holding ``metadata.json`` (a list of ``{"index": k, "image_0", "image_1",
    "caption_0", "caption_1"}``, ``index`` the position, as t2v_metrics asserts) and ``images/``; JPEG
    images; sample ``i``'s captions swap two nouns.

    Args:
        n: samples.
        seed: the random images' seed.
    """
    rng = np.random.default_rng(seed)
    buf = io.BytesIO()
    metadata = []
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for i in range(n):
            a, b = rng.choice(_NOUNS, size=2, replace=False)
            names = [f"{i}_{k}.jpg" for k in (0, 1)]
            for name in names:
                image = Image.fromarray(rng.integers(0, 256, size=(32, 40, 3), dtype=np.uint8), mode="RGB")
                data = io.BytesIO()
                image.save(data, format="JPEG")
                zf.writestr(f"NaturalBench-Retrieval/images/{name}", data.getvalue())
            captions = {"caption_0": f"a {a} to the left of a {b}", "caption_1": f"a {b} to the left of a {a}"}
            metadata.append({"index": i, "image_0": names[0], "image_1": names[1], **captions})
        zf.writestr("NaturalBench-Retrieval/metadata.json", json.dumps(metadata, indent=4))
    return {"NaturalBench-Retrieval.zip": buf.getvalue()}


def unpack_repo(files: dict[str, bytes], root: str | Path) -> Path:
    """A repository's ``files`` written in ``root``, its archives unzipped there (as ``spotdiff data fetch``
    leaves them, and as Vinoground's README says: ``unzip vinoground_videos.zip``).

    Args:
        files: the repository's files by path, as :func:`vinoground_repo` gives them.
        root: the folder (made when missing).
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        if name.endswith(".zip"):
            zipfile.ZipFile(io.BytesIO(data)).extractall(root)
        else:
            (root / name).write_bytes(data)
    return root


def _zip(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _clip(colours: list[tuple[int, int, int]], rate: int) -> bytes:
    """An H.264 video (:func:`spotdiff.testing.videos.encode_numbered`) of one frame per colour."""
    from spotdiff.testing.videos import SIDE, encode_numbered

    with tempfile.TemporaryDirectory() as tmp:
        path = encode_numbered(
            Path(tmp) / "v.mp4", len(colours), rate, lambda k: np.full((SIDE, SIDE, 3), colours[k], np.uint8)
        )
        return path.read_bytes()


#: Vinoground's two prompts, as the authors' vinoground_textscore.json and vinoground_videoscore.json word them
#: (lmms-eval's vinoground doc_to_text, commit a72a9c0e, builds the same text from the CSV).
VINOGROUND_TEXT = (
    "Which caption best describes this video?\nA. {a}\nB. {b}\nAnswer with the option's letter from the given "
    "choices directly. Please only output 1 English character."
)
VINOGROUND_VIDEO = (
    "Which video segment matches this caption? Note: The video contains two segments separated by a 2-second "
    "black frame.\nCaption: {caption}\nA. The first fragment (before black frame)\nB. The second fragment (after "
    "black frame)\nAnswer with the option's letter from the given choices directly. Please only output 1 English "
    "character."
)


def vinoground_repo(n: int = 4, seed: int = 0, frames: int = 8, rate: int = 4) -> dict[str, bytes]:
    """The gated hub dataset HanSolo9682/Vinoground: ``vinoground.csv``, the authors' prompts
    (``vinoground_textscore.json``, ``vinoground_videoscore.json``: ``{"idx": "<i>_pos", "video_name", "question",
    "GT"}`` per question) and ``vinoground_videos.zip`` / ``vinoground_videos_concated.zip`` (one top folder each).

    Pair ``i``'s videos are ``frames`` frames at ``rate`` per second, each of one colour per video, every frame
    showing its number (:func:`spotdiff.testing.videos.encode_numbered`); its concatenated videos are ``<i>.mp4``
    (pos, 2 s of black, neg) and ``<i>_reverse.mp4`` (neg first). The real files' quirks: an empty ``minor``
    and two minors joined by ``;``; captions holding a comma (quoted by the CSV); the text questions list the
    captions pos first for even ``i`` and neg first for odd ``i`` (``GT`` follows), and the video questions use
    the concatenation whose first segment is the caption's for even ``i``, the reverse for odd ``i``.

    Args:
        n: pairs.
        seed: the colours' seed.
        frames: frames per video.
        rate: frames per second.
    """
    import csv

    rng = np.random.default_rng(seed)
    rows, text_items, video_items = [], [], []
    videos, concat = {}, {}
    for i in range(n):
        a, b = rng.choice(_NOUNS, size=2, replace=False)
        pos, neg = f"a {a} runs, then a {b} jumps", f"a {b} jumps, then a {a} runs"
        minor = ("", "interaction;cyclical", "spatial")[i % 3]
        major = ("action", "object", "viewpoint")[i % 3]
        rows.append([i, major, minor, f"vid{i}a", 5, 15, pos, f"vid{i}b", 10, 20, neg])
        colours = [tuple(int(c) for c in rng.integers(0, 256, 3)) for _ in range(2)]
        clips = {role: [colours[k]] * frames for k, role in enumerate(("pos", "neg"))}
        for role in ("pos", "neg"):
            videos[f"vinoground_videos/{i}_{role}.mp4"] = _clip(clips[role], rate)
        black = [(0, 0, 0)] * (2 * rate)
        concat[f"vinoground_videos_concated/{i}.mp4"] = _clip(clips["pos"] + black + clips["neg"], rate)
        concat[f"vinoground_videos_concated/{i}_reverse.mp4"] = _clip(clips["neg"] + black + clips["pos"], rate)
        options = (pos, neg) if i % 2 == 0 else (neg, pos)
        for role, caption in (("pos", pos), ("neg", neg)):
            question = VINOGROUND_TEXT.format(a=options[0], b=options[1])
            gt = "AB"[options.index(caption)]
            text_items.append({"idx": f"{i}_{role}", "video_name": f"vinoground_videos/{i}_{role}.mp4",
                               "question": question, "GT": gt})  # fmt: skip
            first = role if i % 2 == 0 else ("neg" if role == "pos" else "pos")
            name = f"{i}.mp4" if first == "pos" else f"{i}_reverse.mp4"
            video_items.append({"idx": f"{i}_{role}", "video_name": f"vinoground_videos_concated/{name}",
                                "question": VINOGROUND_VIDEO.format(caption=caption),
                                "GT": "A" if first == role else "B"})  # fmt: skip
    table = io.StringIO()
    writer = csv.writer(table)
    writer.writerow(["index", "major", "minor", "pos_vid", "pos_start", "pos_end", "pos_cap", "neg_vid", "neg_start",
                     "neg_end", "neg_cap"])  # fmt: skip
    writer.writerows(rows)
    return {
        "vinoground.csv": table.getvalue().encode(),
        "vinoground_textscore.json": json.dumps(text_items, indent=4).encode(),
        "vinoground_videoscore.json": json.dumps(video_items, indent=4).encode(),
        "vinoground_videos.zip": _zip(videos),
        "vinoground_videos_concated.zip": _zip(concat),
    }
