"""VQAScore: spotdiff's prefix reuse against t2v_metrics' own per-pair loop, per image token count.

Three sides score the same cases with the same chat VLM files (a tiny random Qwen2-VL from
``spotdiff.testing.tiny_vlms``, loaded by path as a user's checkpoint loads), the same question
(spotdiff's default ``Does this figure show "{}"? Please answer yes or no.``, the wording of t2v_metrics'
CLIP-FlanT5 model until v3.1 removed it; the peer gets it through its ``question_template`` argument, as
its users can, its Qwen2-VL default capitalising "Yes or No") and the answer "Yes":

* **t2v_metrics loop** (the peer a user would run instead): a faithful copy of t2v_metrics at commit
  6ecb74f92028f42c7e64546d3a71e98c8c73068f (github.com/linzhiqiu/t2v_metrics): ``Score.batch_forward``
  and ``Score.forward`` (``t2v_metrics/score.py``: a ``DataLoader`` over ``{"images", "texts"}``
  samples, then for every image x text slot one ``forward`` per sample, one image and one text) and
  ``Qwen2VLModel.forward`` (``t2v_metrics/models/vqascore_models/qwen2vl_model.py``: per pair, open the
  image file, ``apply_chat_template``, qwen-vl-utils' ``process_vision_info`` resize, the processor
  with ``do_resize=False``, ``model.generate(max_new_tokens=1, output_scores=True)``, and
  softmax(scores)["Yes"]). Every (image, text) pair is one sequence: the vision tower and the whole
  prompt run once per pair. Adapted to a tiny model only where it must be: the resize factor is the
  tiny model's patch size x 2 (qwen-vl-utils' ``image_patch_size`` argument; 14 for the real models),
  the model is loaded in spotdiff's dtype on the same device (t2v_metrics: bfloat16,
  ``device_map="auto"``), the processor from the model folder (t2v_metrics: from the hub name), and
  the tqdm bar and debug prints are left out.
* **spotdiff no-reuse**: ``vqa:PATH?reuse=no``, each pair one whole sequence, ``--batch-size`` pairs
  per forward pass.
* **spotdiff reuse**: ``vqa:PATH`` (the default), the image and the prompt's common prefix encoded
  once per unique image (KV cache) and that image's texts batched against it
  (``spotdiff.scorers.chat``).

Rows: image token counts (the processor's pixel bounds set so that each square image gives 16 or
144 merged image tokens) x shapes: 2 x 2 cases (Winoground / EqBen: 2 texts per image) and 9 x 9
(SPEC: 9 texts per image). Timing: the three sides run back to back in each round, the order rotating
round by round, with torch pinned to ``--threads`` on every side (CPU default 1); the seconds are each side's median
over the rounds and each speed-up is the median of the per-round ratios. ``max |dlog|``: the largest
|difference of log VQAScore| of the peer and of no-reuse against reuse. The load average is printed at
start and end. Usage: ``python measurements/vqa_prefix_speed.py [--quick]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from spotdiff.cases import Case, PILImage
from spotdiff.diagnose.engine import Engine
from spotdiff.processes import thread_budget
from spotdiff.scorers import ScorerOptions, load_scorer
from spotdiff.scorers.vqa import DEFAULT_ANSWER, DEFAULT_QUESTION
from spotdiff.testing.tiny_models import tiny_images
from spotdiff.testing.tiny_vlms import make_tiny_vlm

NOUNS = "cat dog cup bowl horse car tree chair table ball".split()
WHERE = "left of|right of|above|below|next to|behind|in front of|on top of|under".split("|")
SIDES = ("t2v_metrics", "no-reuse", "reuse")


def cases(k: int, n: int, size: int, seed: int = 0) -> list[Case]:
    """``n`` K x K cases with distinct ``size`` x ``size`` images and distinct texts (permutation truth)."""
    images = tiny_images(k * n, size=size, seed=seed)
    out = []
    for c in range(n):
        refs = tuple(PILImage(images[c * k + i], name=f"c{c}i{i}") for i in range(k))
        texts = tuple(
            f"the {NOUNS[(c + i) % 10]} is {WHERE[i % 9]} the {NOUNS[(c + 2 * i + 1) % 10]} ({c})" for i in range(k)
        )
        out.append(Case(f"c{c}", texts, np.eye(k, dtype=bool), refs, {"subset": f"{k}x{k}"}))
    return out


def t2v_dataset(batch: list[Case], folder: Path) -> list[dict]:
    """The cases as t2v_metrics' ``batch_forward`` takes them: ``{"images": [paths], "texts": [...]}``
    per case, the images saved as PNG files (t2v_metrics opens image files by path)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for case in batch:
        paths = []
        for ref in case.images:
            path = folder / f"{case.id}-{ref.name}.png"
            ref.image.save(path)
            paths.append(str(path))
        out.append({"images": paths, "texts": list(case.texts)})
    return out


