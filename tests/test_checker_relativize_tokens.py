"""A grouped tile order computes a tile's first row through a block-invariant token (a tile count
such as cdiv(N, BLOCK_N), ``Ti:``) times block coordinates. Which element a thread stores is a
host fact the relative form never holds, so two configs whose only difference is that token
store one relative tree; the token alone (an invariant offset) stays in the address."""

from __future__ import annotations

import pytest

from fixbits.checker.forms import Poly
from fixbits.checker.node import Node, int_node
from fixbits.checker.walk import relativize

pytestmark = pytest.mark.unit


def row(tiles: str) -> Poly:
    # 64 * (pid - tiles * group) + lane: the remainder form, sign unknown
    return (Poly.sym("ctaid.x") - Poly.sym(tiles) * Poly.sym("Tv:group")).scale(64) + Poly.bits("tx", 6)


def root(tiles: str, extra: Poly | None = None) -> tuple[Poly, Node]:
    r = row(tiles)
    addr = Poly.sym("p:2") + (r * Poly.sym("p:10")).scale(4) + (extra or Poly.const(0))
    # the value loads the same row of another tensor and is masked on row < M
    src = Poly.sym("p:1") + (r * Poly.sym("p:10")).scale(4)
    mask = Node("cmp", ("le", "s"), (int_node(r + Poly.const(1) - Poly.sym("p:5")), int_node(Poly.const(0))))
    value = Node("select", (), (mask, Node("load", ("global", 4), (int_node(src),)), int_node(Poly.const(0))))
    return addr, value


def test_tile_count_tokens_drop_with_the_coordinate() -> None:
    syms = {"p:1", "p:2", "p:5", "p:10"}
    a = relativize(*root("Ti:tiles_a"), syms)
    b = relativize(*root("Ti:tiles_b"), syms)
    assert a is not None and b is not None
    assert a[0] == b[0] and a[1].digest == b[1].digest
    assert not a[1].variant


def test_a_token_offset_alone_stays_in_the_address() -> None:
    syms = {"p:1", "p:2", "p:5", "p:10"}
    a = relativize(*root("Ti:tiles_a", Poly.sym("Ti:off_a").scale(4)), syms)
    b = relativize(*root("Ti:tiles_a", Poly.sym("Ti:off_b").scale(4)), syms)
    assert a is not None and b is not None
    assert a[0] != b[0]
