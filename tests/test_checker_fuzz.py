"""Malformed, truncated and mutated assembly: the checker never crashes and never certifies a
semantically different kernel equal to the original.

Mutations are chosen where they change the value every output depends on (the reduction's
combines, its lane exchanges, its loads); commuting the operands of a commutative combine is the
one mutation that must stay equal.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_checker_helpers import FROZEN, frozen_signature

from fixbits.checker.api import certified_equal, signature

pytestmark = pytest.mark.unit
FILES = ("row_sum_w4.ptx", "softmax_w4.ptx", "row_sum_w1.amdgcn")
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def text(name: str) -> str:
    return (FROZEN / name).read_text()


def isa(name: str) -> str:
    return "amdgcn" if name.endswith(".amdgcn") else "ptx"


@SETTINGS
@given(st.sampled_from(FILES), st.floats(0.0, 1.0))
def test_truncated_files_do_not_crash_or_match(name: str, frac: float) -> None:
    full = text(name)
    cut = int(len(full) * frac)
    s = signature(full[:cut], isa(name))
    body_end = full.rfind("}") if name.endswith(".ptx") else full.find(".Lfunc_end")
    if cut <= body_end:  # the kernel body itself was cut: that kernel is gone
        assert not certified_equal(s, frozen_signature(name)), (name, cut)


@SETTINGS
@given(st.sampled_from(FILES), st.binary(min_size=1, max_size=64), st.floats(0.0, 1.0))
def test_garbage_spliced_in_does_not_crash(name: str, junk: bytes, frac: float) -> None:
    full = text(name)
    cut = int(len(full) * frac)
    mutated = full[:cut] + junk.decode("latin-1") + full[cut:]
    signature(mutated, isa(name))  # must return a signature (possibly the text fallback), not raise


def _mutants(name: str) -> list[tuple[str, str]]:
    """(description, mutated text) of live semantic changes of one frozen file."""
    full = text(name)
    lines = full.splitlines(keepends=True)
    out = []
    for i, line in enumerate(lines):

        def sub(pat: str, rep: str, why: str, i: int = i, line: str = line) -> None:
            new = re.sub(pat, rep, line, count=1)
            if new != line:
                out.append((f"{name}:{i + 1}: {why}", "".join(lines[:i] + [new] + lines[i + 1 :])))

        if name.endswith(".ptx"):
            sub(r"\badd\.f32\b", "sub.f32", "add -> sub")
            sub(r"\bmax\.f32\b", "min.f32", "max -> min")
            sub(
                r"(shfl\.sync\.bfly\.b32\s+%r\d+, %r\d+, )(\d+)",
                lambda m: m.group(1) + str(int(m.group(2)) * 2 % 31 or 3),
                "offset",
            )
            sub(r"(ld\.global\.(?:v4\.)?b32 \{[^}]*\}, \[ %rd\d+ \+ )0 \]", r"\g<1>16 ]", "load offset")
            sub(r"\bcvt\.rn\.", "cvt.rz.", "rounding")
        else:
            sub(r"row_shr:(\d)", lambda m: f"row_shr:{int(m.group(1)) % 8 + 1}", "dpp shift")
            sub(r"\bv_add_f32_e32\b", "v_sub_f32_e32", "add -> sub")
    return out


MUTANTS = [m for f in FILES for m in _mutants(f)]


def test_there_are_mutants_to_try() -> None:
    assert len(MUTANTS) >= 20, len(MUTANTS)


@SETTINGS
@given(st.sampled_from(MUTANTS))
def test_live_mutations_are_never_certified_equal(mutant: tuple[str, str]) -> None:
    why, mutated = mutant
    name = why.split(":")[0]
    s = signature(mutated, isa(name))
    assert not certified_equal(s, frozen_signature(name)), why


@SETTINGS
@given(st.sampled_from(["row_sum_w4.ptx", "softmax_w4.ptx"]), st.data())
def test_commuting_a_combine_stays_equal(name: str, data: st.DataObject) -> None:
    full = text(name)
    pat = re.compile(r"^(\s*(?:add|max|mul)\.f32\s+%r\d+, )(%r\d+), (%r\d+);$", re.M)
    hits = list(pat.finditer(full))
    m = data.draw(st.sampled_from(hits))
    swapped = full[: m.start()] + f"{m.group(1)}{m.group(3)}, {m.group(2)};" + full[m.end() :]
    assert certified_equal(signature(swapped, "ptx"), frozen_signature(name)), m.group(0)


def test_frozen_files_exist() -> None:
    for f in FILES:
        assert (FROZEN / f).is_file() and Path(FROZEN / f).stat().st_size > 1000
