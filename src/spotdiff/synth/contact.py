"""Contact sheets: ``spotdiff synth contact-sheet DIR --out sheet.png``, so a person can look.

Recognises what the engines write: SPEC subset folders (one row per case, every candidate with its
caption), EqBen ``all_select.json`` (a row of pairs per subset), VISLA ``Spatial_VISLA.tsv`` (image
with P1 / P2 / N) and corpora (``captions.jsonl``). A SPEC dataset's ``cls/`` folder gets a row too.
"""

from __future__ import annotations

import csv
import io
import json
import textwrap
from pathlib import Path

from PIL import Image, ImageDraw

from spotdiff.errors import DataError
from spotdiff.jsonio import iter_jsonl
from spotdiff.synth.canvas.objects import font

BG = (255, 255, 255)
INK = (20, 20, 20)
HEAD = (40, 70, 140)
SPEC_SUBSETS = ("absolute_size", "relative_size", "absolute_spatial", "relative_spatial", "existence", "count")


class _Sheet:
    """Rows of (title, [(image path, caption), ...]) laid out as thumbnails with wrapped captions."""

    def __init__(self, thumb: int) -> None:
        self.thumb = thumb
        self.font = font(max(9, thumb // 11))
        self.head = font(max(11, thumb // 8))
        self.rows: list[tuple[str, list[tuple[Path | None, str]]]] = []

    def add(self, title: str, cells: list[tuple[Path | None, str]]) -> None:
        self.rows.append((title, cells))

    def _wrap(self, text: str) -> list[str]:
        chars = max(8, int(self.thumb / (self.font.size * 0.52)))
        return textwrap.wrap(text, chars)[:5]

    def render(self) -> Image.Image:
        if not self.rows:
            raise DataError("nothing to show: no images found")
        t, pad = self.thumb, 6
        line_h = self.font.size + 2
        head_h = self.head.size + 8
        heights, width = [], 0
        for _title, cells in self.rows:
            text_h = max((len(self._wrap(c)) for _, c in cells), default=0) * line_h
            heights.append(head_h + t + text_h + 2 * pad)
            width = max(width, len(cells) * (t + pad) + pad)
        sheet = Image.new("RGB", (width, sum(heights)), BG)
        d = ImageDraw.Draw(sheet)
        y = 0
        for (title, cells), h in zip(self.rows, heights, strict=True):
            d.text((pad, y + 3), title, fill=HEAD, font=self.head)
            for k, (path, cap) in enumerate(cells):
                x = pad + k * (t + pad)
                if path is not None:
                    try:
                        with Image.open(path) as im:
                            tile = im.convert("RGB")
                    except OSError:
                        tile = Image.new("RGB", (t, t), (230, 200, 200))
                    tile.thumbnail((t, t), Image.Resampling.LANCZOS)
                    sheet.paste(tile, (x, y + head_h))
                ty = y + head_h + t + 3
                for line in self._wrap(cap):
                    d.text((x, ty), line, fill=INK, font=self.font)
                    ty += line_h
            d.line([(0, y + h - 1), (width, y + h - 1)], fill=(210, 210, 210))
            y += h
        return sheet


def contact_sheet(root: str | Path, out: str | Path, *, per_subset: int = 2, thumb: int = 128) -> Path:
    """Write a contact sheet of the dataset under ``root`` to ``out``; return ``out``.

    Args:
        root: the synthesized dataset.
        out: the image to write.
        per_subset: cases shown per subset.
        thumb: the thumbnail side in pixels.
    """
    root = Path(root)
    if not root.exists():
        raise DataError(f"dataset folder does not exist: {root}")
    sheet = _Sheet(thumb)
    found = False
    for subset in SPEC_SUBSETS:
        meta = root / subset / "metadata.json"
        if meta.is_file():
            found = True
            cases = json.loads(meta.read_text(encoding="utf-8"))["cases"]
            for case in cases[:per_subset]:
                cells = [(root / subset / p, t) for p, t in zip(case["images"], case["texts"], strict=True)]
                sheet.add(f"{subset}  {case['id']}  ({case['scene']})", cells)
    cls = root / "cls" / "classification.json"
    if cls.is_file():
        items = json.loads(cls.read_text(encoding="utf-8"))["items"][: 3 * per_subset + 3]
        sheet.add("cls", [(root / "cls" / it["image"], it["label"]) for it in items])
    ann = root / "all_select.json"
    if ann.is_file():
        found = True
        records = json.loads(ann.read_text(encoding="utf-8"))
        images = root / "images" if (root / "images").is_dir() else root
        by_subset: dict[str, list[dict]] = {}
        for r in records:
            by_subset.setdefault(r["image0"].split("/")[0], []).append(r)
        for subset, recs in by_subset.items():
            cells = []
            for r in recs[: 2 * per_subset]:
                cells += [(images / r["image0"], "0: " + r["caption0"]), (images / r["image1"], "1: " + r["caption1"])]
            sheet.add(subset, cells)
    tsv = root / "Spatial_VISLA.tsv"
    if tsv.is_file():
        found = True
        rows = list(
            csv.reader(io.StringIO(tsv.read_text(encoding="utf-8"), newline=""), delimiter="\t", quoting=csv.QUOTE_NONE)
        )[1:]
        cells = []
        for row in rows[: 3 * per_subset]:
            path = root / "images" / row[0]
            cells.append((path if path.is_file() else None, f"P1: {row[1]} P2: {row[2]} N: {row[3]}"))
        sheet.thumb = max(sheet.thumb, 150)
        sheet.add("visla-spatial (P1, P2, N)", cells)
    caps = root / "captions.jsonl"
    if caps.is_file():
        found = True
        rows = [row for _, row in iter_jsonl(caps)]
        per_row = 6
        for start in range(0, min(len(rows), 3 * per_row), per_row):
            sheet.add(
                "corpus" if start == 0 else "",
                [(root / r["image"], r["caption"]) for r in rows[start : start + per_row]],
            )
    if not found:
        raise DataError(
            f"{root} holds no synthesized dataset (SPEC subset folders, all_select.json, Spatial_VISLA.tsv "
            "or captions.jsonl)"
        )
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    sheet.render().save(out, format="PNG")
    return out
