"""VQAScore: spotdiff's prefix reuse against t2v_metrics' own per-pair loop, per image token count.

Three sides score the same cases with the same loaded chat VLM (``--model``: ``tiny``, a tiny random
Qwen2-VL from ``spotdiff.testing.tiny_vlms`` per image token count; ``tiny-llava``, a tiny random LLaVA;
``qwen2-vl-2b`` and ``llava-1.5-7b``, random weights of the published sizes built on ``--device`` in bf16 by
``sized_models.py``, saved and loaded back; every one loaded by path as a user's checkpoint loads), the same
question (spotdiff's default ``Does this figure show "{}"? Please answer yes or no.``, the wording of
t2v_metrics' CLIP-FlanT5 and LLaVA-1.5 models until v3.1 removed them; the peer gets it through its
``question_template`` argument, as its users can, its Qwen2-VL default capitalising "Yes or No") and the
answer "Yes":

* **t2v_metrics loop** (the peer a user would run instead): a faithful copy of t2v_metrics
  (github.com/linzhiqiu/t2v_metrics): ``Score.batch_forward`` and ``Score.forward`` (``t2v_metrics/score.py``
  at 6ecb74f92028f42c7e64546d3a71e98c8c73068f: a ``DataLoader`` over ``{"images", "texts"}`` samples, then
  for every image x text slot one ``forward`` per sample, one image and one text), and per model:

  - Qwen2-VL: ``Qwen2VLModel.forward`` (``t2v_metrics/models/vqascore_models/qwen2vl_model.py`` at the same
    commit: per pair, open the image file, ``apply_chat_template``, qwen-vl-utils' ``process_vision_info``
    resize, the processor with ``do_resize=False``, ``model.generate(max_new_tokens=1, output_scores=True)``,
    and softmax(scores)["Yes"]). The resize factor is the model's patch size x 2 (qwen-vl-utils'
    ``image_patch_size`` argument; 14 for the real models).
  - LLaVA-1.5: ``LLaVAModel.forward`` (``llava_model.py`` at 10d549b369861aab49e7dbe9f33a469a17ef1129, the
    last commit before v3.1 removed it): per pair, t2v_metrics' system message, ``USER: <image>\n`` question
    `` ASSISTANT: `` and the answer "Yes</s>" as one sequence (``tokenizer_image_token``), the image padded
    square and preprocessed, one forward pass with logits at every position, and exp(-mean cross-entropy)
    of the answer tokens (P("Yes") and P(end | "Yes"), geometric mean: not the quantity spotdiff scores, so
    its |dlog| is not an agreement check). Transcribed from its own ``LlavaLlamaForCausalLM`` onto Hugging
    Face's ``LlavaForConditionalGeneration``: the image's 576 tokens are written into the input ids where
    the original spliced them in ``prepare_inputs_labels_for_multimodal``, and "</s>" (Llama-2's end of
    sequence) is the tokenizer's own end of sequence.

  The model is the one spotdiff loaded (t2v_metrics: its own copy in bfloat16, ``device_map="auto"``; the
  same weights on the same device), the tqdm bar and debug prints are left out.
* **spotdiff no-reuse**: ``vqa:PATH?reuse=no`` (the spec option set on the loaded scorer: the same weights),
  each pair one whole sequence, ``--batch-size`` pairs per forward pass.
* **spotdiff reuse**: ``vqa:PATH`` (the default), the image and the prompt's common prefix encoded
  once per unique image (KV cache) and that image's texts batched against it
  (``spotdiff.scorers.chat``).

Rows: image token counts (Qwen2-VL: the processor's pixel bounds set so that each square image gives
``--image-tokens`` merged image tokens; LLaVA: its own, 576 at 336 pixels) x shapes: 2 x 2 cases (Winoground /
EqBen: 2 texts per image) and 9 x 9 (SPEC: 9 texts per image). Timing: the three sides run back to back in
each round, the order rotating round by round, with torch pinned to ``--threads`` on every side (CPU default
1); the seconds are each side's median over the rounds and each speed-up is the median of the per-round
ratios. ``max |dlog|``: the largest |difference of log VQAScore| of the peer (not LLaVA's) and of no-reuse
against reuse.
A sized model prints the seconds it took to build, save and load. ``--json FILE``: the rows of
``measurements/rows.py`` (on CUDA, each shape's reuse side profiled once more for what bounds it). The load
average is printed at start and end. Usage: ``python measurements/vqa_prefix_speed.py [--quick]``; on a GPU:
``--model qwen2-vl-2b --device cuda --tokenizer DIR``.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

import rows
from sized_models import build_vlm, free_device
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
MODELS = ("tiny", "tiny-llava", "qwen2-vl-2b", "llava-1.5-7b")
LLAVA = ("tiny-llava", "llava-1.5-7b")


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


def qwen2_vl_image_tokens(path: Path, image_tokens: int) -> int:
    """Set the pixel bounds of the Qwen2-VL processor saved in ``path`` so that a square image of the returned
    side (pixels) is kept as it is, giving ``image_tokens`` merged image tokens."""
    from transformers import AutoProcessor

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
    return side


def llava_image_tokens(path: Path) -> tuple[int, int]:
    """The image tokens and the image side (pixels) of the LLaVA processor saved in ``path``."""
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(path)
    side = processor.image_processor.crop_size["height"]
    return (side // processor.patch_size) ** 2, side


def checkpoints(args: argparse.Namespace, tmp: Path) -> Iterator[tuple[int, Path, int, dict]]:
    """Per image token count: the model folder, the square image side that gives it, and the seconds the
    model took to build and save (none for the tiny models). A sized model is built once, its processor
    set again for each token count."""
    if args.model == "tiny":
        for tokens in args.image_tokens:
            path = make_tiny_vlm("qwen2_vl", tmp / f"qwen2_vl-{tokens}")
            yield tokens, path, qwen2_vl_image_tokens(path, tokens), {}
        return
    if args.model == "tiny-llava":
        path, timings = make_tiny_vlm("llava", tmp / "llava"), {}
    else:
        path = tmp / args.model
        timings = build_vlm(args.model, path, args.device, args.tokenizer)
    if args.model in LLAVA:
        tokens, side = llava_image_tokens(path)
        yield tokens, path, side, timings
        return
    for tokens in args.image_tokens:
        yield tokens, path, qwen2_vl_image_tokens(path, tokens), timings


class T2VQwen2VL:
    """t2v_metrics' ``Qwen2VLModel`` (image inputs) on the model spotdiff loaded: see the module docstring."""

    def __init__(self, model, processor) -> None:
        self.model, self.processor = model, processor
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


