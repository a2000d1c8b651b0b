"""Plans: studies as stages of ordinary ``spotdiff`` commands, resumable by fingerprint (see :mod:`.runner`)."""

from spotdiff.plans.runner import Runner, Stage, Terminated, preload, threads_per_worker, write_commands

__all__ = ["Runner", "Stage", "Terminated", "preload", "threads_per_worker", "write_commands"]
