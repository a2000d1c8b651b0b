"""One prepared run of every speed figure at real model sizes, for a GPU machine lent for minutes (issue 47).

Two steps, one on each machine:

* ``python measurements/gpu_run.py prepare`` (``make gpu-prepare``), here, with the package registry: downloads the
  wheels of what a bare GPU image lacks (spotdiff's dependencies at constraints.txt's versions, for its Python)
  into ``.gpu/wheels``, writes the chat models' tokenizer folder and the commit into ``.gpu/``: the folder that
  travels with the tree (git ignores it). Nothing is downloaded on the GPU machine.
* ``python measurements/gpu_run.py run --device cuda --out DIR`` (``make gpu-run``), there: installs the carried
  wheels into ``.gpu/site`` (``pip --no-index``), then runs each part below as its own process with its own time
  limit (a part that fails or overruns is a row saying so; the others still run), and writes ``DIR/gpu_run.md``
  and ``DIR/gpu_run.json`` (every row at full precision, with the device name, driver, library versions and the
  commit) and ``DIR/gpu_run.log`` (every part's output). ``--device cpu`` runs the same parts at small sizes in
  seconds: CI runs it so the command keeps working; CI never needs a GPU.

The parts, each a script beside this one (its docstring says what each side is): ``eval_speed.py`` (``spotdiff
eval`` images/s on JPEG files against the raw forward on preprocessed tensors, CPU decoding and ``--gpu-decode``,
CLIP_benchmark's loop on the same files; a CLIP ViT-B/32, a ViT-L/14 and a SigLIP so400m), ``vqa_prefix_speed.py``
(VQAScore with prefix reuse against t2v_metrics' loop and against no reuse at 2 and 9 texts per image; a
Qwen2-VL-2B and a LLaVA-1.5-7B), ``synth_generative_speed.py`` (SPEC's generative engine against the same pipeline
calls in a plain loop; Stable-Diffusion-1.5-sized pipelines) and ``train_speed.py`` (``spotdiff train`` steps/s
against a plain loop and open_clip's training loop). Every model has random weights at the real architecture's
size, built from its config (a forward times the same kernels whatever the weights).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CARRY = ROOT / ".gpu"
#: What a bare GPU image lacks or holds at another version (the image's own torch, numpy and friends are used):
#: spotdiff's dependencies that its modules import, at constraints.txt's versions, with what they need in turn.
WHEELS = ("transformers", "tokenizers", "huggingface-hub", "httpx2", "httpcore2", "truststore", "hf-xet", "click",
          "regex", "rapidfuzz", "diffusers", "importlib-metadata", "lazy-importer", "open-clip-torch", "ftfy",
          "wcwidth", "webdataset", "braceexpand")  # fmt: skip
#: The library versions the table records.
LIBRARIES = ("torch", "transformers", "diffusers", "open_clip_torch", "accelerate", "numpy", "pillow")


def part_commands(device: str, json_dir: Path, tokenizer: Path | None) -> list[tuple[str, list[str], float]]:
    """The parts as ``(name, argv, time limit in seconds)``, in the order they run (the cheapest figures first, so
    that an overrun at the end loses the least). On the CPU: the small models, in seconds."""
    py = [sys.executable]

    def script(name: str, *args: str) -> list[str]:
        return [*py, str(HERE / name), *args]

    def js(name: str) -> list[str]:
        return ["--json", str(json_dir / f"{name}.json")]

    tok = ["--tokenizer", str(tokenizer)] if tokenizer else []
    if device.startswith("cuda"):
        ev = ["--device", device, "--dtype", "bf16", "--batch-size", "256", "--seconds", "1.5", "--rounds", "2"]
        vqa = ["--device", device, "--rounds", "3", *tok]
        return [
            ("eval vit-b-32", script("eval_speed.py", "--model", "vit-b-32", *ev, *js("eval-vit-b-32")), 60),
            ("eval vit-l-14", script("eval_speed.py", "--model", "vit-l-14", *ev, *js("eval-vit-l-14")), 60),
            ("vqa qwen2-vl-2b", script("vqa_prefix_speed.py", "--model", "qwen2-vl-2b", *vqa, "--image-tokens", "144",
                                       "--cases", "10", "2", *js("vqa-qwen2-vl-2b")), 70),
            ("train vit-b-32", script("train_speed.py", "--model", "vit-b-32", "--device", device, "--warmup", "2",
                                      "--steps", "5", *js("train-vit-b-32")), 80),
            ("synth sd15", script("synth_generative_speed.py", "--preset", "sd15", "--device", device,
                                  *js("synth-sd15")), 60),
            ("eval siglip-so400m", script("eval_speed.py", "--model", "siglip-so400m", *ev,
                                          *js("eval-siglip-so400m")), 55),
            ("vqa llava-1.5-7b", script("vqa_prefix_speed.py", "--model", "llava-1.5-7b", *vqa, "--cases", "8", "1",
                                        *js("vqa-llava-1.5-7b")), 95),
        ]  # fmt: skip
    ev = ["--device", "cpu", "--batch-size", "4", "--seconds", "0.2", "--rounds", "1"]
    return [
        ("eval small", script("eval_speed.py", "--model", "small", *ev, *js("eval-small")), 240),
        ("vqa tiny", script("vqa_prefix_speed.py", "--device", "cpu", "--rounds", "1", "--image-tokens", "16",
                            "--cases", "1", "0", *js("vqa-tiny")), 240),
        ("train small", script("train_speed.py", "--model", "small", "--device", "cpu", "--batch-size", "2",
                               "--warmup", "1", "--steps", "1", "--rounds", "1", "--photo-size", "64x48",
                               *js("train-small")), 240),
        ("synth tiny", script("synth_generative_speed.py", "--device", "cpu", "--batch-sizes", "1", "--sets", "1",
                              "--rounds", "1", "--classes", "cat", "--library-size", "1", *js("synth-tiny")), 240),
    ]  # fmt: skip


def prepare(python_version: str) -> None:
    """Download the wheels of :data:`WHEELS` at constraints.txt's versions for ``python_version`` on x86-64 Linux
    into ``.gpu/wheels``, write the chat models' tokenizer folder and record the commit."""
    pins = dict(line.split("==", 1) for line in (ROOT / "constraints.txt").read_text().split() if "==" in line)
    pins = {name.lower().replace("_", "-"): version for name, version in pins.items()}
    missing = [name for name in WHEELS if name not in pins]
    if missing:
        raise SystemExit(f"gpu_run.py: error: constraints.txt pins no version of {', '.join(missing)}")
    wheels = CARRY / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    platforms = [f"--platform={p}" for p in ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64",
                                            "manylinux_2_17_x86_64", "manylinux2014_x86_64")]  # fmt: skip
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                    f"--python-version={python_version}", "--implementation=cp", *platforms, "--dest", str(wheels),
                    *(f"{name}=={pins[name]}" for name in WHEELS)], check=True)  # fmt: skip
    from sized_models import write_tokenizer

    shutil.rmtree(CARRY / "tokenizer", ignore_errors=True)
    write_tokenizer(CARRY / "tokenizer")  # the chat models' tokenizer: there is no GGUF there
    commit = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True,
                            text=True, check=True).stdout.strip()  # fmt: skip
    (CARRY / "commit").write_text(commit + "\n", encoding="utf-8")
    size = sum(f.stat().st_size for f in CARRY.rglob("*") if f.is_file()) / 2**20
    print(f"{CARRY}: {len(list(wheels.glob('*.whl')))} wheels, the tokenizer, commit {commit}: {size:.1f} MiB")