class T2VLLaVA:
    """t2v_metrics' ``LLaVAModel`` (llava-v1.5-7b: conversation ``chat``, ``image_aspect_ratio`` ``pad``) on the
    Hugging Face ``LlavaForConditionalGeneration`` spotdiff loaded: see the module docstring."""

    #: t2v_metrics' ``constants.SYSTEM_MSG`` (LLaVA's vicuna_v1 system turn).
    SYSTEM_MSG = (
        "A chat between a curious user and an artificial intelligence assistant. "
        "The assistant gives helpful, detailed, and polite answers to the user's questions."
    )

    def __init__(self, model, processor) -> None:
        self.model, self.processor = model, processor
        self.tokenizer, self.image_processor = processor.tokenizer, processor.image_processor
        self.device = next(self.model.parameters()).device
        self.image_token_id = model.config.image_token_index
        self.n_image_tokens = (self.image_processor.crop_size["height"] // processor.patch_size) ** 2
        # t2v_metrics: ``self.tokenizer.pad_token = self.tokenizer.unk_token``
        self.pad_token_id = self.tokenizer.unk_token_id

    def load_images(self, paths: list[str]):
        """``LLaVAModel.load_images``: RGB, padded square in the processor's mean colour (``expand2square``),
        the image processor, stacked on the device."""
        import torch
        from PIL import Image

        images = []
        for path in paths:
            image = Image.open(path).convert("RGB")
            width, height = image.size
            if width != height:
                fill = tuple(int(x * 255) for x in self.image_processor.image_mean)
                square = Image.new(image.mode, (max(width, height),) * 2, fill)
                square.paste(image, ((max(width, height) - width) // 2, (max(width, height) - height) // 2))
                image = square
            images.append(self.image_processor.preprocess(image, return_tensors="pt")["pixel_values"][0])
        return torch.stack(images, dim=0).to(self.device)

    def tokenizer_image_token(self, prompt: str) -> list[int]:
        """``mm_utils.tokenizer_image_token``, each ``<image>`` written as the Hugging Face model's
        ``n_image_tokens`` image tokens where the original wrote one ``IMAGE_TOKEN_INDEX`` and expanded it in
        ``prepare_inputs_labels_for_multimodal``."""
        chunks = [self.tokenizer(chunk).input_ids for chunk in prompt.split("<image>")]
        ids, offset = [], 0
        if chunks and chunks[0] and chunks[0][0] == self.tokenizer.bos_token_id:
            offset = 1
            ids.append(chunks[0][0])
        for k, chunk in enumerate(chunks):
            if k:
                ids.extend([self.image_token_id] * self.n_image_tokens)
            ids.extend(chunk[offset:])
        return ids

    def forward(self, images: list[str], texts: list[str], question_template: str, answer_template: str = "Yes"):
        """``LLaVAModel.forward``: exp(-mean cross-entropy) of the answer tokens ("Yes" and the end of turn),
        teacher-forced after the question, every pair one sequence, logits at every position."""
        import contextlib

        import torch

        assert len(images) == len(texts), "Number of images and texts must match"
        questions = [f"{self.SYSTEM_MSG} USER: <image>\n{question_template.format(t)} ASSISTANT: " for t in texts]
        # format_answer: answer + "</s>", Llama-2's end of sequence; here the tokenizer's own
        answers = [answer_template.format(t) + self.tokenizer.eos_token for t in texts]
        autocast = (torch.autocast(device_type="cuda", dtype=torch.bfloat16) if self.device.type == "cuda"
                    else contextlib.nullcontext())  # fmt: skip
        with torch.no_grad(), autocast:
            pixels = self.load_images(images)
            prompts = [q + a for q, a in zip(questions, answers, strict=True)]
            input_ids = [torch.tensor(self.tokenizer_image_token(prompt)) for prompt in prompts]
            labels = [ids.clone() for ids in input_ids]
            for label, question in zip(labels, questions, strict=True):
                tokenized_len = len(self.tokenizer_image_token(question)) - (question[-1] == " ")
                label[:tokenized_len] = -100
            input_ids = torch.nn.utils.rnn.pad_sequence(input_ids, batch_first=True, padding_value=self.pad_token_id)
            labels = torch.nn.utils.rnn.pad_sequence(labels, batch_first=True, padding_value=-100)
            attention_mask = input_ids.ne(self.pad_token_id)
            logits = self.model(input_ids=input_ids.to(self.device), attention_mask=attention_mask.to(self.device),
                                pixel_values=pixels).logits  # fmt: skip
            shift_logits = logits[..., :-1, :].contiguous()
            shift_labels = labels[..., 1:].contiguous().to(shift_logits.device)
            loss = torch.nn.CrossEntropyLoss(reduction="mean")
            lm_prob = torch.zeros(shift_logits.shape[0])
            for k in range(lm_prob.shape[0]):
                lm_prob[k] = (-loss(shift_logits[k], shift_labels[k])).exp()
        return lm_prob


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
    agree = ("no-reuse",) if args.model in LLAVA else ("t2v_metrics", "no-reuse")  # LLaVA's peer: another quantity
    dlog = max(float(np.abs(logs[other] - logs["reuse"]).max()) for other in agree)
    return {"median": {s: statistics.median(v) for s, v in seconds.items()}, "ratio": ratio, "dlog": dlog}


def speed_rows(model: str, tokens: int, shape: str, pairs: int, row: dict, bound: str) -> list[dict]:
    """The two figures of one shape for ``--json``: reuse's pairs/s against the t2v_metrics loop's and against
    no reuse (speed-ups: no goal, the peer is the limit), with every side's median seconds."""
    m = row["median"]
    extra = {"image_tokens": tokens, "shape": shape, "pairs": pairs, "seconds": m, "dlog": row["dlog"]}
    out = []
    for other in ("t2v_metrics", "no-reuse"):
        side = f"spotdiff reuse, {shape} cases, {tokens} image tokens"
        out.append(rows.row(f"VQAScore pairs/s, reuse over {other}", model, side, pairs / m["reuse"],
                            "pairs/s", limit=pairs / m[other], limit_side=other, goal=None, bound=bound,
                            speedup_median_of_rounds=row["ratio"][other], **extra))  # fmt: skip
    return out


def measure_checkpoint(args: argparse.Namespace, tmp: Path, tokens: int, path: Path, side: int) -> tuple[list, float]:
    """Load ``path`` as ``vqa:PATH`` (timed), time the three sides on each shape, print a line per shape; the
    ``--json`` rows and the load seconds."""
    start = time.perf_counter()
    options = ScorerOptions(device=args.device, batch_size=args.batch_size, dtype=args.dtype)
    reuse = load_scorer(f"vqa:{path}", options)
    load_s = time.perf_counter() - start
    no_reuse = copy.copy(reuse)  # the spec option reuse=no on the same loaded weights
    no_reuse.reuse = False
    peer = T2VLLaVA if args.model in LLAVA else T2VQwen2VL
    sides = {"t2v_metrics": peer(reuse.chat.model, reuse.chat.processor), "no-reuse": no_reuse, "reuse": reuse}
    label = {"tiny": "qwen2_vl", "tiny-llava": "llava"}.get(args.model, args.model)
    out = []
    for name, (k, n) in {"2 x 2": (2, args.cases[0]), "9 x 9": (9, args.cases[1])}.items():
        if n == 0:
            continue
        batch = cases(k, n, side)
        row = one_row(sides, batch, t2v_dataset(batch, tmp / f"images-{tokens}-{k}"), args)
        m, ratio = row["median"], row["ratio"]
        print(
            f"{label} | {tokens} | {n} of {name} | {n * k * k} | {m['t2v_metrics']:.3f} | "
            f"{m['no-reuse']:.3f} | {m['reuse']:.3f} | {ratio['t2v_metrics']:.2f}x | "
            f"{ratio['no-reuse']:.2f}x | {row['dlog']:.1e}",
            flush=True,
        )
        bound = ""
        if args.device.startswith("cuda"):  # one more reuse pass, under the profiler
            with Engine(reuse, progress=False, threads=args.threads) as engine:
                profile = rows.profile_bound(lambda e=engine, b=batch: list(e.case_matrices(b, "image-text")),
                                             args.device)  # fmt: skip
            bound = profile["bound"]
        out += speed_rows(label, tokens, name, n * k * k, row, bound)
    del sides, reuse, no_reuse
    free_device(args.device)
    return out, load_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=MODELS, default="tiny",
                        help="tiny: a tiny random Qwen2-VL per image token count; tiny-llava: a tiny random "
                             "LLaVA; the others: random weights of the published sizes, built on --device in "
                             "bf16")  # fmt: skip
    parser.add_argument("--tokenizer", type=Path, help="sized models' tokenizer (gpu_run.py prepare: .gpu/tokenizer)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds, each running the three sides (5; quick 3)")
    parser.add_argument("--batch-size", type=int, default=16, help="spotdiff: rows per forward; t2v_metrics: samples")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch threads, every side (CPU: 1, else the budget)")
    parser.add_argument("--image-tokens", type=int, nargs="+", default=[16, 144], help="Qwen2-VL (LLaVA: its own)")
    parser.add_argument("--cases", type=int, nargs=2, metavar=("N2", "N9"),
                        help="2x2, 9x9 cases, 0 for none (100 4; quick 10 1)")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="fewer cases and rounds")
    parser.add_argument("--dtype", help="the scorers' dtype (tiny models: auto; sized ones: bfloat16, as built)")
    parser.add_argument("--json", type=Path, help="write the figures as rows (measurements/rows.py) to this file")
    args = parser.parse_args()
    if args.threads is None:  # one CPU thread: on a shared machine a second one made the ratios swing tenfold
        args.threads = 1 if args.device == "cpu" else thread_budget(device=args.device).threads
    if args.rounds is None:
        args.rounds = 3 if args.quick else 5
    args.cases = args.cases or ((10, 1) if args.quick else (100, 4))
    args.dtype = args.dtype or ("auto" if args.model.startswith("tiny") else "bfloat16")
    import torch

    torch.set_num_threads(args.threads)
    print(f"load average at start: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"device {args.device}, {args.threads} torch thread(s), {args.rounds} rounds, batch size {args.batch_size}")
    head = ("model", "image tokens", "cases", "pairs", "t2v_metrics loop (s)", "spotdiff no-reuse (s)",
            "spotdiff reuse (s)", "speed-up over t2v_metrics", "speed-up over no-reuse", "max |dlog|")  # fmt: skip
    print(" | ".join(head))
    out, seconds = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for tokens, path, side, timings in checkpoints(args, Path(tmp)):
            got, load_s = measure_checkpoint(args, Path(tmp), tokens, path, side)
            out += got
            seconds.update(timings)
            seconds[f"load s ({tokens} image tokens)"] = load_s
            if timings:
                print(f"{args.model}: " + ", ".join(f"{k} {v:.1f}" for k, v in seconds.items()), flush=True)
    print(f"load average at end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rows.write_rows(args.json, "vqa_prefix_speed", out, device=args.device, model=args.model, rounds=args.rounds,
                    batch_size=args.batch_size, threads=args.threads, dtype=args.dtype, seconds=seconds)  # fmt: skip


if __name__ == "__main__":
    main()
