"""Plans: a study as stages of ordinary ``spotdiff`` commands, run in dependency order, resumable.

A :class:`Stage` is one or more commands with the outputs they write and the stages they depend
on; :class:`Runner` runs a plan's stages ``workers`` at a time in forked processes, skipping every
stage whose fingerprint (commands, parameters, spotdiff version, the fingerprints of its
dependencies, the declarations its commands name) and outputs are unchanged; :func:`write_commands`
writes the plan as a shell script of the equivalent commands. ``spotdiff demo`` is such a plan
(:mod:`spotdiff.demo.plan`).

A stage that was interrupted resumes when it runs again with the same fingerprint and every one of
its commands can resume (``train``, from its last complete checkpoint; ``eval``, from its cache):
its outputs are kept instead of removed. SIGTERM is handled as Ctrl-C: the running commands are
stopped and their stages left unfinished.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import shutil
import signal
import sqlite3
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spotdiff.diagnose.store import RunStore
from spotdiff.errors import ConfigError, DataError, SpotdiffError, no_room
from spotdiff.jsonio import dumps, write_json
from spotdiff.processes import usable_cores
from spotdiff.urls import redact_text
from spotdiff.version import __version__


@dataclass
class Stage:
    """One step of a plan: ``spotdiff`` commands (argv after ``spotdiff``) run in order.

    ``outputs`` (paths relative to the plan's folder) are removed before the stage runs (kept when an
    interrupted stage resumes, see :meth:`Runner.resumes`; refused when they hold files no stage wrote,
    see :meth:`Runner.check_outputs`) and must all exist for it to be skipped;
    ``deps`` name the stages that must finish first; ``params`` are anything else the outputs depend
    on; ``collect(out)`` reads what the commands wrote into the stage's record (``stages/NAME.json``).
    """

    name: str
    title: str
    commands: list[list[str]]
    outputs: list[str]
    deps: tuple[str, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)
    collect: Callable[[Path], dict] | None = None

    def fingerprint(self, dep_prints: dict[str, str], inputs: dict[str, str] | None = None) -> str:
        """A digest of the commands (``--workers`` aside), params, spotdiff version, the fingerprints of
        the stages it depends on and the digests of the files its commands read (``inputs``,
        :func:`input_digests`): equal fingerprints mean equal outputs."""
        payload = {
            "version": __version__,
            "commands": [_without_workers(c) for c in self.commands],
            "params": self.params,
            "deps": {d: dep_prints[d] for d in self.deps},
        }
        if inputs:
            payload["inputs"] = inputs
        return hashlib.sha256(dumps(payload).encode()).hexdigest()[:16]


def input_digests(commands: Sequence[Sequence[str]], cwd: Path, produced: Sequence[Path] = ()) -> dict[str, str]:
    """The SHA-256 of each YAML file the commands name (a benchmark's declaration, ``--benchmark FILE`` or
    ``spotdiff benchmarks FILE``; a config), and of the declarations of each ``--include-path`` folder and of
    ``$SPOTDIFF_INCLUDE_PATH``'s, keyed by path as named (``"missing"`` for one not there), so that a stage
    whose declaration changed runs again (issue 46). A file inside ``produced`` (the plan's outputs) is
    another stage's, which that stage's fingerprint covers.

    Args:
        commands: the stage's argv lists (after ``spotdiff``).
        cwd: the folder the commands run in, against which relative paths resolve.
        produced: the folders and files the plan's stages write.

    >>> input_digests([["eval", "--benchmark", "winoground"]], Path("."))
    {}
    """
    from spotdiff.cases import file_digest
    from spotdiff.data.declared import INCLUDE_ENV

    named: list[str] = []
    folders = [f for f in os.environ.get(INCLUDE_ENV, "").split(os.pathsep) if f.strip()]
    for argv in commands:
        args = [part for arg in argv for part in (arg.split("=", 1) if arg.startswith("--") else [arg])]
        for k, arg in enumerate(args):
            if k and args[k - 1] == "--include-path":
                folders.append(arg)
            elif arg.endswith((".yaml", ".yml")):
                named.append(arg)
    for folder in folders:
        path = cwd / Path(folder).expanduser()
        if path.is_dir():
            named += [str(Path(folder) / p.name) for p in sorted(path.iterdir()) if p.suffix in (".yaml", ".yml")]
    found: dict[str, str] = {}
    for name in named:
        path = (cwd / Path(name).expanduser()).resolve()
        if not any(path.is_relative_to(p.resolve()) for p in produced):
            found[name] = file_digest(path) if path.is_file() else "missing"
    return found


# commands that continue an interrupted run of themselves in the same outputs
RESUMABLE = frozenset({"train", "eval"})


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: handled as Ctrl-C (the running commands are stopped, their stages unfinished)."""


def _terminate(signum: int, frame: Any) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the runner is stopping its commands
    raise Terminated


def _stop_once(signum: int, frame: Any) -> None:  # pragma: no cover - in the forked command
    """A command's SIGINT/SIGTERM: stop as on Ctrl-C; ignore the next ones (Ctrl-C reaches the command and
    the runner, which then sends SIGTERM), so the command's clean-up is not interrupted."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


def _option(argv: list[str], name: str) -> str | None:
    """The value of ``name VALUE`` or ``name=VALUE`` in a command, None when absent."""
    for i, a in enumerate(argv):
        if a == name and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(name + "="):
            return a.partition("=")[2]
    return None


def _without_workers(argv: list[str]) -> list[str]:
    """A command without ``--workers N`` (outputs never depend on it)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a == "--workers":
            skip = True
            continue
        out.append(a)
    return out


def threads_per_worker(workers: int) -> int:
    """Torch threads of each of ``workers`` processes sharing this machine's cores."""
    return max(1, usable_cores() // max(1, workers))


def preload() -> None:
    """Import what ``spotdiff`` commands use once, before forking, so no worker pays for it again."""
    import torch  # noqa: F401
    import transformers  # noqa: F401

    import spotdiff.diagnose.runner
    import spotdiff.optimize.loop
    from spotdiff.benchmarks import BENCHMARKS
    from spotdiff.scorers.base import SCORERS

    BENCHMARKS.names()
    SCORERS.names()
    with contextlib.suppress(ImportError):  # the report is only needed at the end
        import spotdiff.report.build  # noqa: F401


def command_line(argv: Sequence[str]) -> str:
    """A command as it is shown (console, logs) and written (the plan's script): ``spotdiff`` and its words,
    shell-quoted, each without the password a URL in it may hold (docs/security.md).

    >>> command_line(["eval", "--model", "api:m@http://me:pw@gpu1/v1", "--out", "a b"])
    "spotdiff eval --model api:m@http://gpu1/v1 --out 'a b'"
    """
    return "spotdiff " + shlex.join(redact_text(a) for a in argv)


def _child(
    argv: list[str], cwd: Path, log: Path, threads: int, run_command: Callable[[list[str]], int]
) -> None:  # pragma: no cover - forked
    code = 1
    try:
        os.chdir(cwd)
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        # fresh streams on the redirected descriptors (the parent's may be wrappers, e.g. under pytest)
        sys.stdout = open(1, "w", encoding="utf-8", errors="replace", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", errors="replace", buffering=1, closefd=False)  # noqa: SIM115
        import logging

        logging.root.handlers.clear()  # cli.main configures logging afresh, onto the log
        signal.signal(signal.SIGINT, _stop_once)
        signal.signal(signal.SIGTERM, _stop_once)  # the runner stops its commands with SIGTERM
        import torch

        torch.set_num_threads(threads)
        print(f"$ {command_line(argv)}", flush=True)
        code = run_command(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except KeyboardInterrupt:  # stopped before the command could say so
        print(f"spotdiff {argv[0] if argv else ''}: interrupted", file=sys.stderr)
        code = 130
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(int(code or 0))


@dataclass
class _Job:
    stage: Stage
    index: int  # command index within the stage
    pid: int
    started: float
    popen: Any = None


class Runner:
    """Runs the stages of a plan in ``out``, ``workers`` commands at a time, skipping those up to date.

    ``run_command`` executes one command's argv (``spotdiff.commands.main``). Each command runs in a
    forked worker process (a ``python -m spotdiff`` subprocess where fork is unavailable) with
    ``usable cores // workers`` torch threads, its output going to ``out/logs/NAME.log``. A stage is up
    to date when its record holds the same fingerprint, its outputs exist and the runs its record
    names are finished in the run store ``out/store``.

    Args:
        out: the folder the commands run in.
        stages: the plan's stages.
        run_command: executes one command's argv and returns its exit status.
        workers: how many commands run at a time (at least 1).
        store: the run store's file name in ``out``.
        echo: prints each command as it starts.
    """

    def __init__(
        self,
        out: Path,
        stages: Sequence[Stage],
        *,
        run_command: Callable[[list[str]], int],
        workers: int = 2,
        store: str = "runs.sqlite",
        echo: Callable[[str], None] = print,
    ) -> None:
        if workers < 1:
            raise ConfigError("--workers must be at least 1")
        self.out = Path(out).resolve()
        self.workers = workers
        self.run_command = run_command
        self.store = self.out / store
        self.stages = {st.name: st for st in stages}
        self.order = [st.name for st in stages]
        self.echo = echo
        self.t0 = time.perf_counter()
        self.threads = threads_per_worker(workers)
        self.prints: dict[str, str] = {}
        self.records: dict[str, dict] = {}
        self.stage_cpu: dict[str, float] = {}
        self.stage_wall: dict[str, float] = {}
        self.stage_start: dict[str, float] = {}
        self.skipped: list[str] = []
        self.resuming: set[str] = set()
        self.written: set[str] | None = None  # the files the stages' records list (check_outputs)
        self.use_fork = hasattr(os, "fork") and sys.platform.startswith("linux")

    # -- bookkeeping -----------------------------------------------------------------------------
    def stamp(self) -> str:
        t = time.perf_counter() - self.t0
        return f"[{int(t // 60):2d}:{int(t % 60):02d}]"

    def say(self, name: str, text: str) -> None:
        self.echo(f"{self.stamp()} {name:20s} {text}")

    def record_path(self, name: str) -> Path:
        return self.out / "stages" / f"{name}.json"

    def started_path(self, name: str) -> Path:
        """The mark of a stage that started and has not finished: its fingerprint."""
        return self.out / "stages" / f"{name}.started"

    def resumes(self, stage: Stage) -> bool:
        """Whether ``stage`` was interrupted under its current fingerprint and all its commands can
        resume (:data:`RESUMABLE`; a ``train`` only from a complete checkpoint in its ``--out``): then
        its outputs are kept and it continues where it stopped."""
        try:
            started = self.started_path(stage.name).read_text(encoding="utf-8").strip()
        except OSError:
            return False
        if started != self.prints[stage.name] or not all(c and c[0] in RESUMABLE for c in stage.commands):
            return False
        from spotdiff.optimize.checkpoint import latest_checkpoint  # imports torch: only for an interrupted stage

        trains = [_option(c, "--out") for c in stage.commands if c[0] == "train"]
        return all(out and latest_checkpoint(self.out / out) is not None for out in trains)

    def _command(self, stage: Stage, index: int) -> list[str]:
        """The stage's command; a ``train`` of a resuming stage gets ``--resume``."""
        argv = stage.commands[index]
        asked = any(a == "--resume" or a.startswith("--resume=") for a in argv)
        return [*argv, "--resume"] if stage.name in self.resuming and argv[0] == "train" and not asked else argv

    def up_to_date(self, stage: Stage) -> dict | None:
        path = self.record_path(stage.name)
        if not path.is_file():
            return None
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            return None
        if record.get("fingerprint") != self.prints[stage.name]:
            return None
        if not all((self.out / o).exists() for o in stage.outputs):
            return None
        if not _runs_exist(self.store, _run_ids(record.get("result")) + _run_ids(record.get("runs"))):
            return None
        return record

    # -- running -----------------------------------------------------------------------------------
    def _spawn(self, stage: Stage, index: int) -> _Job:
        argv = self._command(stage, index)
        log = self.out / "logs" / f"{stage.name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        self.say(stage.name, f"$ {command_line(argv)}")
        sys.stdout.flush()
        sys.stderr.flush()
        if self.use_fork:
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child
                _child(argv, self.out, log, self.threads, self.run_command)
            return _Job(stage, index, pid, time.perf_counter())
        import subprocess

        env = dict(os.environ, OMP_NUM_THREADS=str(self.threads), HF_HUB_OFFLINE="1")
        with open(log, "a", encoding="utf-8") as f:
            popen = subprocess.Popen(
                [sys.executable, "-m", "spotdiff", *argv], cwd=self.out, stdout=f, stderr=subprocess.STDOUT, env=env
            )
        return _Job(stage, index, popen.pid, time.perf_counter(), popen)

    def check_outputs(self, stage: Stage) -> None:
        """Refuse to run ``stage`` where its outputs hold files no stage of the plan wrote: a user's files
        in a folder the plan names as an output would be deleted with it (as ``eval --out`` refuses a
        folder holding another run's files).

        A stage marked started emptied its outputs then, so what they hold it wrote; any other file must
        be listed in a stage record (``stages/NAME.json``, ``files``).
        """
        if self.started_path(stage.name).is_file():
            return
        if self.written is None:
            self.written = self._recorded_files()
        foreign = [f for f in _files(self.out, stage.outputs) if f not in self.written]
        if foreign:
            shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
            raise ConfigError(
                f"stage {stage.name}: its outputs in {self.out} hold files no stage of this plan wrote ({shown}), "
                "which running it would delete; move them elsewhere, or name another output folder in the plan"
            )

    def _recorded_files(self) -> set[str]:
        """The files the stage records in ``stages/`` list; a record without the list (written before
        records listed them) vouches for all that its stage's outputs hold now."""
        files: set[str] = set()
        for path in sorted((self.out / "stages").glob("*.json")):
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            listed = record.get("files") if isinstance(record, dict) else None
            if isinstance(listed, list):
                files.update(f for f in listed if isinstance(f, str))
            elif isinstance(record, dict) and record.get("name") in self.stages:
                files.update(_files(self.out, self.stages[record["name"]].outputs))
        return files

    def _prepare(self, stage: Stage) -> None:
        """Remove a stage's outputs and record before it runs (keep the outputs when it resumes; refuse
        outputs holding files no stage wrote, :meth:`check_outputs`), and mark it started."""
        if self.resumes(stage):
            self.resuming.add(stage.name)
            self.say(stage.name, "interrupted earlier: resuming, its outputs are kept")
        else:
            self.check_outputs(stage)
            for o in stage.outputs:
                _remove(self.out, self.out / o)
        self.record_path(stage.name).unlink(missing_ok=True)
        started = self.started_path(stage.name)
        started.parent.mkdir(parents=True, exist_ok=True)
        started.write_text(self.prints[stage.name] + "\n", encoding="utf-8")

    def _poll(self, job: _Job) -> tuple[int, float] | None:
        """``(exit code, cpu seconds)`` when the job has finished, else None."""
        if job.popen is not None:
            code = job.popen.poll()
            return None if code is None else (code, float("nan"))
        pid, status, usage = os.wait4(job.pid, os.WNOHANG)
        if pid == 0:
            return None
        return os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime

    def _finish(self, stage: Stage) -> None:
        result = stage.collect(self.out) if stage.collect else {}
        wall = time.perf_counter() - self.stage_start[stage.name]
        self.stage_wall[stage.name] = wall
        files = _files(self.out, stage.outputs)
        record = {
            "runs": _output_runs(self.out, stage.outputs),
            "files": files,
            "name": stage.name,
            "title": stage.title,
            "fingerprint": self.prints[stage.name],
            "commands": [[redact_text(a) for a in c] for c in stage.commands],
            "wall_s": round(wall, 2),
            "cpu_s": round(self.stage_cpu.get(stage.name, 0.0), 2),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "result": result,
        }
        path = self.record_path(stage.name)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, record, indent=1)
        if self.written is not None:
            self.written.update(files)
        self.started_path(stage.name).unlink(missing_ok=True)
        self.records[stage.name] = record
        cpu = self.stage_cpu.get(stage.name, float("nan"))
        self.say(stage.name, f"done in {wall:.1f} s (cpu {cpu:.1f} s)")

    def _kill(self, jobs: Iterable[_Job], grace: float = 30.0) -> None:
        """Stop the jobs: SIGTERM (a command stops as on Ctrl-C), SIGKILL for any left after ``grace`` s."""
        jobs = list(jobs)
        for job in jobs:
            with contextlib.suppress(ProcessLookupError):
                os.kill(job.pid, signal.SIGTERM)
            self.say(job.stage.name, "stopped; unfinished (it resumes or reruns on the next run)")
        deadline = time.monotonic() + grace
        while jobs:
            for job in list(jobs):
                with contextlib.suppress(ChildProcessError, OSError):
                    if self._poll(job) is None:
                        continue
                jobs.remove(job)
            if jobs and time.monotonic() > deadline:
                for job in jobs:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(job.pid, signal.SIGKILL)
                deadline = float("inf")
            time.sleep(0.05)

    def run(self) -> dict[str, dict]:
        """Run every stage that is not up to date; return the stage records.

        SIGTERM (``kill``, Slurm, ``docker stop``) is handled as Ctrl-C: it raises :class:`Terminated`
        once the running commands are stopped.
        """
        in_main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGTERM, _terminate) if in_main else None
        try:
            return self._run()
        finally:
            if in_main:
                signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)

    def _run(self) -> dict[str, dict]:
        produced = [self.out / o for stage in self.stages.values() for o in stage.outputs]
        for name in self.order:
            st = self.stages[name]
            self.prints[name] = st.fingerprint(self.prints, input_digests(st.commands, self.out, produced))
        for name in self.order:  # before anything runs: a stage never run here has no files of its own yet
            if not self.record_path(name).is_file():
                self.check_outputs(self.stages[name])
        done: set[str] = set()
        pending = list(self.order)
        running: list[_Job] = []
        failed: str | None = None
        total = len(self.order)
        try:
            while pending or running:
                # start what is ready, in plan order
                for name in list(pending):
                    if failed or len(running) >= self.workers:
                        break
                    st = self.stages[name]
                    if not all(d in done for d in st.deps):
                        continue
                    pending.remove(name)
                    record = self.up_to_date(st)
                    if record is not None:
                        self.records[name] = record
                        self.skipped.append(name)
                        done.add(name)
                        self.say(name, f"up to date, skipped ({self.order.index(name) + 1}/{total})")
                        continue
                    self._prepare(st)
                    self.stage_start[name] = time.perf_counter()
                    self.stage_cpu[name] = 0.0
                    self.say(name, f"{st.title} ({self.order.index(name) + 1}/{total})")
                    running.append(self._spawn(st, 0))
                if failed and not running:
                    break
                if not running:
                    if pending and not failed:
                        raise SpotdiffError(f"demo stages cannot start (missing dependencies): {pending}")
                    continue
                time.sleep(0.1)
                for job in list(running):
                    status = self._poll(job)
                    if status is None:
                        continue
                    code, cpu = status
                    running.remove(job)
                    st = job.stage
                    self.stage_cpu[st.name] += cpu
                    if code != 0:
                        failed = failed or st.name
                        log = self.out / "logs" / f"{st.name}.log"
                        self.say(st.name, f"FAILED (exit {code}); last lines of {log}:")
                        self.echo(_tail(log, 25))
                        continue
                    if job.index + 1 < len(st.commands):
                        running.append(self._spawn(st, job.index + 1))
                    else:
                        self._finish(st)
                        done.add(st.name)
        except BaseException:
            self._kill(running)
            raise
        if failed:
            log = self.out / "logs" / f"{failed}.log"
            if no_room(log):  # the command's own error may not have reached its log
                raise DataError(f"stage {failed} failed with the disk full (its log: {log}); free space there (or "
                                "choose another --out) and run again", file=self.out)  # fmt: skip
            raise SpotdiffError(f"stage {failed} failed; see {log}")
        return self.records


def _tail(path: Path, n: int) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join("    " + ln for ln in lines[-n:])


def _remove(root: Path, path: Path) -> None:
    """Delete a stage output, refusing anything outside the demo folder."""
    root, target = root.resolve(), path.resolve()
    if root not in target.parents:
        raise ConfigError(f"refusing to delete {target}: not inside {root}")
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    elif target.exists() or target.is_symlink():
        target.unlink()


def _files(root: Path, outputs: Sequence[str]) -> list[str]:
    """The files (and links) in ``outputs``, as sorted paths relative to ``root``; folders are not
    followed through links."""
    found: list[str] = []
    for name in outputs:
        path = root / name
        if path.is_dir() and not path.is_symlink():
            for folder, dirs, names in os.walk(path):  # a link to a folder is listed, not followed
                links = [d for d in dirs if os.path.islink(os.path.join(folder, d))]
                found += [os.path.relpath(os.path.join(folder, n), root) for n in (*names, *links)]
        elif path.exists() or path.is_symlink():
            found.append(os.path.relpath(path, root))
    return sorted(set(found))


def _run_ids(result: Any) -> list[str]:
    """Every ``run_id`` in a stage result."""
    ids: list[str] = []
    if isinstance(result, dict):
        for k, v in result.items():
            if k == "run_id" and isinstance(v, str):
                ids.append(v)
            else:
                ids += _run_ids(v)
    elif isinstance(result, list):
        for v in result:
            ids += _run_ids(v)
    return ids


def _output_runs(root: Path, outputs: Sequence[str]) -> list[dict[str, str]]:
    """``[{"run_id": ...}]`` of every run whose ``metrics.json`` a stage wrote into its outputs (the
    runs of ``--debias`` variants too), so a stage counts as done only while its runs are in the store."""
    ids: list[str] = []
    for name in outputs:
        path = root / name
        files = sorted(path.rglob("metrics.json")) if path.is_dir() else [path] if path.name == "metrics.json" else []
        for f in files:
            try:
                data = json.loads(f.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            ids += [data["run_id"]] if data.get("run_id") else []
            ids += [r for r in ((data.get("debias") or {}).get("run_ids") or {}).values() if r]
    return [{"run_id": r} for r in dict.fromkeys(ids)]


def _runs_exist(store: Path, ids: list[str]) -> bool:
    """Every run a stage recorded is finished in the plan's run store."""
    if not ids:
        return True
    if not store.is_file():
        return False
    try:
        with RunStore(store) as rs:
            return rs.finished(ids)
    except sqlite3.Error:
        return False


def one_line(text: str) -> str:
    """``text`` with every character that is not printable (a line break, a carriage return, an escape)
    written as its Python escape, so that it stays one line of a script or a console.

    >>> one_line("list runs\\ntouch PWNED")
    'list runs\\\\ntouch PWNED'
    """
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def write_commands(stages: Sequence[Stage], path: Path, *, title: str, epilogue: Sequence[str] = ()) -> Path:
    """The plan as an executable shell script of its commands, in an order that respects dependencies.

    Args:
        stages: the stages, in an order that respects their dependencies.
        path: the script to write (made executable).
        title: the script's comment line.
        epilogue: lines appended after the stages' commands.
    """
    lines = [
        "#!/usr/bin/env bash",
        f"# {one_line(title)}",
        "# Paths are relative to this folder. Stages without a dependency between them may run at the",
        "# same time (the runner runs --workers of them at once, each with usable cores / workers torch threads).",
        "set -euo pipefail",
        'cd "$(dirname "$0")"',
        "export HF_HUB_OFFLINE=1",
        "",
    ]
    for st in stages:
        lines.append(f"# {st.name}: {one_line(st.title)}")
        lines += [command_line(c) for c in st.commands]
        lines.append("")
    lines += [*epilogue]
    path.write_text("\n".join(lines), encoding="utf-8")
    path.chmod(0o755)
    return path