def install(env: dict[str, str]) -> str:
    """Install the carried wheels (if any) into ``.gpu/site`` without an index and put it first on the children's
    ``PYTHONPATH``, after the sources; what was installed, in a line."""
    paths = [str(ROOT / "src")]
    wheels = sorted((CARRY / "wheels").glob("*.whl"))
    if wheels:
        site = CARRY / "site"
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--no-compile",
                        "--upgrade", "--target", str(site), *map(str, wheels)], check=True)  # fmt: skip
        paths.append(str(site))
    env["PYTHONPATH"] = os.pathsep.join([*paths, *filter(None, [env.get("PYTHONPATH")])])
    return f"{len(wheels)} carried wheels installed" if wheels else "nothing carried: the environment's packages"


def environment(env: dict[str, str]) -> dict:
    """The device (name, driver, memory), the library versions the parts import, the commit and the date."""
    probe = "\n".join([
        "import importlib.metadata as m, json, sys, torch",
        "v = {'cuda': torch.version.cuda}",
        "for name in sys.argv[1:]:",
        "    try: v[name] = m.version(name)",
        "    except m.PackageNotFoundError: v[name] = None",
        "print(json.dumps(v))",
    ])  # fmt: skip
    out = subprocess.run([sys.executable, "-c", probe, *LIBRARIES], env=env, capture_output=True, text=True, check=True)
    about = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), **json.loads(out.stdout)}
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                         capture_output=True, text=True) if _has("nvidia-smi") else None  # fmt: skip
    if smi is not None and smi.returncode == 0:
        name, driver, memory = (x.strip() for x in smi.stdout.splitlines()[0].split(","))
        about.update(gpu=name, driver=driver, gpu_memory=memory)
    commit = CARRY / "commit"  # where the tree came without its .git: the commit prepare recorded
    about["commit"] = _git_commit() or (commit.read_text().strip() if commit.exists() else None)
    about["cpu_cores"] = os.cpu_count()
    return about


def _has(command: str) -> bool:
    return any((Path(d) / command).exists() for d in os.environ.get("PATH", "").split(os.pathsep))


def _git_commit() -> str | None:
    out = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True)
    return out.stdout.strip() or None


