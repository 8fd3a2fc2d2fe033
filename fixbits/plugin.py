"""pytest plugin for fixbits (placeholder until the harness lands)."""

from __future__ import annotations
