"""Test doubles that ship with the package: tiny models built from configs, fixture writers in every
published format, synthetic run stores, loopback hub and file servers and small hub repositories in
the real layouts, used by the tests and the measurement scripts."""
