"""Public entry points of the static checker: signature of one file, verdict on two."""

from __future__ import annotations

import functools
import gc
import hashlib
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from fixbits.checker.launch import LaunchShape, param_decls
from fixbits.checker.node import reset_interning
from fixbits.checker.signature import KernelSignature, build, text_fallback
from fixbits.checker.walk import Unsupported, Walk

if TYPE_CHECKING:
    from fixbits.checker.gcn.parse import GKernel
    from fixbits.checker.ptx.parse import Entry


@dataclass(frozen=True)
class Verdict:
    """``equal`` certifies identical bytes on every input; ``reason`` says where two trees part."""

    equal: bool
    reason: str
    a: KernelSignature
    b: KernelSignature


def detect_isa(text: str, path: str | None = None) -> str:
    if path:
        if path.endswith((".amdgcn", ".s", ".gcn")):
            return "amdgcn"
        if path.endswith(".ptx"):
            return "ptx"
    if ".entry" in text and (".version" in text or ".target" in text):
        return "ptx"
    if ".amdgcn_target" in text or "amdhsa" in text or "s_endpgm" in text:
        return "amdgcn"
    return "ptx"


def ptx_signature(text: str, launch: LaunchShape | None = None) -> KernelSignature:
    from fixbits.checker.ptx.parse import PTXError, parse_ptx

    try:
        entries = parse_ptx(text)
    except (PTXError, RecursionError) as e:
        return text_fallback("ptx", "?", text, f"unreadable PTX: {e}")
    has_mma = "mma" in text
    # shared-memory windows of the module: every one is named "smem" by the walk, so store-to-load
    # forwarding (forward.py) proves a slot's writer only where there is one
    smem_decls = len(re.findall(r"\.shared\s+(?:\.align\s+\d+\s+)?\.(?:v\d\s+\.)?\w+\s+[\w$]+", text))
    decls = param_decls(text) if launch is not None else {}
    sigs = []
    for entry in entries:
        # a malformed specialisation is the caller's error, not a kernel the walk gives up on
        spec = launch.resolve(entry.params, decls) if launch is not None else {}

        walk = functools.partial(_ptx_walk, text, entry, has_mma, smem_decls, spec, launch)
        sig = settle_kgroups(walk)
        if launch is not None:
            # the specialisation joins the digest: certified only for these parameter values.
            # The grid's own numbers stay out: each config of one problem runs at its own grid
            # (cdiv(M, BLOCK_M)), and what the walk concluded from it is in the trees already
            # (a mask proven true at every block of the grid is a plain load; one it cannot
            # decide stays a mask). Which outputs the grid covers is a host fact, as it is
            # without a launch, where the grid never enters the signature.
            tag = f"launch:{sorted(spec.items())!r};grid={'given' if launch.grid is not None else None}"
            sig = replace(
                sig, digest=hashlib.blake2b((sig.digest + "|" + tag).encode(), digest_size=16).hexdigest()
            )
        sigs.append(sig)
    return _combine(sigs)


def _ptx_walk(
    text: str,
    entry: Entry,
    has_mma: bool,
    smem_decls: int,
    spec: dict[str, int],
    launch: LaunchShape | None,
    label: tuple[int, ...] | None,
) -> tuple[KernelSignature, list[int]]:
    """One walk of one entry (``label``: PTXWalk.kgroup_label) and the k-group loops it made."""
    from fixbits.checker.ptx.walk import PTXWalk

    def run() -> tuple[KernelSignature, list[int]]:
        w = PTXWalk(entry, has_mma)
        w.smem_decls = smem_decls
        w.spec = spec
        w.grid = launch.grid if launch is not None else None
        w.kgroup_label = label
        w.run()
        return _build_of(w, "ptx", entry.name, entry.reqntid, set(w.params.values())), w.kgroup_loops

    return _guarded("ptx", entry.name, text, run)


def gcn_signature(text: str) -> KernelSignature:
    from fixbits.checker.gcn.parse import GCNError, parse_gcn

    try:
        kernels = parse_gcn(text)
    except (GCNError, RecursionError) as e:
        return text_fallback("amdgcn", "?", text, f"unreadable AMDGCN: {e}")
    has_mma = "mfma" in text or "wmma" in text
    sigs = []
    for k in kernels:
        walk = functools.partial(_gcn_walk, text, k, has_mma)
        sig = settle_kgroups(walk)
        sigs.append(sig)
    return _combine(sigs)


def _gcn_walk(
    text: str, k: GKernel, has_mma: bool, label: tuple[int, ...] | None
) -> tuple[KernelSignature, list[int]]:
    from fixbits.checker.gcn.walk import GCNWalk

    def run() -> tuple[KernelSignature, list[int]]:
        w = GCNWalk(k, has_mma)
        w.kgroup_label = label
        w.run()
        return _build_of(w, "amdgcn", k.name, k.ntid, set(w.param_syms)), w.kgroup_loops

    return _guarded("amdgcn", k.name, text, run)


