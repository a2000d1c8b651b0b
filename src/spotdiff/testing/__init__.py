"""Test doubles that ship with the package: tiny models built from configs, fixture writers in every
published format, and synthetic run stores, used by the tests and the benchmark scripts."""