def tiny_qwen2_vl(folder: Path, image_tokens: int) -> tuple[Path, int]:
    """A tiny random Qwen2-VL saved in ``folder`` whose processor keeps a square image of the returned
    side (pixels) as it is, giving ``image_tokens`` merged image tokens."""
    from transformers import AutoProcessor

    path = make_tiny_vlm("qwen2_vl", folder)
    processor = AutoProcessor.from_pretrained(path)
    image = processor.image_processor
    factor = image.patch_size * image.merge_size
    side = factor * round(image_tokens**0.5)
    if (side // factor) ** 2 != image_tokens:
        raise ValueError(f"{image_tokens} image tokens is not a square number")
    image.size = {"shortest_edge": side * side, "longest_edge": side * side}
    processor.save_pretrained(path)
    probe = AutoProcessor.from_pretrained(path)(text=["<|image_pad|>"], images=tiny_images(1, size=side))
    got = int(probe["image_grid_thw"].prod()) // image.merge_size**2
    if got != image_tokens:
        raise RuntimeError(f"the processor gives {got} image tokens, not {image_tokens}")
    return path, side


class T2VQwen2VL:
    """t2v_metrics' ``Qwen2VLModel`` (image inputs), loading the tiny model's folder: see the module docstring."""

    def __init__(self, path: Path, device: str, dtype) -> None:
        from transformers import AutoProcessor, Qwen2VLForConditionalGeneration

        self.model = Qwen2VLForConditionalGeneration.from_pretrained(path, dtype=dtype, attn_implementation="sdpa")
        self.model.to(device).eval()
        self.processor = AutoProcessor.from_pretrained(path)
        self.device = next(self.model.parameters()).device
        self.patch_size = self.processor.image_processor.patch_size  # qwen-vl-utils' image_patch_size

    def load_images(self, paths: list[str]) -> list[dict]:
        from PIL import Image

        return [{"type": "image", "image": Image.open(path).convert("RGB")} for path in paths]

    def process_vision_info(self, messages: list[dict]) -> list:
        """qwen-vl-utils' ``process_vision_info`` / ``fetch_image`` for images: RGB, then resized to
        multiples of ``image_patch_size * 2`` within its default pixel bounds (4 to 16384 tokens)."""
        from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

        factor = self.patch_size * 2
        images = []
        for ele in messages[0]["content"]:
            if ele["type"] == "image":
                image = ele["image"].convert("RGB")
                width, height = image.size
                h, w = smart_resize(height, width, factor, 4 * factor**2, 16384 * factor**2)
                images.append(image.resize((w, h)))
        return images

    def forward(self, images: list[str], texts: list[str], question_template: str, answer_template: str = "Yes"):
        """``Qwen2VLModel.forward``: P(answer) of each (image, text) pair, one ``generate`` call per pair."""
        import torch

        assert len(images) == len(texts), "Number of images/videos and texts must match"
        questions = [question_template.format(text) for text in texts]
        answers = [answer_template.format(text) for text in texts]
        lm_probs = []
        tokenizer = self.processor.tokenizer
        for data, question, answer in zip(self.load_images(images), questions, answers, strict=True):
            messages = [{"role": "user", "content": [data, {"type": "text", "text": question}]}]
            text = self.processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            image_inputs = self.process_vision_info(messages)
            inputs = self.processor(
                text=[text], images=image_inputs, videos=None, padding=True, return_tensors="pt", do_resize=False
            ).to(self.device)
            answer_token_ids = tokenizer.encode(answer, add_special_tokens=False)
            n_answer_tokens = len(answer_token_ids)
            with torch.inference_mode():
                outputs = self.model.generate(
                    **inputs, max_new_tokens=1, temperature=1.0, do_sample=False, output_scores=True,
                    return_dict_in_generate=True,
                )  # fmt: skip
            generated_ids = outputs.sequences[0][inputs.input_ids.shape[1] :]
            offset = 0
            if generated_ids[-1].item() in (tokenizer.eos_token_id, tokenizer.bos_token_id, tokenizer.pad_token_id):
                n_answer_tokens = min(n_answer_tokens, len(outputs.scores) - 1)
                offset = 1
                if n_answer_tokens <= 0:
                    raise ValueError("No content tokens to score after removing special tokens")
            if len(outputs.scores) < n_answer_tokens:
                n_answer_tokens = len(outputs.scores)
                answer_token_ids = answer_token_ids[:n_answer_tokens]
            joint_prob = 1.0
            for i in range(n_answer_tokens):
                token_logits = outputs.scores[-(n_answer_tokens - i + offset)][0]
                joint_prob *= torch.nn.functional.softmax(token_logits / 1.0, dim=-1)[answer_token_ids[i]].item()
            lm_probs.append(joint_prob ** (1.0 / n_answer_tokens))
        return torch.tensor(lm_probs)


def t2v_batch_forward(model: T2VQwen2VL, dataset: list[dict], batch_size: int, **kwargs):
    """t2v_metrics' ``Score.batch_forward`` and ``Score.forward`` (images): ``[samples, images, texts]``."""
    import torch
    from torch.utils.data import DataLoader

    def score_forward(images: list[str], texts: list[str]):
        scores = torch.zeros(len(images), len(texts))
        for i, image in enumerate(images):
            scores[i] = model.forward([image] * len(texts), texts, **kwargs)
        return scores

    num_visuals, num_texts = len(dataset[0]["images"]), len(dataset[0]["texts"])
    scores = torch.zeros(len(dataset), num_visuals, num_texts)
    counter = 0
    for batch in DataLoader(dataset, batch_size=batch_size, shuffle=False):
        cur_batch_size = len(batch["images"][0])
        for vis_idx in range(num_visuals):
            visuals = batch["images"][vis_idx]
            for text_idx in range(num_texts):
                texts = batch["texts"][text_idx]
                scores[counter : counter + cur_batch_size, vis_idx, text_idx] = torch.squeeze(
                    torch.cat([score_forward([visual], [text]) for visual, text in zip(visuals, texts, strict=True)])
                )
        counter += cur_batch_size
    return scores


def one_row(sides: dict, batch: list[Case], dataset: list[dict], args: argparse.Namespace) -> dict:
    """Time the three sides on one shape (see the module docstring); their times, ratios and agreement."""
    seconds: dict[str, list[float]] = {side: [] for side in SIDES}
    logs: dict[str, np.ndarray] = {}
    for r in range(args.rounds):
        for side in SIDES[r % 3 :] + SIDES[: r % 3]:
            start = time.perf_counter()
            if side == "t2v_metrics":
                got = t2v_batch_forward(sides[side], dataset, args.batch_size, question_template=DEFAULT_QUESTION,
                                        answer_template=DEFAULT_ANSWER).numpy()  # fmt: skip
            else:
                with Engine(sides[side], progress=False, threads=args.threads) as engine:
                    got = np.stack(list(engine.case_matrices(batch, "image-text")))
            seconds[side].append(time.perf_counter() - start)
            logs[side] = np.log(got.astype(np.float64))
    ratio = {
        other: statistics.median(a / b for a, b in zip(seconds[other], seconds["reuse"], strict=True))
        for other in ("t2v_metrics", "no-reuse")
    }
    dlog = max(float(np.abs(logs[other] - logs["reuse"]).max()) for other in ("t2v_metrics", "no-reuse"))
    return {"median": {s: statistics.median(v) for s, v in seconds.items()}, "ratio": ratio, "dlog": dlog}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=None, help="rounds, each running the three sides (5; quick 3)")
    parser.add_argument("--batch-size", type=int, default=16, help="spotdiff: rows per forward; t2v_metrics: samples")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch threads, every side (CPU: 1, else the budget)")
    parser.add_argument("--image-tokens", type=int, nargs="+", default=[16, 144])
    parser.add_argument("--cases", type=int, nargs=2, metavar=("N2", "N9"), help="2x2, 9x9 cases (100 4; quick 10 1)")
    parser.add_argument("--quick", action="store_true", help="fewer cases and rounds")
    args = parser.parse_args()
    if args.threads is None:  # one CPU thread: on a shared machine a second one made the ratios swing tenfold
        args.threads = 1 if args.device == "cpu" else thread_budget(device=args.device).threads
    if args.rounds is None:
        args.rounds = 3 if args.quick else 5
    import torch

    torch.set_num_threads(args.threads)
    print(f"load average at start: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"device {args.device}, {args.threads} torch thread(s), {args.rounds} rounds, batch size {args.batch_size}")
    n2, n9 = args.cases or ((10, 1) if args.quick else (100, 4))
    shapes = {"2 x 2": (2, n2), "9 x 9": (9, n9)}
    head = ("model", "image tokens", "cases", "pairs", "t2v_metrics loop (s)", "spotdiff no-reuse (s)",
            "spotdiff reuse (s)", "speed-up over t2v_metrics", "speed-up over no-reuse", "max |dlog|")  # fmt: skip
    print(" | ".join(head))
    with tempfile.TemporaryDirectory() as tmp:
        for tokens in args.image_tokens:
            path, side = tiny_qwen2_vl(Path(tmp) / f"qwen2_vl-{tokens}", tokens)
            options = ScorerOptions(device=args.device, batch_size=args.batch_size)
            reuse = load_scorer(f"vqa:{path}", options)
            sides = {
                "t2v_metrics": T2VQwen2VL(path, args.device, reuse.chat.dtype),
                "no-reuse": load_scorer(f"vqa:{path}?reuse=no", options),
                "reuse": reuse,
            }
            for name, (k, n) in shapes.items():
                batch = cases(k, n, side)
                row = one_row(sides, batch, t2v_dataset(batch, Path(tmp) / f"images-{tokens}-{k}"), args)
                m, ratio = row["median"], row["ratio"]
                print(
                    f"qwen2_vl | {tokens} | {n} of {name} | {n * k * k} | {m['t2v_metrics']:.3f} | "
                    f"{m['no-reuse']:.3f} | {m['reuse']:.3f} | {ratio['t2v_metrics']:.2f}x | "
                    f"{ratio['no-reuse']:.2f}x | {row['dlog']:.1e}",
                    flush=True,
                )
    print(f"load average at end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
