"""ISA-independent machinery of the walk: control flow over a flat instruction list, loop
summaries, shared-memory exchanges and the roots. The PTX and AMDGCN walkers subclass it and
supply one transfer function per instruction (``step``).

Soundness rules kept here:
* a loop-carried register becomes a fold/loop node whose key holds every carried value it
  depends on, its seed and the loop's exit condition (the tensor-core K-loop exemption is the one
  documented exception: an accumulator fed only by one chain of identical MMAs, or G groups of
  such chains over interleaved K chunks (LoopSummary.kgroups, kept only where no relabelling of
  the groups changes the signature: api.settle_kgroups). The exemption trusts, as the paper's
  does, that the loop walks every K tile in order and that each accumulator register holds the
  element its store writes: it reads the operands' addresses only as far as mma_operands.py keys
  them, and the fold names no element. What the loop multiplies joins the fold as an operand key
  (mma_operands.py: base pointers, where each pointer's tiles start and how far they move per
  MMA, the loop's bound, arithmetic between the loads and the MMA, staged values in staging
  order, which staged tile each wgmma operand reads), so another operand is told apart where
  configs of one source agree; tests/test_checker_mma_operands.py holds the gaps left as strict
  xfails);
* a branch merge becomes a select on the path condition;
* control flow the walk does not understand raises ``Unsupported`` and the kernel's signature
  falls back to its normalised text (never merges two kernels that differ).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fixbits.checker.forms import (
    Poly,
    add_terms,
    data_token,
    is_bit_symbol,
    is_variant_symbol,
    iter_symbol,
    split_thread_form,
    token,
)
from fixbits.checker.leaf_pred import normal_ixform
from fixbits.checker.maxsets import normal_set
from fixbits.checker.node import _VARIANT_KINDS, Node, Root, int_node

if TYPE_CHECKING:
    from fixbits.checker.coord_split import SplitCoord


class Unsupported(Exception):
    """A construct the walk cannot model soundly; the caller falls back to text."""


@dataclass
class SmemEntry:
    kind: str  # "st" (value store), "async" (copy engine: cp.async / TMA)
    addr: Node
    value: Node
    pred: Node | None
    nbytes: int
    epoch: int
    node: Node | None = None
    bar: int = -1  # block-wide barriers the walk had passed when it stored (an upper bound in loops)


TRUE = Node("true")
UNDEF = Node("undef", ())


def thread_offsets(a: Poly, nbits: int) -> list[int] | None:
    """``a - smem`` at every thread of a block of 2^nbits threads, when ``a`` is the shared
    window plus a form over tid.x bits only; None otherwise."""
    from fixbits.checker.forward import eval_all

    if a.terms.get(("smem",)) != 1:
        return None
    rel = a - Poly.sym("smem")
    for m in rel.terms:
        if any(not (s.startswith("tx") and s[2:].isdigit() and int(s[2:]) < nbits) for s in m):
            return None
    return eval_all(rel, nbits)


def _is_cpasync(v: Node) -> bool:
    """A cp.async copy's value, also as a loop's copy (the walk wraps those in ``inloop``)."""
    return v.kind == "cpasync" or (v.kind == "inloop" and len(v.kids) == 2 and v.kids[1].kind == "cpasync")


def to_poly(n: Node) -> Poly:
    """Integer view of any node: a non-integer value used as an integer is data."""
    if n.poly is not None:
        return n.poly
    if n.kind == "carried":
        return Poly.sym("carried:" + str(n.attrs[0]))
    return data_token([n.digest])


def pred_is_coordinate(n: Node) -> bool:
    """True when a predicate depends only on launch facts (coordinates, extents, parameters);
    memoised on the digest (a pure function of the tree; guards are asked about again and again)."""
    got = _COORD.get(n.digest)
    if got is None:
        got = _pred_is_coordinate(n)
        if len(_COORD) > 200_000:
            _COORD.clear()
        _COORD[n.digest] = got
    return got


_COORD: dict[bytes, bool] = {}


def _pred_is_coordinate(n: Node) -> bool:
    if n.kind == "int":
        assert n.poly is not None
        return not any(s.startswith(("D:", "carried:")) for s in n.poly.symbols())
    if n.kind in ("cmp", "and", "or", "xor", "not", "true"):
        return all(pred_is_coordinate(k) for k in n.kids)
    return False


def mk_not(p: Node) -> Node:
    if p.kind == "not":
        return p.kids[0]
    return Node("not", (), (p,))


FALSE = mk_not(TRUE)


def const_pred(v: bool) -> Node:
    """A predicate with one value at every thread: ``true`` or ``not(true)``."""
    return TRUE if v else FALSE


def mk_pred_join(op: str, kids: tuple[Node, ...], label: str = "pred") -> Node:
    """``and`` / ``or`` of predicates, with constant operands folded (a predicate the launch
    decides is ``const_pred``): x and true is x, x and false is false, and dually. ``label``
    tells an instruction's join (``pred``) from a path condition's (``pc``)."""
    unit, zero = (TRUE, FALSE) if op == "and" else (FALSE, TRUE)
    if not any(k.digest in (unit.digest, zero.digest) for k in kids):
        return Node(op, (label,), kids)
    if any(k.digest == zero.digest for k in kids):
        return zero
    rest = tuple(k for k in kids if k.digest != unit.digest)
    if not rest:
        return unit
    return rest[0] if len(rest) == 1 else Node(op, (label,), rest)


def pc_and(conds: tuple[Node, ...]) -> Node:
    """A path condition's ``and``: one condition is itself, and a branch every thread takes
    (the launch decides it) adds nothing."""
    return conds[0] if len(conds) == 1 else mk_pred_join("and", conds, "pc")


def icmp(op: str, sign: str, diff: Poly) -> Node:
    """Integer comparison ``diff OP 0`` in one canonical form: ``diff' <= 0``, ``== 0`` or their
    negation (integers: d < 0 iff d + 1 <= 0), so that K > 0 and K - 1 < 0 meet."""
    if op in ("eq", "ne"):
        n = Node("cmp", ("eq", sign), (int_node(diff), int_node(Poly.const(0))))
        return n if op == "eq" else mk_not(n)
    table = {"lt": (1, False), "le": (0, False), "gt": (0, True), "ge": (1, True),
             "lo": (1, False), "ls": (0, False), "hi": (0, True), "hs": (1, True)}  # fmt: skip
    if op not in table:
        return Node("cmp", (op, sign), (int_node(diff), int_node(Poly.const(0))))
    shift, negate = table[op]
    n = Node("cmp", ("le", sign), (int_node(diff + Poly.const(shift)), int_node(Poly.const(0))))
    return mk_not(n) if negate else n


def mk_select(p: Node, a: Node, b: Node) -> Node:
    if a.digest == b.digest:
        return a
    if p.kind == "true":
        return a
    if p.kind == "not":
        return mk_select(p.kids[0], b, a)
    # an MMA K-loop that ran zero times returns its seed: the guard adds nothing
    if not p.variant and pred_is_coordinate(p):
        for x, y in ((a, b), (b, a)):
            if x.kind == "mmafold" and x.kids and x.kids[0].digest == y.digest:
                return x
    return Node("select", (), (p, a, b))


class Walk:
    """One entry function over one symbolic thread."""

    has_mma: bool = False

    def __init__(self) -> None:
        self.env: dict[str, Node] | None = {}
        self.pc: tuple[Node, ...] = ()
        self.pending: dict[str, list[tuple[dict[str, Node], tuple[Node, ...]]]] = {}
        self.roots: list[Root] = []
        self.effects: list[Node] = []
        self.smem: list[SmemEntry] = []
        self.epoch = 0
        # bumps whenever shared memory may have changed for this thread's view (a store, a copy,
        # a barrier, a wait for async copies); counted from the start of the current loop body
        self.smem_version = 0
        self.depth = 0
        self.nondeterministic = False
        self.labels: dict[str, int] = {}
        self.backedges: dict[int, int] = {}  # header index -> back-edge branch index
        self._hist: Node | None = None
        self._hist_key: tuple[list[SmemEntry], int] | None = None
        self._uni_cache: tuple[list[SmemEntry], int, Node | None, frozenset[int]] | None = None
        self._cover_cache: tuple[list[SmemEntry], int, int, dict[int, int], list[list[int] | None]] | None = None
        # store-to-load forwarding (forward.py): block-wide barriers passed, whether each one
        # found every copy-engine write waited for, open copies, the barrier count at the last
        # forwarded read (a store before the next barrier would race with it)
        self.bars = 0
        self.bar_clean: list[bool] = [True]
        self.cp_open = False
        self.tma_loads = False  # a TMA load completes on an mbarrier the walk does not follow
        self.unmodelled_smem = False  # a write whose slot and value the walk does not know
        self.fwd_bar: int | None = None
        self.fwd_race = False
        # a block barrier inside a loop (which may run no iteration): from then on a read does
        # not say how many barriers precede it (thread_roots.read_at then hides no store)
        self.loop_bar = False
        # what each D: token of float bits or of integer arithmetic on them stands for
        # (dtokens.py), where the dialect's walk records it (ptx/walk.py)
        self.dtoks: dict[str, Node] = {}
        # shared reads since the last block barrier (address, bytes, whether the thread that
        # gives the address is the one that gets the bytes), and whether a later store of the
        # same interval may write bytes another thread read (a write-after-read race the
        # histories, which hold the stores before each read, cannot show), or a shared read
        # ran inside a loop (whose history holds no store of an earlier iteration):
        # thread_roots.read_at then takes no read apart (api passes it to build)
        self.interval_reads: list[tuple[Poly | None, int, bool, Node | None]] = []
        self.smem_war = False
        self.read_pred: Node | None = None  # the predicate of the load being walked (ISA walker)
        # k-group folds (LoopSummary.kgroups): the label each group's rank gets, None to keep
        # such loops whole; api.py walks again under relabellings and keeps the folds only when
        # the signature does not change (which group holds which K chunk is not known)
        self.kgroup_label: tuple[int, ...] | None = ()
        self.kgroup_loops: list[int] = []  # the group count of every loop summarised that way

    # ---- to be provided by the ISA walker ------------------------------------------------
    def insts_len(self) -> int:
        raise NotImplementedError

    def label_at(self, i: int) -> str | None:
        raise NotImplementedError

    def branch_at(self, i: int) -> tuple[str, Node | None] | None:
        """(target label, condition node or None when unconditional) if instruction i branches."""
        raise NotImplementedError

    def is_return(self, i: int) -> bool:
        raise NotImplementedError

    def step(self, i: int) -> None:
        raise NotImplementedError

    def written_regs(self, lo: int, hi: int) -> set[str]:
        raise NotImplementedError

    def branch_target(self, i: int) -> str | None:
        raise NotImplementedError

    # ---- registers ---------------------------------------------------------------------
    def get(self, reg: str) -> Node:
        assert self.env is not None
        n = self.env.get(reg)
        if n is None:
            n = Node("undef", (reg.split("@")[0].rstrip("0123456789"),))
        return n

    def set(self, reg: str, n: Node) -> None:
        assert self.env is not None
        self.env[reg] = n

    # ---- control flow ------------------------------------------------------------------
    def run(self) -> None:
        n = self.insts_len()
        for i in range(n):
            lab = self.label_at(i)
            if lab is not None:
                if lab in self.labels:
                    raise Unsupported(f"label {lab} defined twice")
                self.labels[lab] = i
        for i in range(n):
            tgt = self.branch_target(i)
            if tgt is None:
                continue
            if tgt not in self.labels:
                raise Unsupported(f"branch to unknown label {tgt}")
            t = self.labels[tgt]
            if t <= i:
                if t in self.backedges:
                    raise Unsupported("loop with two back edges")
                self.backedges[t] = i
        # loops must nest
        spans = sorted(self.backedges.items())
        for a, (_h1, b1) in enumerate(spans):
            for h2, b2 in spans[a + 1 :]:
                if h2 <= b1 and b2 > b1:
                    raise Unsupported("overlapping loops")
        self.exec_range(0, n)
        if self.fwd_race:
            raise Unsupported("shared store races with a forwarded read")

    def exec_range(self, lo: int, hi: int) -> None:
        i = lo
        while i < hi:
            lab = self.label_at(i)
            if lab is not None:
                self.merge_at(lab)
                if i in self.backedges and self.backedges[i] < hi:
                    if self.env is None:
                        raise Unsupported("loop header reached only by a jump")
                    b = self.backedges[i]
                    self.do_loop(i, b)
                    i = b + 1
                    continue
                i += 1
                continue
            if self.env is None:
                i += 1
                continue
            br = self.branch_at(i)
            if br is not None:
                tgt, cond = br
                t = self.labels[tgt]
                if t <= i:
                    raise Unsupported("back edge outside its loop")
                if t > hi:
                    raise Unsupported("branch leaves its loop body")
                if cond is None:
                    self.pending.setdefault(tgt, []).append((self.env, self.pc))
                    self.env = None
                else:
                    self.pending.setdefault(tgt, []).append((dict(self.env), self.pc + (cond,)))
                    self.pc = self.pc + (mk_not(cond),)
                i += 1
                continue
            if self.is_return(i):
                self.env = None
                i += 1
                continue
            self.step(i)
            i += 1

    def merge_at(self, label: str) -> None:
        entries = self.pending.pop(label, [])
        if not entries:
            return
        states = list(entries)
        if self.env is not None:
            states.append((self.env, self.pc))
        if len(states) == 1:
            self.env, self.pc = dict(states[0][0]), states[0][1]
            return
        # common prefix of the path conditions is the merged path condition
        prefix = list(states[0][1])
        for _, pc in states[1:]:
            k = 0
            while k < len(prefix) and k < len(pc) and prefix[k].digest == pc[k].digest:
                k += 1
            prefix = prefix[:k]
        base_env, base_pc = states[-1]
        merged = dict(base_env)
        for env, pc in reversed(states[:-1]):
            extra = pc[len(prefix) :]
            cond = pc_and(tuple(extra))
            keys = set(env) | set(merged)
            for r in keys:
                a = env.get(r)
                b = merged.get(r)
                if a is None:
                    continue
                if b is None:
                    merged[r] = a
                    continue
                merged[r] = mk_select(cond, a, b)
        self.env = merged
        self.pc = tuple(prefix)

    # ---- loops -------------------------------------------------------------------------
    def do_loop(self, h: int, b: int) -> None:
        br = self.branch_at(b)
        assert br is not None
        for lab, _ in list(self.pending.items()):
            if h < self.labels[lab] <= b:
                raise Unsupported("jump into a loop body")
        assert self.env is not None
        written = self.written_regs(h + 1, b)
        pre_env = dict(self.env)
        saved = (self.roots, self.effects, self.smem, self.epoch, self.pc)
        cp_before = self.cp_open

        def body(env: dict[str, Node]) -> tuple[dict[str, Node], Node | None]:
            self.env = env
            self.smem_version = 0
            self.roots, self.effects, self.smem = [], [], list(saved[2])
            self.depth += 1
            try:
                self.exec_range(h + 1, b)
                if self.env is None:
                    raise Unsupported("loop body ends in a jump")
                br2 = self.branch_at(b)
                assert br2 is not None
                return self.env, br2[1]
            finally:
                self.depth -= 1

        env1 = dict(pre_env)
        for r in written:
            env1[r] = _leaf("carried", r)
        end1, _ = body(env1)
        it = Poly.sym(iter_symbol(self.depth + 1))
        ivs: dict[str, tuple[Poly, Poly]] = {}
        for r in written:
            init, upd = pre_env.get(r), end1.get(r)
            if init is None or upd is None or init.poly is None or upd.poly is None:
                continue
            step = upd.poly - Poly.sym("carried:" + r)
            if any(s.startswith("carried:") for s in step.symbols()):
                continue
            ivs[r] = (init.poly, step)
        env2 = dict(pre_env)
        for r in written:
            if r in ivs:
                init_p, step = ivs[r]
                env2[r] = int_node(init_p + step * it)
            else:
                env2[r] = _leaf("carried", r)
        end2, cond = body(env2)
        body_roots, body_effects, body_smem = self.roots, self.effects, self.smem
        self.roots, self.effects, self.smem, self.epoch, self.pc = saved
        self.smem_version += 1
        if cond is None:
            raise Unsupported("loop without an exit condition")
        summ = LoopSummary(
            self.depth + 1, pre_env, end2, cond, set(written) - set(ivs), self.kgroup_label,
            tuple(e.value for e in body_smem), tuple(e.addr for e in body_smem), self.dtoks,
        )  # fmt: skip
        self.env = dict(pre_env)
        for r in written:
            if r in ivs:
                init_p, step = ivs[r]
                exit_key = summ.full_key().digest.hex()
                variant = init_p.is_variant() or step.is_variant()
                self.env[r] = int_node(token("ivexit", (init_p.key(), step.key(), exit_key), variant))
            else:
                self.env[r] = summ.out(r, self.has_mma)
        if summ.kgroup_used:
            self.kgroup_loops.append(summ.kgroup_used)
        for root in body_roots:
            k = summ.full_key()
            self.roots.append(
                Root(
                    root.param,
                    root.nbytes,
                    Node("inloop", (), (k, root.address)),
                    Node("inloop", (), (k, root.value)),
                    False,
                )
            )
        for eff in body_effects:
            self.effects.append(Node("inloop", (), (summ.full_key(), eff)))
        base = len(saved[2])
        for e in body_smem[base:]:
            k = summ.full_key()
            self.smem.append(
                SmemEntry(
                    e.kind,
                    Node("inloop", (), (k, e.addr)),
                    Node("inloop", (), (k, e.value)),
                    e.pred,
                    e.nbytes,
                    self.epoch,
                    bar=self.bars,
                )
            )
            if e.kind == "async" and e.value.kind == "cpasync":
                self.cp_open = True  # (a TMA load is not waited with cp.async.wait_group)
        if cp_before:
            self.cp_open = True
        self.epoch += 1

    def global_store(self, addr: Poly, v: Node, nbytes: int, storers: int | None = None) -> None:
        """One root per stored element (packed halves and bytes split), keyed by its address."""
        if v.kind == "pack" and v.attrs and isinstance(v.attrs[0], int):
            w = v.attrs[0] // 8
            for k, piece in enumerate(v.kids):
                self.global_store(addr + Poly.const(k * w), piece, w, storers)
            return
        self.roots.append(Root(pointer_param(addr) or "?", nbytes, int_node(addr), v, False, storers))

    # ---- shared memory -----------------------------------------------------------------
    def smem_store(self, kind: str, addr: Node, value: Node, pred: Node | None, nbytes: int) -> None:
        if self.pc:
            # a store under a branch runs only where the path condition holds: it joins the
            # store's predicate, so a proof that reads this slot sees which writers store
            conds = self.pc + ((pred,) if pred is not None else ())
            pred = pc_and(conds)
        self.smem_version += 1
        if self.fwd_bar is not None and self.fwd_bar == self.bars:
            self.fwd_race = True
        if kind == "async":
            if value.kind == "cpasync":
                self.cp_open = True
            else:
                self.tma_loads = True
        if value.kind == "smemwrite":
            self.unmodelled_smem = True
        if not self.smem_war and self.interval_reads:
            for rp, rn, own, rpred in self.interval_reads:
                if self._may_race(addr.poly, nbytes, pred, rp, rn, own, rpred):
                    self.smem_war = True
                    break
        self.smem.append(SmemEntry(kind, addr, value, pred, nbytes, self.epoch, bar=self.bars))

    def block_bits(self) -> int | None:
        """n for a block of 2^n threads in x whose tid.x is the bits tx0 .. tx{n-1}; None
        when not known (the ISA walker says)."""
        return None

    def note_read(self, addr: Poly | None, nbytes: int, own: bool = True) -> None:
        """A shared read (xwarp) made here, under the load's predicate and the path condition:
        kept for the write-after-read check of smem_store."""
        if self.depth:
            self.smem_war = True
        conds = self.pc + ((self.read_pred,) if self.read_pred is not None else ())
        pred = None if not conds else pc_and(conds)
        self.interval_reads.append((addr, nbytes, own, pred))

    def _may_race(
        self,
        sp: Poly | None,
        sn: int,
        spred: Node | None,
        rp: Poly | None,
        rn: int,
        own: bool,
        rpred: Node | None,
    ) -> bool:
        """True unless no writer of this store (its predicate not false) writes a byte that a
        read of the same barrier interval took at another thread (its predicate not false):
        proven by enumerating the block's threads, both addresses one base plus forms over
        thread bits."""
        n = self.block_bits()
        if n is None or sp is None or rp is None or sn <= 0 or rn <= 0:
            return True
        s_split = split_thread_form(sp, n)
        if s_split is None:
            return True
        r_split = split_thread_form(rp, n)
        if r_split is None:
            return True
        (sb, sk, sc), (rb, rk, rc) = s_split, r_split
        if sk != rk:
            return True
        # a function of the thread forms, predicates, sizes and the constants' difference alone
        # (memoised on those: unrolled stores and reads repeat them at other constants)
        sd = spred.digest if spred is not None else None
        rd = rpred.digest if rpred is not None else None
        key = (sb.key(), sd, rb.key(), rd, sn, rn, own, n, sc - rc)
        got = _RACE.get(key)
        if got is None:
            got = _race(_race_side(sb, spred, sd, n), sn, _race_side(rb, rpred, rd, n), rn, own, sc - rc)
            if len(_RACE) > 200_000:
                _RACE.clear()
            _RACE[key] = got
        return got

    def smem_uniform(self, nbytes: int, any_lane_halves: bool = False) -> Node | None:
        """The one coordinate-free tree every store wrote, when there is one.

        Whatever slot a load reads then holds that tree, so a layout conversion through shared
        memory (the usual epilogue of a tensor-core GEMM) adds nothing. Copy-engine writes only
        stage tensor-core operands and are not read by plain loads in a kernel with MMAs.
        """
        first, sizes = self._smem_stores()
        if first is None or nbytes not in sizes or len(sizes) != 1:
            return None
        if any_lane_halves:
            # a transposing read regroups halves: only safe when both halves are one tree
            if not (first.kind == "pack" and len({k.digest for k in first.kids}) == 1):
                return None
        return first

    def _smem_stores(self) -> tuple[Node | None, frozenset[int]]:
        """(the one coordinate-free tree every value store wrote, or None; their sizes), for
        the current shared-memory list; cached on the list itself and its length (the list is
        only ever appended to, and the cache keeps it alive so its identity is not reused)."""
        smem = self.smem
        c = self._uni_cache
        if c is not None and c[0] is smem and c[1] == len(smem):
            return c[2], c[3]
        first: Node | None = None
        sizes: set[int] = set()
        ok = True
        staged = False
        have = False
        for e in smem:
            if e.kind != "st" or _is_staging(e.value):
                staged = True
                continue
            if not have:
                have = True
                first = e.value
                ok = not first.variant
            elif e.value.digest != first.digest:  # type: ignore[union-attr]
                ok = False
            sizes.add(e.nbytes)
        if not have or not ok or (staged and not self.has_mma):
            first = None
        res = (first, frozenset(sizes))
        self._uni_cache = (smem, len(smem), res[0], res[1])
        return res

    def smem_history(self) -> Node:
        key = (self.smem, len(self.smem))
        if (
            self._hist_key is None
            or self._hist_key[0] is not key[0]
            or self._hist_key[1] != key[1]
            or self._hist is None
        ):
            entries = []
            for e in self.smem:
                if e.node is None:
                    # (kind, bytes, epoch, block barriers passed before the store: a store
                    # of a lower count happened before it in every thread, thread_roots.py)
                    e.node = Node(
                        "st",
                        (e.kind, e.nbytes, e.epoch, e.bar),
                        (e.addr, e.value, e.pred if e.pred is not None else TRUE),
                    )
                entries.append(e.node)
            self._hist = Node("hist", (), tuple(entries))
            self._hist_key = key
        return self._hist

    def smem_load(self, addr: Node, nbytes: int) -> Node:
        return self.smem_read(addr, nbytes)[0]

    def smem_read(self, addr: Node, nbytes: int) -> tuple[Node, tuple[int, ...] | None]:
        """The read's node, and the positions in ``smem`` of the stores its history holds when
        that is cut to the ones it may see (None: all of them), for facts that name stores."""
        u = self.smem_uniform(nbytes)
        if u is not None:
            return u, None
        self.note_read(addr.poly, nbytes)
        return self.exchange(addr, nbytes)

    def exchange(self, addr: Node, nbytes: int) -> tuple[Node, tuple[int, ...] | None]:
        """The cross-warp read of ``nbytes`` at every thread's ``addr`` over the stores it may
        see (as smem_read, which notes the read first; ldmatrix notes its own, whose lanes take
        the bytes of rows other lanes name)."""
        seen = self._visible_history(addr, nbytes)
        if seen is not None:
            read, hist, g, kept = seen
            bars = self.read_bars()
            return Node("xwarp", (nbytes, None if bars is None else bars - g), (read, hist)), kept
        return Node("xwarp", (nbytes, self.read_bars()), (addr, self.smem_history())), None

    def _cover(self, nbits: int) -> tuple[dict[int, int], list[list[int] | None]]:
        """(shared byte -> the latest barrier count of a non-loop value store that writes it, with
        a block barrier between it and here; each history entry's offsets per thread, or None),
        cached per history and barrier count. A store counts at the threads where it surely runs:
        all of them when unconditional, else those where its predicate, a form over tid.x bits,
        is true in every block (``tid.x & 3 == 0``: one lane of four stores a row's partial)."""
        from fixbits.checker.launch import thread_truths

        c = self._cover_cache
        if c is not None and c[0] is self.smem and c[1] == len(self.smem) and c[2] == self.bars:
            return c[3], c[4]
        cover: dict[int, int] = {}
        offsets = [thread_offsets(e.addr.poly, nbits) if e.addr.poly is not None else None for e in self.smem]
        for e, offs in zip(self.smem, offsets, strict=True):
            if e.kind != "st" or e.bar >= self.bars or offs is None:
                continue
            if e.pred is not None:
                tv = thread_truths(e.pred, None, nbits)
                if tv is None:
                    continue
                offs = [o for o, t in zip(offs, tv, strict=True) if t is True]
            for o in set(offs):
                for b in range(o, o + e.nbytes):
                    if cover.get(b, -1) < e.bar:
                        cover[b] = e.bar
        self._cover_cache = (self.smem, len(self.smem), self.bars, cover, offsets)
        return cover, offsets

    def _visible_history(self, addr: Node, nbytes: int) -> tuple[Node, Node, int, tuple[int, ...]] | None:
        """(the read's address, the stores it may see, the barrier count both are told from, the
        positions in ``smem`` of those stores), or None to keep the whole history.

        The whole history made configs that read the same partials look different: a deeper
        pipeline adds prologue copies and shifts every later store's barrier count, and puts the
        exchange's scratch further on (gemm_rowsum and gemm_softmax at stages 2 and 3, session
        38). When every byte any thread reads was written, at every thread, by an unconditional
        store outside loops with a block barrier before the read, and g is the least barrier
        count among those latest writers, then a value store before barrier g, and a cp.async
        copy waited before a barrier in (its count, g], is ordered before a later writer of each
        byte it could share with the read: none can be seen, and they are dropped. The rest keep
        their order, with barrier counts told from g; when all of them and the read address the
        window as a form over tid.x bits, their addresses are told from the least offset any of
        them touches (one shift for all keeps which store each byte read comes from)."""
        nbits = self.block_bits()
        if self.depth or nbits is None or addr.poly is None:
            return None
        roffs = thread_offsets(addr.poly, nbits)
        if roffs is None:
            return None
        cover, offsets = self._cover(nbits)
        g: int | None = None
        for o in set(roffs):
            for b in range(o, o + nbytes):
                got = cover.get(b)
                if got is None:
                    return None
                g = got if g is None else min(g, got)
        if g is None:
            return None
        kept = [i for i, e in enumerate(self.smem) if not (e.bar < g and (e.kind == "st" or (
            _is_cpasync(e.value) and any(self.bar_clean[e.bar + 1:g + 1]))))]
        if len(kept) == len(self.smem):
            return None
        shift = 0
        if all(offsets[i] is not None for i in kept):
            shift = min([min(roffs)] + [min(offsets[i]) for i in kept if offsets[i]])  # type: ignore[arg-type]

        def moved(a: Node) -> Node:
            return a if not shift or a.poly is None else int_node(a.poly - Poly.const(shift))

        seen = [self.smem[i] for i in kept]
        e0 = min((e.epoch for e in seen), default=0)
        nodes = tuple(
            Node("st", (e.kind, e.nbytes, e.epoch - e0, e.bar - g),
                 (moved(e.addr), e.value, e.pred if e.pred is not None else TRUE))
            for e in seen
        )
        return moved(addr), Node("hist", ("seen",), nodes), g, tuple(kept)

    def read_bars(self) -> int | None:
        """Block barriers every thread passed before a shared read here (a store of a lower
        count is ordered before the read); None inside a loop (its history holds no store of an
        earlier iteration) and after a barrier inside one."""
        return None if self.loop_bar or self.depth else self.bars

    def barrier(self, block: bool = False) -> None:
        self.smem_version += 1
        self.epoch += 1
        if block:
            self.interval_reads = []
            self.bars += 1
            self.bar_clean.append(not self.cp_open)
            if self.depth:
                self.loop_bar = True

    def cp_wait_all(self) -> None:
        self.cp_open = False


_LEAVES: dict[tuple[str, str | int], Node] = {}


def _leaf(kind: str, attr: str | int) -> Node:
    """A childless node of one str or int attribute, built once (carried registers, states)."""
    key = (kind, attr)
    n = _LEAVES.get(key)
    if n is None:
        if len(_LEAVES) > 100_000:
            _LEAVES.clear()
        n = _LEAVES[key] = Node(kind, (attr,))
    return n


_RACE: dict[tuple, bool] = {}
_RACE_SIDE: dict[tuple, dict[int, list[int]]] = {}


def _race_side(b: Poly, pred: Node | None, pd: bytes | None, n: int) -> dict[int, list[int]]:
    """{value of the thread form: the threads of the block whose predicate is not false}
    (memoised per form and predicate)."""
    from fixbits.checker.forward import eval_all
    from fixbits.checker.launch import thread_truths

    key = (b.key(), pd, n)
    got = _RACE_SIDE.get(key)
    if got is None:
        tv = thread_truths(pred, None, n) if pred is not None else None
        got = {}
        for w, v in enumerate(eval_all(b, n)):
            if tv is None or tv[w] is not False:
                got.setdefault(v, []).append(w)
        if len(_RACE_SIDE) > 50_000:
            _RACE_SIDE.clear()
        _RACE_SIDE[key] = got
    return got


def _race(
    writers: dict[int, list[int]], sn: int, readers: dict[int, list[int]], rn: int, own: bool, d: int
) -> bool:
    """Walk._may_race on the writers and readers by thread-form value, the store's constant
    minus the read's being d."""
    for sv, ws in writers.items():
        for rv in range(sv + d - rn + 1, sv + d + sn):
            rs = readers.get(rv)
            if rs is None:
                continue
            if not own or len(ws) != 1 or rs != ws:
                return True
    return False


def pointer_param(addr: Poly) -> str | None:
    """The pointer parameter an address is taken from (its first parameter term of coefficient 1)."""
    return next(
        (m[0] for m, c in sorted(addr.terms.items()) if len(m) == 1 and m[0].startswith("p:") and c == 1),
        None,
    )


def _is_staging(v: Node) -> bool:
    """A raw copy of global memory (tensor-core operand staging), not a computed value."""
    while v.kind in ("inloop", "masked", "slice", "select") and v.kids:
        v = v.kids[1] if v.kind in ("inloop", "select") else v.kids[0]
    if v.kind == "pack":
        return all(_is_staging(k) for k in v.kids)
    return v.kind in ("load", "cpasync", "opaque")


class LoopSummary:
    """Canonical, register-name-free description of one loop's carried state."""

    def __init__(
        self,
        depth: int,
        init: dict[str, Node],
        upd: dict[str, Node],
        cond: Node,
        carried: set[str],
        kgroup_label: tuple[int, ...] | None = None,
        staged: tuple[Node, ...] = (),
        staged_at: tuple[Node, ...] = (),
        dtoks: dict[str, Node] | None = None,
    ):
        self.depth = depth
        # the values shared memory holds at the loop (its staging) and where each was stored:
        # part of an mmafold's operand key (mma_operands.py), with what the walk's D: tokens
        # stand for (a wgmma descriptor is one, over its tile's shared address)
        self.staged = staged
        self.staged_at = staged_at
        self.dtoks = dtoks or {}
        self.init = init
        self.upd = upd
        self.cond = cond
        self.carried = carried
        self._full_cache: tuple[Node, dict[str, int]] | None = None
        self._single: bool | None = None
        self._refs_memo: dict[bytes, tuple[str, ...]] = {}
        # keys depend only on the carried-register order: many outputs of one loop share it
        self._key_memo: dict[tuple[str, ...], Node] = {}
        self._rename_memo: dict[tuple[bytes, tuple[int, ...]], Node] = {}
        self.kgroup_label = kgroup_label  # (Walk.kgroup_label; None: no k-group folds)
        self.kgroup_used = 0  # the group count, once out() has made a k-group fold
        self._kgroups: dict[str, tuple[int, int, int]] | None = None
        self._chains: dict[str, tuple[tuple[Node, Node], ...]] | None = None
        self._amemo: dict[bytes, Node] = {}
        # the staging's part of the operand key, once per loop: staging order, the staged
        # loads' addresses, which staged value each shared offset holds (mma_operands.py)
        self._staging: (
            tuple[tuple[bytes, ...], dict[tuple[str, ...], set[Poly]], dict[int, set[int]]] | None
        ) = None
        self._okeys: dict[tuple[tuple[Node, Node], ...], str] = {}

    def _refs(self, n: Node) -> tuple[str, ...]:
        """Carried registers ``n`` reads, in first-use order (memoised per node)."""
        got = self._refs_memo.get(n.digest)
        if got is not None:
            return got
        out: list[str] = []
        if n.kind == "carried":
            out.append(str(n.attrs[0]))
        elif n.poly is not None:
            out.extend(s[8:] for s in sorted(n.poly.symbols()) if s.startswith("carried:"))
        else:
            seen: set[str] = set()
            for k in n.kids:
                for r in self._refs(k):
                    if r not in seen:
                        seen.add(r)
                        out.append(r)
        res = tuple(out)
        self._refs_memo[n.digest] = res
        return res

    def closure(self, starts: list[Node], first: str | None = None) -> list[str]:
        order: list[str] = [first] if first else []
        have = set(order)

        def add(rs: tuple[str, ...]) -> None:
            for r in rs:
                if r not in have:
                    have.add(r)
                    order.append(r)

        for s_ in starts:
            add(self._refs(s_))
        add(self._refs(self.cond))
        i = 0
        while i < len(order):
            u = self.upd.get(order[i])
            if u is not None:
                add(self._refs(u))
            i += 1
        return order

    def rename(self, n: Node, names: dict[str, int], memo: dict[bytes, Node]) -> Node:
        d = n.digest
        got = memo.get(d)
        if got is not None:
            return got
        refs = self._refs_memo.get(d)
        if refs is None:
            refs = self._refs(n)
        if not refs:
            memo[d] = n  # reads no carried register: nothing to rename below
            return n
        # the renamed tree depends only on the names of the registers it reads: share it
        # between the keys of one loop
        gkey = (d, tuple([names[r] for r in refs]))
        out = self._rename_memo.get(gkey)
        if out is None:
            if n.kind == "carried":
                out = _leaf("state", names[str(n.attrs[0])])
            elif n.poly is not None:
                p = n.poly
                for s in sorted(p.symbols()):
                    if s.startswith("carried:"):
                        p = p.substitute(s, Poly.sym(f"S{names[s[8:]]}@{self.depth}"))
                out = int_node(p) if p is not n.poly else n
            else:
                rename = self.rename
                kids = tuple([rename(k, names, memo) for k in n.kids])
                out = n
                for a, b in zip(kids, n.kids, strict=True):
                    if a is not b:
                        out = Node(n.kind, n.attrs, kids, n.poly)
                        break
            self._rename_memo[gkey] = out
        memo[d] = out
        return out

    def _full(self) -> tuple[Node, dict[str, int]]:
        """One key over every carried value, ordered by structure (register names break ties)."""
        if self._full_cache is None:
            anon = {r: 0 for r in self.carried}
            memo: dict[bytes, Node] = {}
            color = {
                r: self.rename(self.upd[r], anon, memo).digest if r in self.upd else b"" for r in self.carried
            }
            order = sorted(self.carried, key=lambda r: (color[r], r))
            self._full_cache = (self.key_for([], order=order), {r: i for i, r in enumerate(order)})
        return self._full_cache

    def single_accumulator(self) -> bool:
        """True when every MMA chain of the loop walks the same K sequence.

        Accumulator sets that split the output share, at every step, one operand read from the
        same place with shared memory unchanged in between (an M split shares B, an N split A):
        they multiply the same K slice. "Same K slice" is an equivalence, so it is enough that,
        at every step, the chains are joined by such shared operands (an M x N grid of mma.sync
        tiles: (A0, B0) and (A1, B1) share nothing but both share one with (A0, B1)). Sets that
        are not (k-groups: tile t into accumulator t mod G) regroup the K sum with BLOCK_K and
        keep the chunk in the key. A shared-memory operand is a place, not data, so it only
        counts as shared at one shared-memory version (see Walk.smem_version).
        """
        if self._single is None:
            self._single = _joined_every_step(list(set(self._chain_ops().values())))
        return self._single

    def _chain_ops(self) -> dict[str, tuple[tuple[Node, Node], ...]]:
        """register -> its MMA chain's (A, B) operands, last step first, for every carried
        register an MMA chain updates (memoised; nodes compare by digest)."""
        if self._chains is None:
            self._chains = {}
            for r in self.carried:
                u = self.upd.get(r)
                if u is not None and u.kind == "mma" and _mma_chain(u, r) is not None:
                    cur, ops = u, []
                    while cur.kind == "mma":
                        ops.append((cur.kids[1], cur.kids[2]))
                        cur = cur.kids[0]
                    self._chains[r] = tuple(ops)
        return self._chains

    def kgroups(self) -> dict[str, tuple[int, int, int]]:
        """register -> (G, L, rank) when the loop's MMA chains form G >= 2 k-groups, else {}.

        A group is a set of chains joined by one A or one B operand sequence (the N and M
        splits of one K slice, as single_accumulator); groups share no operand at any step, and
        every chain of every group is L identical MMAs. Read with the single-chain exemption's
        trust (the loop walks K in order, one chunk per chain per iteration): group g sums
        every G-th chunk of L * k_inst, serially. Which group holds which chunk is not read:
        ``rank`` is an order of convenience, and api.py keeps the folds only where relabelling
        leaves the signature as it was.
        """
        if self._kgroups is not None:
            return self._kgroups
        chains = self._chain_ops()
        regs = sorted(chains)
        self._kgroups = {}
        lens = {len(c) for c in chains.values()}
        if len(lens) != 1:
            return self._kgroups
        # chains with one A sequence (an N split) or one B sequence (an M split) walk one K slice
        label = dict(zip(regs, _joined([tuple(tuple(op[side] for op in chains[r]) for side in (0, 1)) for r in regs]),
                         strict=True))
        # and groups must share no operand at any step: else neither one K slice nor two
        owner: dict[Node, int] = {}
        for r in regs:
            g = label[r]
            for op in chains[r]:
                for d in op:
                    if owner.setdefault(d, g) != g:
                        return self._kgroups
        groups: dict[int, list[str]] = {}
        for r in regs:
            groups.setdefault(label[r], []).append(r)
        members = sorted(groups.values())
        if len(members) < 2 or len({len(m) for m in members}) != 1:
            return self._kgroups
        (n,) = lens
        self._kgroups = {r: (len(members), n, rank) for rank, m in enumerate(members) for r in m}
        return self._kgroups

    def full_key(self) -> Node:
        return self._full()[0]

    def _operand_key(self, r: str, chain: tuple) -> str:
        """What register ``r``'s MMA chain (of instruction ``chain``) multiplies and how its loop
        walks K, as configs of one source agree on it (mma_operands.py); memoised per operand
        sequence (the registers of one MMA share it)."""
        from fixbits.checker import mma_operands as mo

        ops = self._chain_ops()[r]
        got = self._okeys.get(ops)
        if got is None:
            if self._staging is None:
                order = mo.staged_order(self.staged, self._amemo)
                owners = mo.tile_owners(self.staged, self.staged_at, order, self._amemo)
                self._staging = (order, mo.load_addresses(self.staged), owners)
            order, loads, owners = self._staging
            flat = [x for ab in ops for x in ab]
            for bases, forms in mo.load_addresses(flat).items():  # (register operands loaded directly)
                loads = {**loads, bases: loads.get(bases, set()) | forms}
            it = iter_symbol(self.depth)
            walks = (*mo.addresses(loads, it, len(ops)), mo.bound(self.cond, it, chain, len(ops)))
            got = mo.operand_key(flat, order, walks, self._amemo, mo.swapped(ops, owners, self.dtoks))
            self._okeys[ops] = got
        return got

    def key_for(self, starts: list[Node], first: str | None = None, order: list[str] | None = None) -> Node:
        if order is None:
            order = self.closure(starts, first)
        ok = tuple(order)
        got = self._key_memo.get(ok)
        if got is not None:
            return got
        names = {r: i for i, r in enumerate(order)}
        memo: dict[bytes, Node] = {}
        slots = []
        for r in order:
            init = self.init.get(r, UNDEF)
            upd = self.upd.get(r, UNDEF)
            slots.append(Node("slot", (), (init, self.rename(upd, names, memo))))
        key = Node("loop", (self.depth,), (self.rename(self.cond, names, memo),) + tuple(slots))
        self._key_memo[ok] = key
        return key

    def out(self, r: str, has_mma: bool) -> Node:
        upd = self.upd[r]
        chain = _mma_chain(upd, r)
        if chain is not None and self.single_accumulator():
            return Node("mmafold", (chain, self._operand_key(r, chain)), (self.init.get(r, UNDEF),))
        kg = self.kgroups().get(r) if chain is not None and self.kgroup_label is not None else None
        if kg is not None:
            g, n, rank = kg
            label = self.kgroup_label[rank] if self.kgroup_label else rank
            self.kgroup_used = g
            # the label is a child, not an attribute: it is what relabelling changes
            return Node(
                "mmafold",
                (chain, "kgroup", g, n, self._operand_key(r, chain)),
                (self.init.get(r, UNDEF), int_node(Poly.const(label))),
            )
        order = self.closure([upd], first=r)
        if len(order) <= 8:
            return Node("loopout", (0,), (self.key_for([upd], order=order),))
        key, index = self._full()
        return Node("loopout", (index[r],), (key,))


def _joined_every_step(seqs: list[tuple[tuple[Node, Node], ...]]) -> bool:
    """True when the (A, B) operand sequences have one length and, at each step, sharing an A
    or a B operand joins all of them into one set."""
    if len({len(x) for x in seqs}) > 1:
        return False
    return all(_one_set(step) for step in zip(*seqs, strict=True))


def _one_set(ops: tuple[tuple[Node, Node], ...]) -> bool:
    """Whether the (A, B) pairs of one step form one set when a shared operand joins two."""
    return len(set(_joined([(a.digest, b.digest) for a, b in ops]))) == 1


def _joined(keys: list[tuple[Hashable, ...]]) -> list[int]:
    """A set label per item: items with an equal key at one position are in one set (union-find)."""
    parent = list(range(len(keys)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for side in range(len(keys[0]) if keys else 0):
        first: dict[Hashable, int] = {}
        for i, k in enumerate(keys):
            parent[find(i)] = find(first.setdefault(k[side], i))
    return [find(i) for i in range(len(keys))]


def _mma_chain(n: Node, reg: str) -> tuple | None:
    """Instruction signature if ``n`` is a chain of identical MMAs ending in carried ``reg``."""
    sig = None
    cur = n
    count = 0
    while cur.kind == "mma":
        s = cur.attrs[0]
        if sig is None:
            sig = s
        elif s != sig:
            return None
        cur = cur.kids[0]
        count += 1
    if count == 0 or cur.kind != "carried" or cur.attrs[0] != reg:
        return None
    return sig


def relativize(
    root_addr: Poly,
    value: Node,
    param_syms: set[str],
    memos: dict[tuple, dict[bytes, Node]] | None = None,
    split: bool | None = None,
    split_at: int | None = None,
) -> tuple[Poly, Node] | None:
    """Rewrite a root in its output's own coordinates when its tree is then free of thread,
    block and iteration symbols; None when it is not (the root then stays physical).

    When the plain rewrite leaves the tree variant, it is tried once more with the byte offset
    split into its block and thread parts (``coord_split.py``: exact, a function of the address;
    at bit ``split_at`` where that split is exact). ``split``: None both in that order, False
    the plain rewrite only, True the split only."""
    got = _relativize(root_addr, value, param_syms, memos, False, None) if split is not True else None
    if got is None and split is not False:
        got = _relativize(root_addr, value, param_syms, memos, True, split_at)
    return got


def _relativize(
    root_addr: Poly,
    value: Node,
    param_syms: set[str],
    memos: dict[tuple, dict[bytes, Node]] | None,
    split: bool,
    split_at: int | None,
) -> tuple[Poly, Node] | None:
    if value.exchange:
        return None
    frame = _frame(root_addr, param_syms, split, split_at)
    if frame is None:
        return None
    rewrite_poly, memo = _rewriter(frame, memos)
    try:
        new_value = _rewrite_tree(value, rewrite_poly, memo)
    except _StillVariant:
        return None
    if new_value.variant:
        return None
    return _frame_address(frame), new_value


def relativize_meets(
    root_addr: Poly,
    value: Node,
    param_syms: set[str],
    memos: dict[tuple, dict[bytes, Node]],
    want: tuple[Poly, Node],
    nodes: set[bytes],
    split_at: int | None = None,
) -> bool:
    """Whether ``relativize(root_addr, value, param_syms, memos)`` is ``want`` (address and
    tree; ``nodes``: the digest of every node of want's tree, ``tree_digests``).

    The same answer, found early when it is no (signature.per_thread's second and later
    threads, whose trees mostly differ from the first's): a rewrite whose frame has another
    address than want's is never want, and a completed rewrite holds every node it built, so
    one built node outside ``nodes`` means that rewrite, if it completes, is not want. Whether
    a rewrite completes matters only where a later one (the split rewrite) has want's address:
    then it is read without building nodes (``_completes``)."""
    if value.exchange:
        return False  # (neither rewrite takes an exchange)
    frames = [_frame(root_addr, param_syms, False), _frame(root_addr, param_syms, True, split_at)]
    hits = [f is not None and _frame_address(f).key() == want[0].key() for f in frames]
    for i, frame in enumerate(frames):
        if frame is None:
            continue  # (this rewrite gives None: relativize tries the next)
        rewrite_poly, memo = _rewriter(frame, memos)
        if hits[i]:
            try:
                return _rewrite_tree(value, rewrite_poly, memo, nodes).digest == want[1].digest
            except _StillVariant:
                continue  # (it gives None: the next rewrite is tried)
            except _Elsewhere:
                pass
        # this rewrite, if it completes, is not want: the next one counts only if it does not
        if not any(hits[i + 1 :]) or _completes(value, rewrite_poly, memo, {}):
            return False
    return False


def tree_digests(n: Node) -> set[bytes]:
    """The digests of every node of ``n`` (relativize_meets' ``nodes``)."""
    out: set[bytes] = set()
    todo = [n]
    while todo:
        x = todo.pop()
        if x.digest not in out:
            out.add(x.digest)
            todo.extend(x.kids)
    return out


def _rewriter(
    frame: _Frame, memos: dict[tuple, dict[bytes, Node]] | None
) -> tuple[Callable[[Poly], Poly], dict[bytes, Node]]:
    """The int-leaf rewrite of one frame and the memo of the trees it rewrote (shared between
    roots of one coordinate frame through ``memos``)."""
    from fixbits.checker.coord_split import split_group

    base, offs, coords, parts = frame

    # a group's rewritten terms, per (invariant part, its terms in order): a function of the
    # coordinates alone, and the leaves of one tree repeat the same few groups
    done: dict[tuple, tuple] = {}

    def rewrite_poly(p: Poly) -> Poly:
        groups: dict[tuple, dict[tuple, int]] = {}
        for mono, c in p.terms.items():
            inv, var = _mono_split(mono)
            g_ = groups.get(inv)
            if g_ is None:
                g_ = groups[inv] = {}
            g_[var] = g_.get(var, 0) + c
        acc: dict[tuple, int] = {}
        for inv, t in groups.items():
            if len(t) == 1 and () in t:
                # no variant symbol in the group: itself (what the product below gives it)
                add_terms(acc, ((_sorted_mono(inv), t[()]),))
                continue
            gkey = (inv, tuple(t.items()))
            items = done.get(gkey)
            if items is None:
                items = done[gkey] = _rewrite_group(inv, t)
            add_terms(acc, items)
        return Poly._of(acc)

    # per coordinate, what each group is compared with (computed once per frame, not per
    # group): its name, its terms, and the same without its constant (c0)
    cinfo = [
        (ck, cp, cp.terms.keys() - {()}, "*".join(ck), cp.const_value())
        for ck, cp in coords.items()
        if parts is None or ck != ()  # (with parts, the byte offset's two parts stand for it)
    ]
    shifted = {ck: cp - Poly.const(c0) for ck, cp, _keys, _name, c0 in cinfo}

    def _rewrite_group(inv: tuple, t: dict[tuple, int]) -> tuple:
        g = Poly(t)
        rep = None
        if parts is not None and inv == () and g.is_variant():
            rep = split_group(g, parts)
        elif g.is_variant():
            gkeys = g.terms.keys() - {()}
            for ck, cp, ckeys, name, c0 in cinfo:
                # (_ratio is None unless both sides have the same monomials: tested first)
                r = _ratio(g, cp) if g.terms.keys() == cp.terms.keys() else None
                if r is not None:
                    num, den = r
                    rep = Poly({(f"OUT[{name}]/{den}",): num})
                    break
                # g = num/den * E + c exactly (a neighbour of the output's own element, or a
                # bound check written as i + 1 <= N)
                if gkeys != ckeys:
                    continue
                g0 = g.const_value()
                r = _ratio(g - Poly.const(g0), shifted[ck])
                if r is not None and (r[0] * c0) % r[1] == 0:
                    num, den = r
                    rep = Poly({(f"OUT[{name}]/{den}",): num}) + Poly.const(g0 - num * c0 // den)
                    break
        if rep is None:
            rep = g
        return tuple((rep if not inv else rep * Poly._of({inv: 1})).terms.items())

    # the rewrite depends only on the coordinates: roots that share them share its memo
    ckey = tuple(sorted((inv, cp.key()) for inv, cp in coords.items()))
    if parts is not None:
        ckey += (("split", parts.k, parts.const),)
    memo = _FrameMemo() if memos is None else memos.setdefault(ckey, _FrameMemo())
    assert isinstance(memo, _FrameMemo)
    unit = coords.get(())
    if memos is not None and parts is None and unit is not None and any(map(is_bit_symbol, unit.symbols())):
        # a subtree free of thread bits never meets the byte-offset coordinate (a group is
        # compared with a coordinate only when both have the same terms, and that one holds
        # thread bits): its rewrite is shared by the frames that differ in that coordinate
        # alone (a row's total rewritten once for every column a thread stores)
        skey = (("lane free",),) + tuple(sorted((inv, cp.key()) for inv, cp in coords.items() if inv != ()))
        memo.shared = memos.setdefault(skey, {})
    return rewrite_poly, memo


class _FrameMemo(dict):
    """A frame's rewrites (digest -> rewritten node), and where set, the memo it shares for
    subtrees free of thread bits (``_lane_free``) with frames that differ only in the byte
    offset."""

    shared: dict[bytes, Node] | None = None


_LANE_FREE: dict[bytes, bool] = {}


def _lane_free(n: Node) -> bool:
    """No thread bit in any int leaf of ``n`` (memoised per digest; bounded like the other
    per-process tables)."""
    got = _LANE_FREE.get(n.digest)
    if got is None:
        if n.poly is not None:
            got = not any(is_bit_symbol(x) for m in n.poly.terms for x in m)
        else:
            got = all(_lane_free(k) for k in n.kids if k.variant)
        if len(_LANE_FREE) > 500_000:
            _LANE_FREE.clear()
        _LANE_FREE[n.digest] = got
    return got


_Frame = tuple[str, dict, dict, "SplitCoord | None"]


def _frame(root_addr: Poly, param_syms: set[str], split: bool, split_at: int | None = None) -> _Frame | None:
    """What a relative root is rewritten over, a function of its address alone: (the pointer
    parameter, the address's terms grouped by their invariant part, the variant groups, and for
    the split rewrite the byte offset's block / thread parts); None when there is none."""
    from fixbits.checker.coord_split import split_coordinate

    base = None
    offs: dict[tuple, dict[tuple, int]] = {}
    for mono, c in root_addr.terms.items():
        if len(mono) == 1 and mono[0] in param_syms and c == 1 and base is None:
            base = mono[0]
            continue
        inv, var = _mono_split(mono)
        offs.setdefault(inv, {})
        offs[inv][var] = offs[inv].get(var, 0) + c
    if base is None:
        return None
    coords = {inv: Poly(t) for inv, t in offs.items() if Poly(t).is_variant()}
    if not coords:
        return None
    # split: the byte offset's coordinate as (block part, thread part, k), or no second try
    parts = split_coordinate(coords[()], split_at) if split and () in coords else None
    if split and parts is None:
        return None
    return base, offs, coords, parts


def _frame_address(frame: _Frame) -> Poly:
    base, offs, coords, parts = frame
    addr = Poly.sym(base)
    for ck in coords:
        if parts is not None and ck == ():
            addr = addr + Poly.sym(parts.names[0] + "/1") + Poly.sym(parts.names[1] + "/1")
            continue
        addr = addr + Poly.sym(f"OUT[{'*'.join(ck)}]/1") * Poly({ck: 1})
    for inv, t in offs.items():
        g = Poly(t)
        if not g.is_variant():
            addr = addr + g * Poly({inv: 1})
    return addr


def relative_addresses(root_addr: Poly, param_syms: set[str], split_at: int | None = None) -> set[tuple]:
    """The keys of the addresses ``relativize(root_addr, v, param_syms, split_at=split_at)`` may
    return, whatever ``v``: the plain and the split rewrite's (the address never depends on the
    value)."""
    out = set()
    for split in (False, True):
        frame = _frame(root_addr, param_syms, split, split_at)
        if frame is not None:
            out.add(_frame_address(frame).key())
    return out


@functools.lru_cache(maxsize=200_000)
def _mono_split(mono: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(its invariant symbols, its variant symbols) of a monomial, each in its order
    (memoised: relativize meets the same monomials in every leaf). An opaque block-invariant
    token (``Ti:``, a tile count such as cdiv(N, BLOCK_N) in a grouped tile order) that
    multiplies a variant symbol goes with it: it is part of which element a thread stores,
    a host fact the relative form never holds (as a block token's value is); alone it stays
    an invariant offset."""
    if not any(is_variant_symbol(s) for s in mono):
        return mono, ()
    return (
        tuple(s for s in mono if not is_variant_symbol(s) and not s.startswith("Ti:")),
        tuple(s for s in mono if is_variant_symbol(s) or s.startswith("Ti:")),
    )


@functools.lru_cache(maxsize=200_000)
def _sorted_mono(m: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(sorted(m))


class _StillVariant(Exception):
    """A rewritten subtree is still variant: so is every tree above it (relativize fails)."""


class _Elsewhere(Exception):
    """A rewritten subtree is no node of the tree it must meet (relativize_meets)."""


def _rewrite_tree(
    n: Node, rewrite_poly: Callable[[Poly], Poly], memo: dict[bytes, Node], within: set[bytes] | None = None
) -> Node:
    """``n`` with every int leaf rewritten by ``rewrite_poly`` (relativize). A module function,
    not a closure: a recursive closure holds itself through its cell, and each root left that
    cycle (with the memo it reaches) for the cyclic collector.

    Raises _StillVariant at the first rewritten subtree that is still variant (a node is
    variant when a child is, so the whole rewrite would be: relativize gives up); the memo
    keeps only finished rewrites, that one included. With ``within``, raises _Elsewhere at the
    first rewritten subtree (not variant) whose digest is not in it."""
    if not n.variant:
        if within is not None and n.digest not in within:
            raise _Elsewhere
        return n  # no thread, block or iteration symbol below: rewrite_poly changes nothing
    got = memo.get(n.digest)
    shared = getattr(memo, "shared", None)
    if got is None and shared is not None and _lane_free(n):
        got = shared.get(n.digest)
        if got is not None:
            memo[n.digest] = got
    else:
        shared = None
    if got is not None:
        if got.variant:
            raise _StillVariant
        if within is not None and got.digest not in within:
            raise _Elsewhere
        return got
    if n.poly is not None:
        out = int_node(rewrite_poly(n.poly))
    elif not n.kids:
        out = n
    elif within is None:
        # (an invariant child is itself: _rewrite_tree's first test, inline)
        out = Node(
            n.kind, n.attrs, tuple([_rewrite_tree(k, rewrite_poly, memo) if k.variant else k for k in n.kids])
        )
    else:
        # (an ixform's or a set's kids are checked once normalised: the constant normal_ixform
        # or normal_set moves leaves a rewritten index that no finished tree holds)
        w = None if n.kind in ("ixform", "selset") else within
        out = Node(n.kind, n.attrs, tuple([_rewrite_tree(k, rewrite_poly, memo, w) for k in n.kids]))
    if out.kind == "ixform":
        out = normal_ixform(out)  # (the rewrite may give the row start a constant)
    elif out.kind == "selset":
        out = normal_set(out)  # (and a set's index base)
    memo[n.digest] = out
    if shared is not None:
        shared[n.digest] = out
    if out.variant:
        raise _StillVariant
    if within is not None and out.digest not in within:
        raise _Elsewhere
    return out


def _completes(
    n: Node, rewrite_poly: Callable[[Poly], Poly], memo: dict[bytes, Node], seen: dict[bytes, bool]
) -> bool:
    """Whether ``_rewrite_tree(n, rewrite_poly, memo)`` returns (no rewritten subtree variant),
    without building the rewritten nodes: a rewritten node is variant when its kind is
    (node._VARIANT_KINDS), an int leaf's rewritten form is, or a rewritten child is."""
    if not n.variant:
        return True
    got = memo.get(n.digest)
    if got is not None:
        return not got.variant
    ok = seen.get(n.digest)
    if ok is not None:
        return ok
    if n.poly is not None:
        ok = not rewrite_poly(n.poly).is_variant()
    elif not n.kids or n.kind in _VARIANT_KINDS:
        ok = False  # (a variant leaf is kept as it is; a variant kind stays variant)
    else:
        ok = all(_completes(k, rewrite_poly, memo, seen) for k in n.kids)
    seen[n.digest] = ok
    return ok


def _ratio(g: Poly, c: Poly) -> tuple[int, int] | None:
    """(num, den) with g = num/den * c exactly, or None."""
    if set(g.terms) != set(c.terms) or not c.terms:
        return None
    m0 = next(iter(c.terms))
    num, den = g.terms[m0], c.terms[m0]
    for m, v in c.terms.items():
        if g.terms[m] * den != v * num:
            return None
    from math import gcd

    k = gcd(num, den)
    return num // k, den // k


Describe = Callable[[Node], str]
