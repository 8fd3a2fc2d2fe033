"""Split entries whose span granule the shapes that verified them leave open.

A tensor-core split rounds its span ceil(K / count) up to a granule (64, 128, the K-loop step, or 8
with 64 when 64 | K). At many K two granules give the same span, so draws there cannot tell them
apart and the entry stands on the prober's prior, not on cuBLAS's bytes. H100 session 40: two fp8
entries verified only at such K were wrong at fresh shapes. This finds those entries (CPU) and the K
near their shapes where the readings part, for a device run to draw there.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from fixbits.desc import GEMMDesc
from fixbits.probe.profile import ArchProfile, ProfileEntry

_SHAPE = re.compile(r"(\d+)x(\d+)x(\d+)")


@dataclass(frozen=True)
class OpenGranule:
    """One entry whose granule is open, with the readings its own shapes cannot reject."""

    key: str
    desc: GEMMDesc
    reading: str  # the entry's granule, as granule_reading writes it
    also_fit: tuple[GEMMDesc, ...]  # readings that owe the entry's bits at every own shape
    shapes: tuple[tuple[int, int, int], ...]  # the entry's own shapes: its note's and its representative

    def readings(self) -> list[str]:
        from fixbits.probe.reconstruct import granule_reading

        return [granule_reading(v) for v in self.also_fit]


def own_shapes(e: ProfileEntry) -> tuple[tuple[int, int, int], ...]:
    """The shapes an entry was verified on: its note names them (MxNxK), its representative too."""
    found = {(int(m), int(n), int(k)) for m, n, k in _SHAPE.findall(e.note or "")}
    if e.shape:
        found.add(tuple(e.shape))  # type: ignore[arg-type]
    return tuple(sorted(found, key=lambda s: (s[2], s[0], s[1])))


def open_granules(prof: ArchProfile) -> tuple[int, list[OpenGranule]]:
    """(split entries in the profile, those whose own shapes leave the granule open)."""
    from fixbits.probe.reconstruct import _granule_variants, granule_reading
    from fixbits.probe.recover import _signature

    total, out = 0, []
    for key, e in sorted(prof.entries.items()):
        variants = _granule_variants(e.desc) if e.desc is not None else []
        if not variants:
            continue
        total += 1
        shapes = own_shapes(e)
        ks = {s[2] for s in shapes}
        own = {k: _signature(e.desc, k) for k in ks}
        agree = tuple(v for v in variants if all(_signature(v, k) == own[k] for k in ks))
        if agree:
            out.append(OpenGranule(key, e.desc, granule_reading(e.desc), agree, shapes))
    return total, out


def parting_shapes(og: OpenGranule) -> Iterator[tuple[int, int, int]]:
    """Shapes of the entry's own M and N at a K near one of its own (reconstruct.parting_unit
    apart) where the entry and a reading that fits it so far part; the heuristic still has to send
    them to the entry's answer."""
    from fixbits.probe.reconstruct import _parting_ks, parting_unit

    alive = [og.desc, *og.also_fit]
    unit = parting_unit(og.desc.in_dtype)
    for m, n, k in og.shapes:
        for kk in _parting_ks(alive, k, unit):
            yield m, n, kk