def run_part(name: str, argv: list[str], limit: float, env: dict[str, str], log) -> tuple[list[dict], dict]:
    """Run one part with its time limit, its output appended to ``log``; its rows (from its ``--json`` file) and
    how it ended. A part that fails or overruns gives no rows and says why."""
    log.write(f"\n===== {name}: {' '.join(argv)}\n")
    log.flush()
    json_file = Path(argv[argv.index("--json") + 1])
    start = time.perf_counter()
    try:
        proc = subprocess.run(argv, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=limit, cwd=ROOT)
        status = "ok" if proc.returncode == 0 else f"failed (exit status {proc.returncode})"
    except subprocess.TimeoutExpired:
        status = f"stopped at its time limit of {limit:.0f} s"
    seconds = time.perf_counter() - start
    log.write(f"===== {name}: {status} in {seconds:.1f} s\n")
    log.flush()
    rows = json.loads(json_file.read_text())["rows"] if status == "ok" and json_file.exists() else []
    if status == "ok" and not rows:
        status = "failed (no rows written)"
    return [{**r, "part": name} for r in rows], {"part": name, "status": status, "seconds": seconds}


def _number(x: float | None) -> str:
    if x is None:
        return ""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def markdown(about: dict, parts: list[dict], rows: list[dict]) -> str:
    """The table: one line per row (value, its limit, the ratio, the goal, what bounds it), after the device and
    versions, then how each part ended."""
    versions = ", ".join(f"{k} {about.get(k)}" for k in (*LIBRARIES, "cuda") if about.get(k))
    lines = [f"# GPU run of {about['date']}", "",
             f"Device: {about.get('gpu', 'no GPU')} (driver {about.get('driver', '-')}, "
             f"{about.get('gpu_memory', '-')}), {about['cpu_cores']} CPU cores; {versions}; spotdiff "
             f"{about.get('commit')}; {about['installed']}; {about['wall_s']:.0f} s in all.", "",
             "| figure | model | side | value | limit (side) | ratio | goal | what bounds it |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for r in rows:
        limit = f"{_number(r['limit'])} ({r['limit_side']})" if r.get("limit") is not None else ""
        ratio = "" if r.get("ratio") is None else f"{r['ratio']:.2f}"
        goal = "" if r.get("goal") is None else f">= {r['goal']}"
        lines.append(f"| {r['figure']} | {r['model']} | {r['side']} | {_number(r['value'])} {r['unit']} | {limit} | "
                     f"{ratio} | {goal} | {r.get('bound', '')} |")  # fmt: skip
    lines += ["", "| part | ended | seconds |", "| --- | --- | --- |"]
    lines += [f"| {p['part']} | {p['status']} | {p['seconds']:.1f} |" for p in parts]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    json_dir = Path(tempfile.mkdtemp(prefix="gpu-run-parts-"))  # the parts' rows end up in gpu_run.json
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    start = time.perf_counter()
    installed = install(env) if args.device.startswith("cuda") else "the environment's packages"
    about = {**environment(env), "device": args.device, "installed": installed}
    tokenizer = CARRY / "tokenizer" if (CARRY / "tokenizer").is_dir() else None
    parts, rows = [], []
    commands = [c for c in part_commands(args.device, json_dir, tokenizer) if not args.parts or c[0] in args.parts]
    with open(out / "gpu_run.log", "w", encoding="utf-8") as log:
        log.write(json.dumps(about) + "\n")
        for name, argv, limit in commands:
            got, ended = run_part(name, argv, limit, env, log)
            rows += got
            parts.append(ended)
            print(f"{name}: {ended['status']} in {ended['seconds']:.1f} s, {len(got)} rows", flush=True)
            write_table(out, about, parts, rows, time.perf_counter() - start)  # after each part: nothing is lost
    print(f"{out / 'gpu_run.md'}: {len(rows)} rows from {len(parts)} parts in {time.perf_counter() - start:.0f} s")
    return 0 if all(p["status"] == "ok" for p in parts) else 1


def write_table(out: Path, about: dict, parts: list[dict], rows: list[dict], seconds: float) -> None:
    """``gpu_run.json`` and ``gpu_run.md`` as they stand."""
    about = {**about, "wall_s": seconds}
    (out / "gpu_run.json").write_text(json.dumps({**about, "parts": parts, "rows": rows}, indent=1), encoding="utf-8")
    (out / "gpu_run.md").write_text(markdown(about, parts, rows), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="here: download what the GPU machine lacks into .gpu/ (carried with the tree)")
    p.add_argument("--python-version", default="3.12", help="the GPU image's Python (default 3.12)")
    r = sub.add_parser("run", help="there: install what .gpu/ carries, run every part, write the table")
    r.add_argument("--device", default="cuda", help="cuda (default) or cpu (small sizes, seconds: CI's check)")
    r.add_argument("--out", type=Path, default=Path("gpu-run"), help="where the table and the log go")
    r.add_argument("--parts", nargs="+", help="only these parts (names as the table gives them)")
    args = parser.parse_args(argv)
    if args.command == "prepare":
        prepare(args.python_version)
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
