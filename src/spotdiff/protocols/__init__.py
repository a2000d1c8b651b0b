"""Protocols: metrics per benchmark family, bootstrap confidence intervals, paired comparisons."""

from spotdiff.protocols.base import NEEDS, PROTOCOLS, Protocol, get_protocol

__all__ = ["NEEDS", "PROTOCOLS", "Protocol", "get_protocol"]