def _build_of(
    w: Walk, isa: str, name: str, ntid: tuple[int, int, int] | None, params: set[str]
) -> KernelSignature:
    return build(
        isa, name, w.roots, w.effects, ntid, params, not w.nondeterministic, shared_reads=not w.smem_war,
        pads=bool(getattr(w, "spec", None)), masked_false=getattr(w, "masked_false", None),
        masked_preds=getattr(w, "masked_preds", None), tokens=getattr(w, "dtoks", None),
    )  # fmt: skip


def _guarded(
    isa: str, name: str, text: str, run: Callable[[], tuple[KernelSignature, list[int]]]
) -> tuple[KernelSignature, list[int]]:
    """``run()``, or the text's signature when the walk gives up or breaks (never "equal")."""
    try:
        return run()
    except Unsupported as e:
        return text_fallback(isa, name, text, f"not modelled: {e}"), []
    except Exception as e:  # noqa: BLE001 - a walk that breaks falls back to text, never to "equal"
        return text_fallback(isa, name, text, f"walk failed: {type(e).__name__}: {e}"), []


def settle_kgroups(
    walk: Callable[[tuple[int, ...] | None], tuple[KernelSignature, list[int]]],
) -> KernelSignature:
    """The walk's signature with k-group folds (walk.LoopSummary.kgroups) where no relabelling
    of the groups changes it, else the walk with such loops kept whole.

    The folds name each group by a rank of convenience, not by the K chunks it holds. Equal
    digests under a transposition and a G-cycle (which generate every relabelling) mean the
    signature is the same function whichever group holds which chunk, so the rank is never
    read; anything built from the folds (tokens made of their digests included) is covered,
    since it is the whole walk that runs again. One such loop per kernel: a second one, or one
    walked twice inside an outer loop, could be relabelled independently."""
    sig, loops = walk(())
    if not loops:
        return sig
    if len(loops) != 1:
        return walk(None)[0]
    g = loops[0]
    perms = [(1, 0, *range(2, g))]
    if g > 2:
        perms.append(tuple((i + 1) % g for i in range(g)))
    for perm in perms:
        other, again = walk(perm)
        if other.digest != sig.digest or again != loops:
            return walk(None)[0]
    return sig


def _combine(sigs: list[KernelSignature]) -> KernelSignature:
    if len(sigs) == 1:
        return sigs[0]
    h = hashlib.blake2b(digest_size=16)
    for s in sigs:
        h.update(s.digest.encode())
    first = sigs[0]
    return KernelSignature(
        first.isa,
        "+".join(s.entry for s in sigs),
        h.hexdigest(),
        tuple(o for s in sigs for o in s.outputs),
        any(s.physical for s in sigs),
        all(s.deterministic for s in sigs),
        next((s.fallback for s in sigs if s.fallback), None),
        first.ntid,
    )


def signature(
    text: str, isa: str | None = None, path: str | None = None, *, launch: LaunchShape | None = None
) -> KernelSignature:
    """One kernel's signature; with ``launch`` (PTX only) certified for that launch's integer
    parameters and grid alone (launch.py)."""
    isa = isa or detect_isa(text, path)
    if isa not in ("ptx", "amdgcn"):
        raise ValueError(f"unknown ISA {isa!r}; supported: 'ptx', 'amdgcn'")
    if launch is not None and isa != "ptx":
        raise ValueError("launch specialisation is implemented for PTX only")
    reset_interning()
    # the walk builds hundreds of thousands of small acyclic objects (nodes, polynomials): the
    # cyclic collector finds nothing in them and its passes over a large heap cost a third of
    # the time, so it is paused for the walk (and left as it was found)
    was_enabled = gc.isenabled()
    gc.disable()
    # the trees are walked recursively, and a thread's chain over a wide tile (256 elements of
    # an 8192-wide row in one warp) is that deep: below this the walk would fall back to text
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, _RECURSION_LIMIT))
    try:
        return ptx_signature(text, launch) if isa == "ptx" else gcn_signature(text)
    finally:
        sys.setrecursionlimit(limit)
        if was_enabled:
            gc.enable()
        reset_interning()


_RECURSION_LIMIT = 10_000


def signature_of_file(path: str | Path) -> KernelSignature:
    p = Path(path)
    return signature(p.read_text(errors="replace"), path=str(p))


def certified_equal(a: KernelSignature, b: KernelSignature) -> bool:
    """True only when the checker certifies identical bytes (never for run-dependent kernels)."""
    return a.deterministic and b.deterministic and a.isa == b.isa and a.digest == b.digest


def compare(a: KernelSignature, b: KernelSignature) -> Verdict:
    from fixbits.checker.explain import explain

    if certified_equal(a, b):
        return Verdict(True, "equal", a, b)
    return Verdict(False, explain(a, b), a, b)
