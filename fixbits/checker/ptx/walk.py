"""Transfer functions of PTX instructions over the symbolic thread (paper §6.1).

Every instruction either has a modelled meaning here or becomes an opaque node over its operand
nodes, keyed on its opcode text; an unmodelled instruction that may write memory is also kept as
an effect in the signature, so that it can only ever split two kernels.
"""

from __future__ import annotations

import hashlib
import re

from fixbits.checker import dtokens
from fixbits.checker import forward as fwd
from fixbits.checker.forms import (
    Poly,
    exact_and,
    exact_bfe,
    exact_or,
    exact_shr,
    is_bit_symbol,
    token,
)
from fixbits.checker.forward import bit_op
from fixbits.checker.launch import pred_truth, thread_truths
from fixbits.checker.node import Node, Root, const_bits, int_node, opaque
from fixbits.checker.pads import RN_F32, is_bit_move, is_zero, mk_fadd, mk_ffma, zero_result
from fixbits.checker.ptx.parse import Entry, Inst, split_args
from fixbits.checker.signs import ReadFacts, SignFacts
from fixbits.checker.thread_roots import POINTWISE
from fixbits.checker.walk import (
    TRUE,
    UNDEF,
    SmemEntry,
    Unsupported,
    Walk,
    const_pred,
    icmp,
    mk_not,
    mk_pred_join,
    mk_select,
    pointer_param,
    pred_is_coordinate,
    thread_offsets,
    to_poly,
)

_INT_TYPES = re.compile(r"^[sub](8|16|32|64)$")
_FLOAT_TYPES = {"f16", "f32", "f64", "bf16", "f16x2", "bf16x2", "tf32", "e4m3", "e5m2", "e4m3x2", "e5m2x2"}
_TYPE_BITS = {
    "b8": 8, "u8": 8, "s8": 8, "b16": 16, "u16": 16, "s16": 16, "f16": 16, "bf16": 16,
    "b32": 32, "u32": 32, "s32": 32, "f32": 32, "f16x2": 32, "bf16x2": 32, "b64": 64, "u64": 64,
    "s64": 64, "f64": 64, "b128": 128, "pred": 1,
}  # fmt: skip
# Instructions that order or stage work but carry no value of their own.
_HARMLESS = (
    "bar.", "barrier.", "fence", "membar", "wgmma.fence", "wgmma.commit_group", "wgmma.wait_group",
    "cp.async.commit_group", "cp.async.wait_group", "cp.async.wait_all", "cp.async.bulk.commit_group",
    "cp.async.bulk.wait_group", "mbarrier.", "prefetch", "griddepcontrol", "nanosleep", "setmaxnreg",
    "elect.sync", "fence.proxy", "tcgen05.fence", "tcgen05.wait", "tcgen05.commit", "discard",
    "applypriority", "cp.async.mbarrier", "pmevent", "bar.warp.sync",
)  # fmt: skip
# tensormap.replace .elemtype codes -> element bytes (PTX ISA, tensormap.replace)
_TMAP_ELEM_BYTES = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 4, 9: 8, 10: 2, 11: 4, 12: 4}
# tensormap.replace .swizzle_mode codes -> bytes a swizzle pattern permutes within (0: none)
_TMAP_SWIZZLE_SPAN = {0: 0, 1: 32, 2: 64, 3: 128}
_BLOCK_BARRIERS = ("bar.sync", "barrier.sync", "barrier.sync.aligned")
_SMEM_WAITS = ("cp.async.wait", "cp.async.bulk.wait", "mbarrier.try_wait", "mbarrier.test_wait", "mbarrier.wait",
               "fence.proxy", "cp.async.mbarrier")  # fmt: skip
# per-thread operations a stored element's masked load is sought through (PTXWalk._unmask)
_UNMASK_THROUGH = frozenset({"sub", "mul", "div", "fma", "ex2", "lg2", "cvt", "neg", "abs", "canon", "sqrt",
                             "rsqrt", "rcp", "pack", "slice"})  # fmt: skip
_FLOAT_OPS = {"add", "sub", "mul", "fma", "mad", "min", "max", "neg", "abs", "div", "rcp", "sqrt",
              "rsqrt", "ex2", "lg2", "sin", "cos", "tanh", "copysign", "testp", "cvt"}  # fmt: skip
_SPECIAL_RE = re.compile(r"^%(tid|ntid|ctaid|nctaid|laneid|warpid|nwarpid|clusterid|nclusterid|cluster_ctaid|"
                         r"cluster_nctaid|smid|nsmid|clock|clock64|globaltimer|lanemask_\w+|dynamic_smem_size|"
                         r"total_smem_size|envreg\d+|cluster_ctarank|cluster_nctarank|is_explicit_cluster)(?:\.(\w))?$")  # fmt: skip
_ADDR_RE = re.compile(r"^\[\s*([^\]+\-]+?)\s*(?:([+-])\s*(-?(?:0x[0-9a-fA-F]+|\d+)))?\s*\]$")


def _imm(s: str) -> tuple[int, int] | None:
    """(value, width) of an immediate operand, None if it is not one."""
    s = s.strip()
    try:
        if s.startswith(("0f", "0F")) and len(s) == 10:
            return int(s[2:], 16), 32
        if s.startswith(("0d", "0D")) and len(s) == 18:
            return int(s[2:], 16), 64
        if re.fullmatch(r"-?0[xX][0-9a-fA-F]+U?", s):
            return int(s.rstrip("U"), 16), 0
        if re.fullmatch(r"-?\d+U?", s):
            return int(s.rstrip("U")), 0
    except ValueError:
        return None
    return None


# opcode -> (its dot-separated parts, its harmless class): a function of the opcode text, which
# repeats within and between files (the parts list is shared: handlers only read it)
_OP_DECODE: dict[str, tuple[list[str], str | None]] = {}


def _decode_op(op: str) -> tuple[list[str], str | None]:
    parts = op.split(".")
    harmless: str | None = None
    if op.startswith(_HARMLESS):
        if parts[0] in ("bar", "barrier") or op.startswith("bar.warp"):
            harmless = "barrier"
        elif op.startswith(_SMEM_WAITS):
            harmless = "wait"
        else:
            harmless = "none"
    if len(_OP_DECODE) > 50_000:
        _OP_DECODE.clear()
    got = _OP_DECODE[op] = (parts, harmless)
    return got


def _bare_canon(hist: Node) -> Node | None:
    """A shared-memory history whose every entry is an aligned 4-byte store of ``canon(v)``, with
    each stored value as the bare ``v``; None when any entry is not (the read stays as it is)."""
    if not hist.kids or any(
        e.kind != "st" or e.attrs[:2] != ("st", 4) or e.kids[1].kind != "canon" for e in hist.kids
    ):
        return None
    return Node("hist", (), tuple(Node("st", e.attrs, (e.kids[0], e.kids[1].kids[0], e.kids[2])) for e in hist.kids))


class PTXWalk(Walk):
    def __init__(self, entry: Entry, has_mma: bool):
        super().__init__()
        self.entry = entry
        self.insts = entry.insts
        self.has_mma = has_mma
        self.params = {p: f"p:{i}" for i, p in enumerate(entry.params)}
        self.ntid = entry.reqntid
        self.special: dict[str, Poly] = {}
        self._vcache: dict[tuple[str, int], Node | str] = {}
        self.smem_decls: int | None = None  # shared-memory declarations of the module (api sets it)
        self._fwd_cache: tuple | None = None
        self._fwd_env_cache: list[dict[str, int]] | None = None
        self._fwd_memo: dict[bytes, bool] = {}
        self._fwd_memo_shfl: dict[bytes, bool] = {}
        self._fwd_reads: dict[tuple, Node | None] = {}  # (generation key, addresses, bytes, shfl) -> read
        self._fwd_leaves: dict[tuple, Node | None] = {}  # forward.interpolate's int leaves
        self._fwd_gen_keys: dict[int, tuple[list[SmemEntry], bytes]] = {}
        # device-side TMA descriptors: fields per shared-memory template and per global copy
        self.tmap_tpl: dict[tuple, dict[tuple[str, int | None], Node]] = {}
        self.tmaps: dict[tuple, dict[tuple[str, int | None], Node]] = {}
        self.tmap_in_loop = False
        # launch specialisation (launch.py; api sets it): integer parameters taken as constants
        self.spec: dict[str, int] = {}
        self.grid: tuple[int, int, int] | None = None
        # sign facts for the root's canon (signs.py): threads where a masked load's predicate is
        # false, and what each shared read may see; keyed by node digest, a conflict keeps less
        self.masked_false: dict[bytes, int] = {}
        # and the predicate of each masked load (None where one node met two predicates)
        self.masked_preds: dict[bytes, Node | None] = {}
        self._canon_in: dict[bytes, bool] = {}
        self.read_facts: dict[bytes, ReadFacts | None] = {}
        # shfl nodes by digest: True while every write of one was unpredicated and outside any
        # branch or loop (the register then holds lane t ^ b's value at every thread), False once not
        self.plain_shfl: dict[bytes, bool] = {}
        self._decode()
        for d, n in zip("xyz", self.ntid or (0, 0, 0), strict=False):
            if self.ntid is None:
                self.special[f"tid.{d}"] = Poly.sym(f"tid.{d}")
            elif n == 1:
                self.special[f"tid.{d}"] = Poly.const(0)
            elif n & (n - 1) == 0:
                self.special[f"tid.{d}"] = Poly.bits(f"t{d}", n.bit_length() - 1)
            else:
                self.special[f"tid.{d}"] = Poly.sym(f"tid.{d}")
            if self.ntid is not None:
                self.special[f"ntid.{d}"] = Poly.const(n)
        if self.ntid and self.ntid[1] == self.ntid[2] == 1 and self.ntid[0] % 32 == 0:
            self.special["laneid"] = Poly.bits("tx", 5)

    # ---- hooks for the generic walk ------------------------------------------------------
    def insts_len(self) -> int:
        return len(self.insts)

    def label_at(self, i: int) -> str | None:
        return self._labels[i]

    def branch_target(self, i: int) -> str | None:
        tgt = self._targets[i]
        if tgt is not None and tgt[0] == "!":
            raise Unsupported(f"{tgt[1:]} is not modelled")
        return tgt

    def _decode(self) -> None:
        """Labels, branch targets and split opcodes of every instruction, once per walk (the
        walk visits a loop body twice and nested bodies more often)."""
        self._labels: list[str | None] = []
        self._targets: list[str | None] = []
        self._parts: list[list[str]] = []
        self._harmless: list[str | None] = []
        for ins in self.insts:
            op = ins.op
            got = _OP_DECODE.get(op)
            if got is None:
                got = _decode_op(op)
            parts, harmless = got
            self._parts.append(parts)
            self._harmless.append(harmless)
            self._labels.append(op[1:] if op.startswith(":") else None)
            if parts[0] == "bra" and ins.args:
                self._targets.append(ins.args[0].strip())
            elif parts[0] in ("brx", "call"):
                self._targets.append("!" + op)
            else:
                self._targets.append(None)

    def branch_at(self, i: int) -> tuple[str, Node | None] | None:
        tgt = self._targets[i]
        if tgt is None:
            return None
        if tgt[0] == "!":
            raise Unsupported(f"{tgt[1:]} is not modelled")
        ins = self.insts[i]
        if ins.pred is None:
            return tgt, None
        p = self.get(ins.pred)
        return tgt, (mk_not(p) if ins.neg else p)

    def is_return(self, i: int) -> bool:
        ins = self.insts[i]
        if ins.op in ("ret", "exit", "ret.uni", "trap"):
            if ins.pred is not None:
                raise Unsupported("predicated return")
            return True
        return False

    def written_regs(self, lo: int, hi: int) -> set[str]:
        out: set[str] = set()
        for ins in self.insts[lo:hi]:
            if ins.op.startswith(":") or not ins.args:
                continue
            base = ins.op.split(".")[0]
            if base in (
                "st",
                "red",
                "bra",
                "bar",
                "barrier",
                "cp",
                "prefetch",
                "stmatrix",
                "fence",
                "mbarrier",
            ):
                if base == "mbarrier" and ins.args[0].startswith("%"):
                    out.update(_regs(ins.args[0]))
                continue
            if ins.op.startswith(("tcgen05.mma", "tcgen05.st", "tcgen05.cp", "tcgen05.commit")):
                continue
            first = ins.args[0]
            if first.startswith("%") or first.startswith("{"):
                out.update(_regs(first))
            if base == "setp" and "|" in first:
                out.update(r.strip() for r in first.split("|"))
            if base == "shfl" and "|" in first:
                out.update(r.strip() for r in first.split("|"))
            if ins.op.startswith("tcgen05.ld"):
                out.update(_regs(first))
        return out

    # ---- operands --------------------------------------------------------------------------
    def val(self, a: str, width: int = 32) -> Node:
        """The node of an operand; plain registers and side-effect-free constants are classified
        once per operand text (the walk meets the same operands over and over)."""
        got = self._vcache.get((a, width))
        if got is not None:
            return self.get(got) if type(got) is str else got
        n = self._val(a, width)
        s = a.strip()
        if s.startswith("%") and not _SPECIAL_RE.match(s):
            self._vcache[(a, width)] = s
        elif not s.startswith("{") and not self.nondeterministic:
            self._vcache[(a, width)] = n
        return n

    def _val(self, a: str, width: int = 32) -> Node:
        a = a.strip()
        if a.startswith("%"):
            m = _SPECIAL_RE.match(a)
            if m:
                name = m.group(1) + (f".{m.group(2)}" if m.group(2) else "")
                if name in self.special:
                    return int_node(self.special[name])
                if m.group(1) in ("ctaid", "nctaid"):
                    return int_node(Poly.sym(name))
                if m.group(1) in ("clock", "clock64", "globaltimer", "smid", "warpid"):
                    self.nondeterministic = True
                return int_node(token("special", (name,), True))
            return self.get(a)
        im = _imm(a)
        if im is not None:
            v, w = im
            return const_bits(v, w or width) if w else int_node(Poly.const(v))
        if a.startswith("{"):
            return Node("pack", ("vec",), tuple(self.val(x) for x in split_args(a[1:-1])))
        if a in self.params:
            return int_node(self._param(a))
        if re.fullmatch(r"[A-Za-z_$][\w$]*", a):
            return int_node(Poly.sym("smem" if "smem" in a or "shared" in a else f"sym:{a}"))
        return opaque("operand:" + a)

    def addr(self, a: str) -> Poly:
        m = _ADDR_RE.match(a.strip())
        if not m:
            raise Unsupported(f"address {a!r}")
        base = m.group(1).strip()
        off = int(m.group(3), 0) if m.group(3) else 0
        if m.group(2) == "-":
            off = -off
        if base in self.params:
            return self._param(base) + Poly.const(off)
        return self._ipoly(self.val(base, 64)) + Poly.const(off)

    def _param(self, name: str) -> Poly:
        """A parameter's symbol, or its value under a launch specialisation."""
        v = self.spec.get(name)
        return Poly.sym(self.params[name]) if v is None else Poly.const(v)

    def _warp_is_block(self, op: str, args: list[str]) -> bool:
        """``bar.warp.sync`` over the full lane mask in a block of exactly one warp: every thread
        of the block takes part, and the PTX memory model orders the memory accesses of the
        threads that take part in it, so it is a block barrier there. (In a larger block it
        orders one warp only and stays a plain instruction.)"""
        return op == "bar.warp.sync" and self.ntid == (32, 1, 1) and args in (["-1"], ["0xffffffff"], ["0xFFFFFFFF"])

    def block_bits(self) -> int | None:
        nt = self.ntid
        if nt is None or nt[1] != 1 or nt[2] != 1 or nt[0] < 1 or nt[0] & (nt[0] - 1):
            return None
        n = nt[0].bit_length() - 1
        return n if n <= fwd.MAX_BITS else None

    # ---- sign facts (launch-specialised walks only; signs.py) ------------------------------
    def _thread_bits(self) -> int | None:
        """n for a block of 2^n threads in x (32 <= 2^n <= 1024: whole warps), else None."""
        nt = self.ntid
        if nt is None or nt[1] != 1 or nt[2] != 1 or not 32 <= nt[0] <= 1024 or nt[0] & (nt[0] - 1):
            return None
        return nt[0].bit_length() - 1

    def _note_masked(self, node: Node, p: Node) -> None:
        """Record the threads where a masked load's predicate is false in every block."""
        nb = self._thread_bits()
        tv = thread_truths(p, self.grid, nb) if nb is not None else None
        f = 0 if tv is None else sum(1 << t for t, v in enumerate(tv) if v is False)
        self._merge_masked(node.digest, f, p)

    def _merge_masked(self, digest: bytes, f: int, p: Node | None) -> None:
        """One node met again: false threads are those false for both, and a second predicate
        that is not the first leaves none."""
        prev = self.masked_false.get(digest)
        self.masked_false[digest] = f if prev is None else prev & f
        had = self.masked_preds.get(digest, p)
        self.masked_preds[digest] = p if p is not None and had is not None and had.digest == p.digest else None

    def slice_of(self, v: Node, off: int, width: int) -> Node:
        """``mk_slice``, with a masked load's launch facts (masked_false, masked_preds) carried
        to the masked load of the slice: the same instruction, the same predicate."""
        out = mk_slice(v, off, width)
        if self.spec and v.kind == "masked" and out.kind == "masked" and v.digest in self.masked_preds:
            self._merge_masked(out.digest, self.masked_false.get(v.digest, 0), self.masked_preds[v.digest])
        return out

    def _note_read(self, node: Node, facts: ReadFacts | None) -> None:
        if node.digest in self.read_facts and self.read_facts[node.digest] != facts:
            facts = None  # one node, two reads that may see different things: keep neither
        self.read_facts[node.digest] = facts

    def smem_load(self, addr: Node, nbytes: int) -> Node:
        """The base read; specialised, its sign facts are recorded, and when every store of its
        history stored ``canon(v)`` and every reader's bytes are proven written (one aligned
        4-byte store each), the read is ``canon`` of the same read over the stored ``v``: the
        bytes a thread reads are one writer's canon(v), i.e. canon of what that writer's v is."""
        v, kept = self.smem_read(addr, nbytes)
        if not self.spec or v.kind != "xwarp":
            return v
        facts = self._read_facts(addr, nbytes)
        if facts is not None and kept is not None:
            facts = facts.renumbered(kept)
        self._note_read(v, facts)
        bare = _bare_canon(v.kids[1]) if facts is not None and facts.covered() else None
        if bare is None:
            return v
        x = Node("xwarp", v.attrs, (v.kids[0], bare))  # (the read's address as the cut tells it)
        self._note_read(x, facts)
        return Node("canon", (), (x,))

    def _lift_ldmatrix(
        self, ins: Inst, parts: list[str], a: Poly, k: int, hist: Node, kept: tuple[int, ...] | None
    ) -> Node:
        """Register k of a non-forwarded ``ldmatrix .m8n8 .b16`` (not transposed), specialised:
        lane i of a warp takes the 4 bytes at the row address lane 8k + i/4 names, plus 4 (i mod
        4) (as forward_ldmatrix): a 4-byte read per thread, so its sign facts are recorded and a
        history of canon(v) stores is read as canon of the read over the bare v, as smem_load
        does for ``ld.shared``."""
        v = Node("ldmatrix", (ins.op, k), (hist,))
        cnt = next((int(p[1:]) for p in parts if p in ("x1", "x2", "x4")), None)
        nb = self._thread_bits()
        if (
            "trans" in parts
            or "m8n8" not in parts
            or "b16" not in parts
            or cnt is None
            or nb is None
            or ins.pred is not None
        ):
            return v
        rows = _word_offsets(a, nb)
        if rows is None:
            return v
        roffs = [rows[(t & ~31) | (8 * k + ((t & 31) >> 2))] + 4 * (t & 3) for t in range(1 << nb)]
        facts = self._read_facts(int_node(a), 4, roffs)
        if facts is not None and kept is not None:
            facts = facts.renumbered(kept)
        self._note_read(v, facts)
        bare = _bare_canon(hist.kids[1]) if facts is not None and facts.covered() else None
        if bare is None:
            return v
        x = Node("ldmatrix", (ins.op, k), (Node("xwarp", hist.attrs, (hist.kids[0], bare)),))
        self._note_read(x, facts)
        return Node("canon", (), (x,))

    def _read_facts(self, addr: Node, nbytes: int, roffs: list[int] | None = None) -> ReadFacts | None:
        """Per reader thread, the (store, writer) pairs that may have written its 4 bytes last
        (signs.ReadFacts), by enumerating the block's threads; None when out of scope: a read or
        store not 4 bytes at a 4-aligned offset of the one shared window that is a function of
        tid.x, a store predicate not decided per thread, copy-engine or unmodelled writes, a read
        inside a loop or under a branch."""
        nb = self._thread_bits()
        if (
            nb is None
            or nbytes != 4
            or self.smem_decls != 1
            or self.unmodelled_smem
            or self.tma_loads
            or self.depth
            or self.pc
            or addr.poly is None
        ):
            return None
        if roffs is None:
            roffs = _word_offsets(addr.poly, nb)  # (given: the offset each thread reads)
        if roffs is None:
            return None
        size = 1 << nb
        # slot -> [(store index, writer, barriers passed before the store)]
        writers: dict[int, list[tuple[int, int, int]]] = {}
        for j, e in enumerate(self.smem):
            if e.kind != "st" or e.nbytes != 4 or e.addr.poly is None:
                return None
            offs = _word_offsets(e.addr.poly, nb)
            if offs is None:
                return None
            tv = [True] * size if e.pred is None else fwd.truth_all(e.pred, nb)
            if tv is None:
                return None
            for w in range(size):
                if tv[w]:
                    writers.setdefault(offs[w], []).append((j, w, e.bar))
        cands: list[tuple[tuple[int, int], ...] | None] = []
        for t in range(size):
            ws = writers.get(roffs[t], [])
            done = [b for _, _, b in ws if b < self.bars]  # a block barrier lies between it and the read
            if not done:
                cands.append(None)
                continue
            latest = max(done)  # earlier generations are overwritten by it
            cands.append(tuple((j, w) for j, w, b in ws if b >= latest))
        return ReadFacts(tuple(cands))

    def _storers(self, pred: Node | None) -> int | None:
        """The threads of the block that may run a global store under ``pred`` (a coordinate
        predicate or none): every thread but those where it is false in every block of the
        launch (``thread_truths``). None outside launch-specialised walks of whole-warp blocks.
        0 means the store writes no byte (a tile wider than the row: its columns past N) and
        leaves no root; otherwise a ``canon`` in the stored value is dropped where the sign facts
        prove it the value itself at every storer (``_uncanon``)."""
        nb = self._thread_bits()
        if not self.spec or nb is None:
            return None
        tv = thread_truths(pred, self.grid, nb) if pred is not None else None
        if tv is None:
            return (1 << (1 << nb)) - 1
        return sum(1 << t for t, b in enumerate(tv) if b is not False)

    def _unmask(self, v: Node, storing: int, memo: dict[bytes, Node]) -> Node:
        """A masked load in a stored value written as the load where its predicate holds at every
        thread that may store it (``thread_truths``: True in every block of the launch): there the
        register holds the load, and a thread that does not store writes no byte. Likewise a
        select over coordinates is the arm its predicate picks at every such thread. Sought through
        the stored element's own per-thread arithmetic (_UNMASK_THROUGH: each a function of its
        operands at this thread) and not through sums, exchanges or loops, so a reduction every
        root shares keeps one tree."""
        got = memo.get(v.digest)
        if got is not None:
            return got
        out = v
        if v.kind == "masked" and len(v.kids) == 2:
            p = self.masked_preds.get(v.digest)
            nb = self._thread_bits()
            tv = thread_truths(p, self.grid, nb) if p is not None and nb is not None else None
            if tv is not None and all(tv[t] is True for t in range(len(tv)) if storing >> t & 1):
                out = v.kids[0]
        elif v.kind == "select" and len(v.kids) == 3 and pred_is_coordinate(v.kids[0]):
            # a where() over the store's own mask: at every thread that may store, the arm its
            # predicate picks there (both arms' operands are this thread's)
            nb = self._thread_bits()
            tv = thread_truths(v.kids[0], self.grid, nb) if nb is not None else None
            if tv is not None:
                picks = {tv[t] for t in range(len(tv)) if storing >> t & 1}
                if picks == {True}:
                    out = self._unmask(v.kids[1], storing, memo)
                elif picks == {False}:
                    out = self._unmask(v.kids[2], storing, memo)
        elif v.kind in _UNMASK_THROUGH and v.kids:
            kids = tuple(self._unmask(k, storing, memo) for k in v.kids)
            if any(a is not b for a, b in zip(kids, v.kids, strict=True)):
                out = Node(v.kind, v.attrs, kids)
        memo[v.digest] = out
        return out

    def _holds_canon(self, v: Node) -> bool:
        """Some node of v's tree is a ``canon`` marker (memoised on the digest: a pure function)."""
        got = self._canon_in.get(v.digest)
        if got is None:
            got = self._canon_in[v.digest] = v.kind == "canon" or any(self._holds_canon(k) for k in v.kids)
        return got

    def _uncanon(self, v: Node, storing: int, facts: SignFacts) -> Node:
        """A ``canon(x)`` in a stored value is written ``x`` when at every thread that may store,
        x is provably neither -0 nor a non-canonical NaN (signs.py): there canon(x) has x's bits,
        and a thread that does not store writes no byte. The marker is sought at the root and
        through per-thread operations (thread_roots.POINTWISE: their value at a thread is a
        function of their operands' values at that thread, so an operand replaced by one with the
        same bits at every storing thread leaves the result's bits there unchanged) and both
        value arms of a ``select``.

        ``storing`` is a set of threads outside which the node's value is never stored. A
        ``select(p, a, b)`` stores a's bits at the storing threads where p holds and b's where it
        does not. With ``thread_truths(p)`` (per thread: True / False in every block of the
        launch, None undecided) the 'then' arm is proven over the storing threads where p is not
        provably False, the 'else' arm over those where p is not provably True (undecided threads
        go to both; an undecided predicate gives each arm every storing thread). Soundness: take
        a thread t that stores and an arm, say a, that t's select takes. Then p holds at t in t's
        block, so thread_truths(p)[t] is not False (False means p is false at t in every block),
        so t is in a's set, and a's canon is dropped only if canon(x) = x at t. Threads outside
        an arm's set never store that arm's value, so what the arm is there is never written.
        The select's p is evaluated at the thread whose value it is: the storing thread, or,
        under a shuffle, the source lane (below), whose set is moved with it.

        A whole-warp bit move ``shfl.sync.bfly x, b, 31, -1`` (``is_bit_move``, blocks of whole
        warps, every write of the node unpredicated, outside branches and loops) is x of thread t ^ b
        at thread t; so x is proven over {t ^ b : t in storing}: where x's canon is dropped
        only at threads whose x no storing thread receives, or where canon(x) = x, the shuffle
        of the new x equals the old one at every storing thread."""
        if not self._holds_canon(v):
            return v
        if v.kind == "canon":
            x = v.kids[0]
            return v if storing & ~facts.canon_fixed(x) else x
        if v.kind in POINTWISE and v.kids:
            kids = tuple(self._uncanon(k, storing, facts) for k in v.kids)
            if all(k is o for k, o in zip(kids, v.kids, strict=True)):
                return v
            return Node(v.kind, v.attrs, kids)
        if v.kind == "select" and len(v.kids) == 3:
            nb = facts.size.bit_length() - 1
            tv = thread_truths(v.kids[0], self.grid, nb)
            if tv is None or len(tv) != facts.size:
                then_s = else_s = storing
            else:
                is_false = sum(1 << t for t, b in enumerate(tv) if b is False)
                is_true = sum(1 << t for t, b in enumerate(tv) if b is True)
                then_s, else_s = storing & ~is_false, storing & ~is_true
            a = self._uncanon(v.kids[1], then_s, facts)
            b = self._uncanon(v.kids[2], else_s, facts)
            return v if a is v.kids[1] and b is v.kids[2] else mk_select(v.kids[0], a, b)
        if v.kind == "shfl" and is_bit_move(v) and self.plain_shfl.get(v.digest, False):
            b_const = v.kids[1].poly
            assert b_const is not None
            lane = b_const.const_value()
            src = 0
            for t in range(facts.size):
                if storing >> t & 1:
                    src |= 1 << (t ^ lane)
            x = self._uncanon(v.kids[0], src, facts)
            return v if x is v.kids[0] else Node(v.kind, v.attrs, (x, *v.kids[1:]))
        return v

    # ---- writes ---------------------------------------------------------------------------
    def write(self, ins: Inst, reg: str, new: Node, kind: str = "") -> None:
        """Write ``new`` to ``reg`` under the instruction's predicate."""
        if ins.pred is None:
            self.set(reg, new)
            return
        p = self.get(ins.pred)
        if ins.neg:
            p = mk_not(p)
        assert self.env is not None
        old = self.env.get(reg)
        if pred_is_coordinate(p):
            if self.spec and kind == "load" and old is not None:
                # specialised: a load whose predicate holds for every thread of the launch is the
                # plain load; one that holds for none leaves the register as it was (a +0.0
                # there is a padding leaf, folded by fadd)
                t = pred_truth(p, self.grid)
                if t is not None:
                    self.set(reg, new if t else old)
                    return
            # which lanes run is a launch fact; a masked load keeps what the lane had instead
            if kind == "load" and old is not None:
                node = Node("masked", (), (new, old))
                if self.spec:
                    self._note_masked(node, p)
                self.set(reg, node)
            else:
                self.set(reg, new)
            return
        self.set(reg, mk_select(p, new, old if old is not None else Node("undef", ())))

    def cur_pred(self, ins: Inst) -> Node | None:
        if ins.pred is None:
            return None
        p = self.get(ins.pred)
        return mk_not(p) if ins.neg else p

    # ---- the transfer function ------------------------------------------------------------
    def step(self, i: int) -> None:
        ins = self.insts[i]
        parts = self._parts[i]  # (handlers only read it)
        harmless = self._harmless[i]
        if harmless is not None:
            if harmless == "barrier":
                args = [a.strip() for a in ins.args]
                block = ins.pred is None and (
                    (ins.op in _BLOCK_BARRIERS and args == ["0"]) or self._warp_is_block(ins.op, args)
                )
                self.barrier(block and not self.pc)
            elif harmless == "wait":
                self.smem_version += 1  # async copies may have landed
                if ins.pred is None and (
                    ins.op.startswith("cp.async.wait_all")
                    or (ins.op.startswith("cp.async.wait_group") and [a.strip() for a in ins.args] == ["0"])
                ):
                    self.cp_wait_all()
            return
        handler = getattr(self, "op_" + parts[0], None)
        if handler is not None:
            handled = handler(ins, parts)
            if handled is not False:
                return
        self.unknown(ins)

    def unknown(self, ins: Inst) -> None:
        def operand(a: str) -> Node:
            if a.startswith("["):
                try:
                    return int_node(self.addr(a))
                except Unsupported:
                    return opaque("operand:" + a)
            return self.val(a)

        kids = tuple(operand(a) for a in ins.args[1:])
        first = ins.args[0] if ins.args else ""
        base = ins.op.split(".")[0]
        touches_smem = (
            ".shared" in ins.op or base in ("stmatrix", "ldmatrix", "tcgen05") or ".async" in ins.op
        )
        if touches_smem:
            # whatever it reads from shared memory is part of its value
            kids = kids + (self.smem_history(),)
        writes_mem = base in (
            "st",
            "atom",
            "red",
            "cp",
            "stmatrix",
            "multimem",
            "tcgen05",
            "call",
            "mbarrier",
        )
        if ins.op.startswith(("atom", "red")) and any(
            t in ins.op for t in (".f32", ".f16", ".bf16", ".f64", ".add.noftz")
        ):
            self.nondeterministic = True
        if writes_mem or not (first.startswith("%") or first.startswith("{")):
            allk = tuple(operand(a) for a in ins.args)
            eff = opaque(ins.op, allk + ((self.cur_pred(ins) or TRUE),))
            self.effects.append(eff)
            if touches_smem or base in ("st", "atom", "red", "call"):
                # an unmodelled write may land in shared memory: no later read may assume
                # it knows what is there (it enters every history, and no tree is uniform)
                self.smem_store(
                    "st", int_node(Poly.const(0)), Node("smemwrite", (ins.op,), allk), self.cur_pred(ins), -1
                )
        if first.startswith("%") or first.startswith("{"):
            regs = _regs(first)
            for k, r in enumerate(regs):
                self.write(ins, r, Node("opaque", (ins.op, k), kids))

    # ---- moves, integer arithmetic ------------------------------------------------------------
    def op_mov(self, ins: Inst, parts: list[str]) -> bool | None:
        dst, src = ins.args[0], ins.args[1]
        ty = parts[-1]
        if dst.startswith("{"):
            regs = _regs(dst)
            v = self.val(src)
            w = _TYPE_BITS.get(ty, 32) // len(regs)
            for k, r in enumerate(regs):
                self.write(ins, r, self.slice_of(v, k * w, w))
            return None
        if src.startswith("{"):
            pieces = [self.val(x) for x in split_args(src[1:-1])]
            w = _TYPE_BITS.get(ty, 32) // len(pieces)
            self.write(ins, dst, mk_pack(pieces, w))
            return None
        self.write(ins, dst, self.val(src, _TYPE_BITS.get(ty, 32)))
        return None

    def _int_args(self, ins: Inst) -> list[Poly]:
        return [self._ipoly(self.val(a)) for a in ins.args[1:]]

    def _ipoly(self, n: Node) -> Poly:
        """``to_poly``, recording what a float's bits token stands for (dtokens.py)."""
        p = to_poly(n)
        if n.poly is None and n.kind != "carried":
            self.dtoks.setdefault(p.text(), dtokens.bits_node(n))  # (one symbol: its name)
        return p

    def _int_result(self, ins: Inst, p: Poly | None, kind: str) -> None:
        if p is None:
            vals = [self.val(a) for a in ins.args[1:]]
            variant = any(v.variant for v in vals)
            p = token(ins.op, [v.digest for v in vals], variant)
            if any(v.poly is None or v.poly.has_data() for v in vals):
                p = Poly.sym("D:" + p.text().split(":", 1)[1])
                self.dtoks.setdefault(p.text(), dtokens.op_node(ins.op, tuple(vals)))
            elif variant and all(fwd.block_level(v.poly) for v in vals if v.poly is not None):
                fwd.note_block_token(p)  # same value in every thread of a block
        self.write(ins, ins.args[0], int_node(p))

    def _is_int(self, parts: list[str]) -> bool:
        return bool(_INT_TYPES.match(parts[-1])) or parts[-1] == "pred"

    def op_add(self, ins: Inst, parts: list[str]) -> bool | None:
        if not self._is_int(parts) or "cc" in parts:
            if "cc" in parts or "cc" in ins.op:
                raise Unsupported("carry chains")
            return self.float_op(ins, parts)
        a, b = self._int_args(ins)
        self._int_result(ins, a + b, "add")
        return None

    def op_sub(self, ins: Inst, parts: list[str]) -> bool | None:
        if not self._is_int(parts):
            return self.float_op(ins, parts)
        a, b = self._int_args(ins)
        self._int_result(ins, a - b, "sub")
        return None

    def op_mul(self, ins: Inst, parts: list[str]) -> bool | None:
        if not self._is_int(parts):
            return self.float_op(ins, parts)
        if "hi" in parts:
            self._int_result(ins, None, "mulhi")
            return None
        a, b = self._int_args(ins)
        self._int_result(ins, a * b, "mul")
        return None

    def op_mad(self, ins: Inst, parts: list[str]) -> bool | None:
        if not self._is_int(parts):
            return self.float_op(ins, parts)
        if "hi" in parts or "cc" in parts:
            self._int_result(ins, None, "madhi")
            return None
        a, b, c = self._int_args(ins)
        self._int_result(ins, a * b + c, "mad")
        return None

    def op_shl(self, ins: Inst, parts: list[str]) -> bool | None:
        a, b = self._int_args(ins)
        if b.is_const() and 0 <= b.const_value() < 64:
            self._int_result(ins, a.scale(1 << b.const_value()), "shl")
        else:
            self._int_result(ins, None, "shl")
        return None

    def op_shr(self, ins: Inst, parts: list[str]) -> bool | None:
        a, b = self._int_args(ins)
        r = exact_shr(a, b.const_value()) if b.is_const() and 0 <= b.const_value() < 64 else None
        self._int_result(ins, r, "shr")
        return None

    def op_and(self, ins: Inst, parts: list[str]) -> bool | None:
        if parts[-1] == "pred":
            self.write(ins, ins.args[0], mk_pred_join("and", tuple(self.val(a) for a in ins.args[1:])))
            return None
        a, b = self._int_args(ins)
        r = None
        if b.is_const():
            r = exact_and(a, b.const_value())
        elif a.is_const():
            r = exact_and(b, a.const_value())
        if r is None:
            r = bit_op("and", [a, b])
        self._int_result(ins, r, "and")
        return None

    def op_or(self, ins: Inst, parts: list[str]) -> bool | None:
        if parts[-1] == "pred":
            self.write(ins, ins.args[0], mk_pred_join("or", tuple(self.val(a) for a in ins.args[1:])))
            return None
        a, b = self._int_args(ins)
        r = exact_or(a, b)
        if r is None:
            r = bit_op("or", [a, b])
        self._int_result(ins, r, "or")
        return None

    def op_xor(self, ins: Inst, parts: list[str]) -> bool | None:
        if parts[-1] == "pred":
            self.write(ins, ins.args[0], Node("xor", ("pred",), tuple(self.val(a) for a in ins.args[1:])))
            return None
        a, b = self._int_args(ins)
        r = None
        if a.is_const() and b.is_const():
            r = Poly.const(a.const_value() ^ b.const_value())
        else:
            r = exact_or(a, b)  # xor of values with no common bit is their sum
        if r is None:
            r = bit_op("xor", [a, b])
        self._int_result(ins, r, "xor")
        return None

    def op_not(self, ins: Inst, parts: list[str]) -> bool | None:
        if parts[-1] == "pred":
            self.write(ins, ins.args[0], mk_not(self.val(ins.args[1])))
            return None
        self._int_result(ins, None, "not")
        return None

    def op_bfe(self, ins: Inst, parts: list[str]) -> bool | None:
        a, pos, ln = self._int_args(ins)
        r = None
        if parts[-1].startswith("u") and pos.is_const() and ln.is_const():
            r = exact_bfe(a, pos.const_value(), ln.const_value())
        if r is None and parts[-1] in ("u32", "s32"):
            r = bit_op("bfe", [a, pos, ln], signed=parts[-1] == "s32")
        self._int_result(ins, r, "bfe")
        return None

    def op_cvta(self, ins: Inst, parts: list[str]) -> bool | None:
        self.write(ins, ins.args[0], int_node(self._ipoly(self.val(ins.args[1]))))
        return None

    def op_selp(self, ins: Inst, parts: list[str]) -> bool | None:
        a, b, p = (self.val(x) for x in ins.args[1:4])
        if a.poly is not None and b.poly is not None and a.poly.is_const() and b.poly.is_const() and a == b:
            self.write(ins, ins.args[0], a)
            return None
        if a.poly is not None and b.poly is not None:
            variant = a.variant or b.variant or p.variant or not pred_is_coordinate(p)
            tok = token("selp", (a.digest, b.digest, p.digest), variant)
            if not pred_is_coordinate(p):
                tok = Poly.sym("D:" + tok.text().split(":", 1)[1])
                self.dtoks.setdefault(tok.text(), dtokens.op_node("selp", (a, b, p)))
            self.write(ins, ins.args[0], int_node(tok))
            return None
        self.write(ins, ins.args[0], mk_select(p, a, b))
        return None

    def op_setp(self, ins: Inst, parts: list[str]) -> bool | None:
        cmp, ty = parts[1], parts[-1]
        a, b = (self.val(x) for x in ins.args[1:3])
        if len(ins.args) > 3:  # setp.op.bool.type p, a, b, {!}c
            return False
        if _INT_TYPES.match(ty):
            pa, pb = self._ipoly(a), self._ipoly(b)
            sign = ty[0] if ty[0] != "b" else "u"
            if sign == "u" and self._small_thread_form(pa) and self._small_thread_form(pb):
                sign = "s"  # both exact and in [0, 2^16): the unsigned order is the integers'
            n = icmp(cmp, sign, pa - pb)
            if self.spec and self.grid is not None:
                t = pred_truth(n, self.grid)  # (the same at every thread of every block of the launch)
                if t is not None:
                    n = const_pred(t)
        else:
            n = Node("cmp", (cmp, ty, ".ftz" if "ftz" in parts else ""), (a, b))
        dsts = [d.strip() for d in ins.args[0].split("|")]
        self.write(ins, dsts[0], n)
        if len(dsts) > 1:
            self.write(ins, dsts[1], mk_not(n))
        return None

    def _small_thread_form(self, p: Poly) -> bool:
        """True when ``p`` is a form over this block's tid.x bits (a launch bound of 2^n threads
        in x) whose value at every thread lies in [0, 2^16). The walk's integer forms agree with
        the register modulo 2^w (w >= 16 for setp: ring operations and exact bit rules), so such
        a register holds exactly that integer, and an unsigned comparison of two of them is the
        comparison of the integers: the signed canonical form ``icmp`` decides without wrap."""
        nt = self.ntid
        if nt is None or nt[1] != 1 or nt[2] != 1 or nt[0] < 1 or nt[0] & (nt[0] - 1):
            return False
        n = nt[0].bit_length() - 1
        if n > fwd.MAX_BITS:
            return False
        for s in p.symbols():
            if not (is_bit_symbol(s) and s[:2] == "tx" and int(s[2:]) < n):
                return False
        vals = fwd.eval_all(p, n)
        return min(vals) >= 0 and max(vals) < 1 << 16

    def op_cvt(self, ins: Inst, parts: list[str]) -> bool | None:
        types = [p for p in parts[1:] if p in _TYPE_BITS]
        if (
            len(types) == 2
            and all(_INT_TYPES.match(t) for t in types)
            and not any(p in ("sat",) for p in parts)
        ):
            dst_bits = _TYPE_BITS[types[0]]
            a = self._ipoly(self.val(ins.args[1]))
            if dst_bits >= _TYPE_BITS[types[1]] or a.is_const():
                self._int_result(
                    ins, a if not a.is_const() else Poly.const(a.const_value() & ((1 << dst_bits) - 1)), "cvt"
                )
            else:
                self._int_result(ins, a, "cvt")  # narrowing of an in-range index (no overflow assumed)
            return None
        if types and types[0] in ("f16x2", "bf16x2", "e4m3x2", "e5m2x2") and len(ins.args) == 3:
            # d = {cvt(a) in the upper half, cvt(b) in the lower}
            mods = ".".join(p for p in parts[1:] if p not in _TYPE_BITS or p == types[-1])
            half = types[0][:-2]
            lo = Node("cvt", (f"{mods}>{half}",), (self.val(ins.args[2]),))
            hi = Node("cvt", (f"{mods}>{half}",), (self.val(ins.args[1]),))
            self.write(ins, ins.args[0], mk_pack([lo, hi], _TYPE_BITS.get(half, 8)))
            return None
        return self.float_op(ins, parts)

    # ---- floating point --------------------------------------------------------------------
    def float_op(self, ins: Inst, parts: list[str]) -> bool | None:
        base = parts[0]
        if base not in _FLOAT_OPS:
            return False
        kind = "fma" if base in ("fma", "mad") else base
        attrs = (".".join(parts[1:]),)
        if ins.args[0].startswith("{") or "|" in ins.args[0]:
            return False
        ops = [self.val(a) for a in ins.args[1:]]
        ty = parts[-1]
        if ty in ("f16x2", "bf16x2") and kind != "cvt":
            lanes = []
            for k in range(2):
                lane_ops = [self.slice_of(o, 16 * k, 16) for o in ops]
                lanes.append(Node(kind, (".".join(parts[1:-1] + [ty[:-2]]),), tuple(lane_ops)))
            self.write(ins, ins.args[0], mk_pack(lanes, 16))
            return None
        if self.spec and len(ops) == 2 and kind == "add" and attrs[0] in RN_F32:
            self.write(ins, ins.args[0], mk_fadd(ops[0], ops[1], attrs))
            return None
        if self.spec and zero_result(kind, attrs, ops):
            self.write(ins, ins.args[0], ops[0])  # +0 * +0 and a widened +0 are +0 exactly
            return None
        if self.spec and kind == "fma" and attrs[0] == "rn.f32" and len(ops) == 3:
            self.write(ins, ins.args[0], mk_ffma(ops[0], ops[1], ops[2], attrs))
            return None
        self.write(ins, ins.args[0], Node(kind, attrs, tuple(ops)))
        return None

    def op_min(self, ins: Inst, parts: list[str]) -> bool | None:
        if self._is_int(parts):
            self._int_result(ins, None, "min")
            return None
        return self.float_op(ins, parts)

    op_max = op_min

    def op_neg(self, ins: Inst, parts: list[str]) -> bool | None:
        if self._is_int(parts):
            a = self._int_args(ins)[0]
            self._int_result(ins, -a, "neg")
            return None
        return self.float_op(ins, parts)

    def op_abs(self, ins: Inst, parts: list[str]) -> bool | None:
        if self._is_int(parts):
            self._int_result(ins, None, "abs")
            return None
        return self.float_op(ins, parts)

    def op_div(self, ins: Inst, parts: list[str]) -> bool | None:
        if self._is_int(parts):
            a, b = self._int_args(ins)
            if a.is_const() and b.is_const() and b.const_value() > 0 and a.const_value() >= 0:
                self._int_result(ins, Poly.const(a.const_value() // b.const_value()), "div")
            else:
                self._int_result(ins, None, "div")
            return None
        return self.float_op(ins, parts)

    def op_rem(self, ins: Inst, parts: list[str]) -> bool | None:
        self._int_result(ins, None, "rem")
        return None

    # ---- memory --------------------------------------------------------------------------------
    def op_ld(self, ins: Inst, parts: list[str]) -> bool | None:
        space = next(
            (p for p in parts[1:] if p in ("global", "shared", "param", "const", "local")), "generic"
        )
        if "shared::cluster" in ins.op:
            return False
        vec = next((int(p[1:]) for p in parts if re.fullmatch(r"v\d", p)), 1)
        ty = parts[-1]
        nbytes = max(1, _TYPE_BITS.get(ty, 32) // 8)
        dst = ins.args[0]
        regs = _regs(dst) if dst.startswith("{") else [dst]
        if space == "param":
            m = re.match(r"^\[\s*([\w$]+)\s*(?:\+\s*(\d+))?\s*\]$", ins.args[1].strip())
            if m and m.group(1) in self.params and not m.group(2):
                self.write(ins, regs[0], int_node(self._param(m.group(1))))
                return None
            return False
        a = self.addr(ins.args[1])
        if space == "shared" and ins.pred is not None and not ins.neg:
            a = _restrict_by_bound(a, self.get(ins.pred))
        if len(regs) != vec:
            raise Unsupported(f"vector load arity {ins.text[:60]}")
        if (
            space == "shared"
            and ins.pred is None
            and not self.pc
            and self.depth == 0
            and self.smem_uniform(nbytes) is None
        ):
            fw = self.forward_ld(a, nbytes, vec)
            if fw is not None:
                for r, v in zip(regs, fw, strict=True):
                    self.write(ins, r, v, kind="load")
                return None
        for k, r in enumerate(regs):
            ak = a + Poly.const(k * nbytes)
            if space == "shared":
                self.read_pred = self.cur_pred(ins)
                try:
                    v = self.smem_load(int_node(ak), nbytes)
                finally:
                    self.read_pred = None
            elif space == "local":
                v = Node("local", (nbytes,), (int_node(ak),))
            else:
                v = Node("load", (space if space != "generic" else "global", nbytes), (int_node(ak),))
            self.write(ins, r, v, kind="load")
        return None

    op_ldu = op_ld

    def op_st(self, ins: Inst, parts: list[str]) -> bool | None:
        space = next((p for p in parts[1:] if p in ("global", "shared", "local")), "generic")
        if "shared::cluster" in ins.op or "async" in parts:
            return False
        ty = parts[-1]
        nbytes = max(1, _TYPE_BITS.get(ty, 32) // 8)
        a = self.addr(ins.args[0])
        src = ins.args[1]
        vals = [self.val(x) for x in split_args(src[1:-1])] if src.startswith("{") else [self.val(src)]
        pred = self.cur_pred(ins)
        storers, facts = None, None
        if space not in ("shared", "local") and (pred is None or pred_is_coordinate(pred)):
            storers = self._storers(pred)
            if storers == 0:
                return None
            if storers is not None:
                facts = SignFacts(self._thread_bits() or 0, self.masked_false, self.read_facts)
        for k, v in enumerate(vals):
            ak = a + Poly.const(k * nbytes)
            if space == "shared":
                self.smem_store("st", int_node(ak), v, pred, nbytes)
            elif space == "local":
                self.effects.append(Node("stlocal", (nbytes,), (int_node(ak), v)))
            else:
                if pred is not None and not pred_is_coordinate(pred):
                    v = Node("select", (), (pred, v, Node("keep", ())))
                elif storers is not None and facts is not None:
                    v = self._uncanon(v, storers, facts)
                    v = self._unmask(v, storers, {})
                self.global_store(ak, v, nbytes, storers)
        return None

    def op_cp(self, ins: Inst, parts: list[str]) -> bool | None:
        if ins.op.startswith("cp.async.ca.shared.global") or ins.op.startswith("cp.async.cg.shared.global"):
            dst = self.addr(ins.args[0])
            src = self.addr(ins.args[1])
            size = _imm(ins.args[2])
            if size is None:
                return False
            extra = tuple(self.val(x) for x in ins.args[3:])
            v = Node("cpasync", (size[0],), (Node("load", ("global", size[0]), (int_node(src),)),) + extra)
            self.smem_store("async", int_node(dst), v, self.cur_pred(ins), size[0])
            return None
        if ins.op.startswith("cp.async.bulk.tensor") and ".shared" in ins.op.split(".global")[0]:
            # TMA load: global tile -> shared memory (staging for MMA operands or loads)
            dst = self.addr(ins.args[0])
            v = opaque(
                ins.op,
                tuple(self.val(x) if not x.startswith("[") else self._tma_operand(x) for x in ins.args[1:]),
            )
            self.smem_store("async", int_node(dst), v, self.cur_pred(ins), 0)
            return None
        if ins.op.startswith("cp.async.bulk.tensor") and ".global.shared" in ins.op:
            desc = self._tma_operand(ins.args[0])
            src = self.addr(ins.args[1])
            tile = self._tma_store_tile(desc, src)
            if tile is not None:
                self.roots.append(tile)
                return None
            stores = [e for e in self.smem if e.kind == "st"]
            uniform = self.smem_uniform(stores[-1].nbytes) if stores else None
            base = desc.kids[0] if desc.kind == "tmaop" and desc.kids else desc
            param = (
                next((m[0] for m in sorted(base.poly.terms) if len(m) == 1 and m[0].startswith("p:")), "?")
                if (base.poly is not None)
                else "?"
            )
            if uniform is not None and base.poly is not None:
                # every slot of the staged tile holds one coordinate-free tree: which tile the
                # descriptor's coordinates name no longer matters (a relative root)
                self.roots.append(
                    Root(param, 0, int_node(base.poly), Node("tma_store", (ins.op,), (uniform,)), True)
                )
            else:
                tile = self.smem_load(int_node(src), 0)
                self.roots.append(Root(param, 0, desc, Node("tma_store", (ins.op,), (tile,)), False))
            return None
        return False

    # ---- device-side TMA descriptors ------------------------------------------------------------
    def op_tensormap(self, ins: Inst, parts: list[str]) -> bool | None:
        """tensormap.replace sets one field of a 128-byte descriptor template in shared memory;
        tensormap.cp_fenceproxy copies a template to the global address TMA instructions name.
        The fields are kept per template and per copy (not as effects: box sizes and swizzles
        are speed knobs, and a TMA store is judged where it runs, by what its box reads)."""
        if self.depth:
            self.tmap_in_loop = True  # a descriptor rebuilt per iteration is not followed
        if len(parts) > 3 and parts[1] == "replace" and parts[2] == "tile":
            a = self.addr(ins.args[0])
            rest = [x.strip() for x in ins.args[1:]]
            idx = None
            if len(rest) == 2:
                imm = _imm(rest[0])
                if imm is None:
                    return False
                idx = imm[0]
            elif len(rest) != 1:
                return False
            v = self.val(rest[-1], 64 if parts[-1] == "b64" else 32)
            tpl = self.tmap_tpl.setdefault(a.key(), {})
            tpl[(parts[3], idx)] = v
            # the template is shared memory: a forwarded read of these bytes must not see an
            # older store (an entry of its own kind stops forwarding through this generation)
            self.smem_store(
                "tmap", int_node(a), Node("tmapfield", (parts[3], idx), (v,)), self.cur_pred(ins), 128
            )
            return None
        if len(parts) > 1 and parts[1] == "cp_fenceproxy" and len(ins.args) >= 2:
            dst, src = self.addr(ins.args[0]), self.addr(ins.args[1])
            # the template's fields since its last publication: a field not replaced since then
            # is not known (what was zero-filled or left over is not followed)
            tpl = self.tmap_tpl.pop(src.key(), None)
            if tpl is None:
                self.tmaps.pop(dst.key(), None)
            else:
                self.tmaps[dst.key()] = tpl
            return None
        return False

    def _tma_store_tile(self, desc: Node, src: Poly) -> Root | None:
        """A TMA store of a tile in which every element holds one coordinate-free tree, proven
        from the latest barrier generation (a relative root in the output's own coordinates), or
        None (the caller keeps the physical form).

        The descriptor must be one this kernel built (tensormap.replace, then cp_fenceproxy to
        the address the store names), of tile mode, every box dimension and element stride
        known, no interleave, and a swizzle span equal to the box's row bytes (the swizzle then
        permutes bytes within each row, so the box reads exactly [src, src + box bytes)). Every
        byte of that range must be written by a store of the latest generation (stores after the
        last-but-one block barrier, none since the last), the block barriers clean of open
        cp.async. TMA loads of earlier generations are allowed: a load into these bytes that
        lands after the generation's stores would race with them, which the PTX memory model
        leaves undefined and which every kernel Triton emits excludes (its waits are mbarrier
        phases the walk does not follow)."""
        if self.depth or self.pc or self.tmap_in_loop:
            return None
        base = desc.kids[0] if desc.kind == "tmaop" and desc.kids else desc
        if base.poly is None:
            return None
        fields = self.tmaps.get(base.poly.key())
        if not fields:
            return None

        def const(name: str, idx: int | None = None) -> int | None:
            n = fields.get((name, idx))
            if n is None or n.poly is None or not n.poly.is_const():
                return None
            return n.poly.const_value()

        rank = const("rank")
        etype = const("elemtype")
        swz = const("swizzle_mode")
        if (
            rank is None
            or not 0 <= rank < 5
            or etype not in _TMAP_ELEM_BYTES
            or swz not in _TMAP_SWIZZLE_SPAN
        ):
            return None
        if const("interleave_layout") != 0:
            return None
        dims = rank + 1
        box = [const("box_dim", i) for i in range(dims)]
        if any(b is None or b <= 0 for b in box) or any(const("element_stride", i) != 1 for i in range(dims)):
            return None
        esize = _TMAP_ELEM_BYTES[etype]
        span = _TMAP_SWIZZLE_SPAN[swz]
        row = box[0] * esize  # type: ignore[operator]
        if span and row != span:
            return None
        total = esize
        for b in box:
            total *= b  # type: ignore[operator]
        rel = src - Poly.sym("smem")
        if not all(is_bit_symbol(x) for x in rel.symbols()):
            return None
        g = self._fwd_generation(allow_tma=True)
        if g is None:
            return None
        gen, bmap = g
        assert self.ntid is not None
        # the box of every thread that may issue the store (a warp each, say): all are checked
        starts = (
            sorted(set(fwd.eval_all(rel, self.ntid[0].bit_length() - 1)))
            if not rel.is_const()
            else [rel.const_value()]
        )
        tree: Node | None = None
        for start in starts:
            if span and start % span:
                return None
            pos = start
            while pos < start + total:
                hit = bmap.get(pos)
                if hit is None:
                    return None
                e = gen[hit[0]]
                if e.nbytes == esize:
                    elems = [e.value]
                elif (
                    e.nbytes % esize == 0
                    and e.value.kind == "pack"
                    and e.value.attrs == (8 * esize,)
                    and len(e.value.kids) == e.nbytes // esize
                ):
                    elems = list(e.value.kids)
                else:
                    return None
                for el in elems:
                    if el.variant or (tree is not None and el.digest != tree.digest):
                        return None
                    tree = el
                pos += e.nbytes
            if pos != start + total:
                return None
        if tree is None:
            return None
        gaddr = fields.get(("global_address", None))
        if gaddr is None or gaddr.poly is None:
            return None
        param = pointer_param(gaddr.poly)
        if param is None:
            return None
        layout = tuple(fields.get(("global_dim", i), UNDEF) for i in range(dims)) + tuple(
            fields.get(("global_stride", i), UNDEF) for i in range(dims - 1)
        )
        if any(n is UNDEF or n.variant for n in layout):
            return None  # a field not replaced since the last publication holds whatever was there
        value = Node("tma_store", ("tile", dims, etype), (tree, int_node(gaddr.poly)) + layout)
        return Root(param, esize, int_node(gaddr.poly), value, True)

    def _tma_operand(self, a: str) -> Node:
        inner = a.strip()[1:-1]
        items = split_args(inner)
        kids = []
        for it in items:
            it = it.strip()
            if it.startswith("{"):
                kids.append(Node("coords", (), tuple(self.val(x) for x in split_args(it[1:-1]))))
            elif it in self.params:
                kids.append(int_node(Poly.sym(self.params[it])))
            else:
                kids.append(self.val(it, 64))
        if len(kids) == 1:
            return kids[0]
        return Node("tmaop", (), tuple(kids))

    def op_ldmatrix(self, ins: Inst, parts: list[str]) -> bool | None:
        regs = _regs(ins.args[0])
        a = self.addr(ins.args[1])
        u = self.smem_uniform(4, any_lane_halves="trans" in parts)
        if u is None and ins.pred is None and not self.pc and self.depth == 0:
            fw = self.forward_ldmatrix(a, parts, len(regs))
            if fw is not None:
                for r, v in zip(regs, fw, strict=True):
                    self.write(ins, r, v)
                return None
        hist = kept = None
        if u is None:
            self.read_pred = self.cur_pred(ins)
            self.note_read(a, 16, own=False)  # lanes take the bytes of rows other lanes name
            self.read_pred = None
            # every lane's 16-byte row proven written covers what any lane takes
            hist, kept = self.exchange(int_node(a), 16)
        for k, r in enumerate(regs):
            if u is not None:
                self.write(ins, r, u)
            elif self.spec and a is not None:
                assert hist is not None
                self.write(ins, r, self._lift_ldmatrix(ins, parts, a, k, hist, kept))
            else:
                self.write(ins, r, Node("ldmatrix", (ins.op, k), (hist,)))  # type: ignore[arg-type]
        return None

    def op_stmatrix(self, ins: Inst, parts: list[str]) -> bool | None:
        """stmatrix .m8n8 .b16 (not transposed): lane L's register k goes to row L/4 of matrix k,
        whose address lane 8k + L/4 supplies, at byte 4 (L mod 4): one 4-byte store per
        register with the supplier's lane bits written as the storing lane's."""
        regs = _regs(ins.args[1]) if ins.args[1].strip().startswith("{") else [ins.args[1].strip()]
        if (
            "trans" in parts
            or "m8n8" not in parts
            or "b16" not in parts
            or "shared" not in parts
            or len(regs) not in (1, 2, 4)
            or f"x{len(regs)}" not in parts
            or self.special.get("laneid") is None
        ):
            return False
        a = self.addr(ins.args[0])
        if any(not (is_bit_symbol(s) or s == "smem" or fwd.block_level(Poly.sym(s))) for s in a.symbols()):
            return False  # a lane-dependent token: the supplier's value is not the writer's
        tmp = a
        for i in range(5):
            tmp = tmp.substitute(f"tx{i}", Poly.sym(f"sup{i}"))
        pred = self.cur_pred(ins)
        for k, r in enumerate(regs):
            ak = tmp
            lane_src = {0: Poly.sym("tx2"), 1: Poly.sym("tx3"), 2: Poly.sym("tx4"),
                        3: Poly.const(k & 1), 4: Poly.const(k >> 1 & 1)}  # fmt: skip
            for i in range(5):
                ak = ak.substitute(f"sup{i}", lane_src[i])
            ak = ak + Poly.sym("tx0").scale(4) + Poly.sym("tx1").scale(8)
            self.smem_store("st", int_node(ak), self.val(r), pred, 4)
        return None

    # ---- exchanges -----------------------------------------------------------------------
    def op_shfl(self, ins: Inst, parts: list[str]) -> bool | None:
        mode = next((p for p in parts if p in ("bfly", "down", "up", "idx")), None)
        if mode is None or len(ins.args) < 4:
            return False
        dsts = [d.strip() for d in ins.args[0].split("|")]
        a = self.val(ins.args[1])
        b, c = self.val(ins.args[2]), self.val(ins.args[3])
        mask = self.val(ins.args[4]) if len(ins.args) > 4 else int_node(Poly.const(-1))
        lane = self._uniform_lane(mode, a, b, c, mask)
        if lane is not None:
            # an integer of thread bits read from one fixed lane of the full warp (the
            # warp-uniform warp id idiom): the same form with the lane bits of that lane
            assert a.poly is not None
            v = a.poly.assign_bits({f"tx{i}": (lane >> i) & 1 for i in range(5)})
            self.write(ins, dsts[0], int_node(v))
            if len(dsts) > 1:
                self.write(ins, dsts[1], TRUE)
            return None
        sh = Node("shfl", (mode,), (a, b, c, mask))
        if self.spec and is_zero(a) and ins.pred is None and not self.pc and self._thread_bits() is not None:
            if is_bit_move(sh):
                # every lane of the full warp sends the same +0 register: each receives +0
                self.write(ins, dsts[0], a)
                if len(dsts) > 1:
                    self.write(ins, dsts[1], TRUE)
                return None
        if (
            self.spec
            and a.kind == "canon"
            and ins.pred is None
            and not self.pc
            and self._thread_bits() is not None
        ):
            lifted = Node("shfl", (mode,), (a.kids[0], b, c, mask))
            if is_bit_move(lifted):
                # a bit move of full warps: lane t gets canon(x) of lane t ^ b, which is canon of
                # the value lane t ^ b sends: canon(shfl(x))
                sh = Node("canon", (), (lifted,))
        if self.spec:
            plain = ins.pred is None and not self.pc and not self.depth
            self.plain_shfl[sh.digest] = plain and self.plain_shfl.get(sh.digest, True)
        self.write(ins, dsts[0], sh)
        if len(dsts) > 1:
            self.write(ins, dsts[1], Node("shflpred", (mode,), (b, c, mask)))
        return None

    def _uniform_lane(self, mode: str, a: Node, b: Node, c: Node, mask: Node) -> int | None:
        """The source lane of shfl.idx from a constant lane of the whole warp (clamp 31, no
        segments, every lane in the mask) of an integer made of thread bits and block-level
        values only; None otherwise."""
        if mode != "idx" or a.poly is None or self.special.get("laneid") is None:
            return None
        consts = []
        for n in (b, c, mask):
            if n.poly is None or not n.poly.is_const():
                return None
            consts.append(n.poly.const_value())
        src, clamp, members = consts
        if clamp != 31 or members & 0xFFFFFFFF != 0xFFFFFFFF or not 0 <= src < 32:
            return None
        if not all(
            is_bit_symbol(x) or x == "smem" or x.startswith(fwd.INVARIANT_PREFIXES) for x in a.poly.symbols()
        ):
            return None
        return src

    # ---- tensor cores ----------------------------------------------------------------------
    def op_wgmma(self, ins: Inst, parts: list[str]) -> bool | None:
        if not ins.op.startswith("wgmma.mma_async"):
            return False
        shape = next((p for p in parts if re.fullmatch(r"m\d+n\d+k\d+", p)), "")
        k = shape.split("k")[-1]
        types = ".".join(p for p in parts if p in _TYPE_BITS or p in _FLOAT_TYPES or p in ("s32", "u8", "s8"))
        accs = _regs(ins.args[0])
        rest = list(ins.args[1:])
        a_op = ins.args[1]
        a_node = (
            Node("pack", ("vec",), tuple(self.val(x) for x in _regs(a_op)))
            if a_op.startswith("{")
            else self.val(a_op)
        )
        if not a_op.startswith("{"):
            a_node = Node("smemref", (self.smem_version,), (a_node,))  # a place, at this version
        b_node = Node("smemref", (self.smem_version,), (self.val(rest[1]),))
        scale_d = self.val(rest[2]) if len(rest) > 2 else TRUE
        imms = tuple(x.strip() for x in rest[3:5])  # scale-a, scale-b (negation); transposes are layout
        sig = (
            "wgmma",
            f"k{k}",
            types,
            imms,
            "sp" if ".sp" in ins.op else "",
            "satfinite" if "satfinite" in ins.op else "",
        )
        old = [self.get(r) for r in accs]
        for idx, r in enumerate(accs):
            self.write(ins, r, Node("mma", (sig, idx), (old[idx], a_node, b_node, scale_d)))
        return None

    def op_mma(self, ins: Inst, parts: list[str]) -> bool | None:
        shape = next((p for p in parts if re.fullmatch(r"m\d+n\d+k\d+", p)), "")
        k = shape.split("k")[-1]
        types = ".".join(
            p for p in parts[1:] if p in _TYPE_BITS or p in _FLOAT_TYPES or p in ("s32", "u8", "s8")
        )
        if len(ins.args) < 4:
            return False
        d, a, b, c = ins.args[:4]
        dregs, cregs = _regs(d), _regs(c)
        a_node = Node("pack", ("vec",), tuple(self.val(x) for x in _regs(a)))
        b_node = Node("pack", ("vec",), tuple(self.val(x) for x in _regs(b)))
        sig = (
            "mma",
            f"k{k}",
            types,
            "sp" if ".sp" in ins.op else "",
            "satfinite" if "satfinite" in ins.op else "",
        )
        olds = [self.val(x) for x in cregs]
        if len(olds) != len(dregs):
            return False
        for idx, r in enumerate(dregs):
            self.write(ins, r, Node("mma", (sig, idx), (olds[idx], a_node, b_node, TRUE)))
        return None

    # ---- store-to-load forwarding (forward.py) -------------------------------------------------
    def _fwd_generation(
        self, allow_tma: bool = False
    ) -> tuple[list[SmemEntry], dict[int, tuple[int, int, int]]] | None:
        """The latest barrier generation's stores and the map {address - smem where a store
        starts: (store, writer thread, 0)}, when forwarding may read through them (see
        forward.py); None also when two (store, thread) pairs write one byte. ``allow_tma``:
        TMA loads of earlier generations do not stop it (see _tma_store_tile)."""
        key = (id(self.smem), len(self.smem), self.bars, allow_tma)
        c = self._fwd_cache
        if c is not None and c[0] == key:
            return c[1]
        res = self._fwd_generation_uncached(allow_tma)
        self._fwd_cache = (key, res, self.smem)
        return res

    def _fwd_generation_uncached(
        self, allow_tma: bool = False
    ) -> tuple[list[SmemEntry], dict[int, tuple[int, int, int]]] | None:
        ntid = self.ntid
        if (
            self.smem_decls != 1
            or ntid is None
            or ntid[1] != 1
            or ntid[2] != 1
            or ntid[0] & (ntid[0] - 1)
            or ntid[0] < 32
            or self.unmodelled_smem
            or (self.tma_loads and not allow_tma)
            or self.bars < 1
            or not self.bar_clean[self.bars - 1]
        ):
            return None
        gen = [e for e in self.smem if e.bar == self.bars - 1]
        if not gen or any(e.bar > self.bars - 1 for e in self.smem):
            return None
        n = ntid[0].bit_length() - 1
        bits = [f"tx{i}" for i in range(n)]
        smem = Poly.sym("smem")
        offs = []
        for e in gen:
            if e.kind != "st" or e.addr.poly is None or e.nbytes not in (1, 2, 4, 8, 16):
                return None
            rel = e.addr.poly - smem
            if any(s not in bits for s in rel.symbols()):
                return None
            offs.append(rel)
        bmap: dict[int, tuple[int, int, int]] = {}
        vals = [fwd.eval_all(rel, n) for rel in offs]
        preds = []
        for e in gen:
            if e.pred is None:
                preds.append(None)
                continue
            tv = fwd.truth_all(e.pred, n)
            if tv is None:
                return None
            preds.append(tv)
        spans = []
        for j, e in enumerate(gen):
            pv, vj, nb = preds[j], vals[j], e.nbytes
            for t in range(ntid[0]):
                if pv is None or pv[t]:
                    spans.append((vj[t], nb, j, t))
        spans.sort()
        end = None
        last: tuple[int, int, int] | None = None
        same: dict[int, list[int]] = {}  # slot -> the other threads of one store writing it whole
        for base, nb, j, t in spans:
            if last is not None and (base, nb, j) == last and self.has_mma:
                # (a GEMM epilogue's row statistics; elsewhere the balanced collapse and
                # thread_roots.read_at take such slots, for less)
                same.setdefault(base, []).append(t)
                continue
            if end is not None and base < end:
                return None  # two writers of one byte
            end = base + nb
            last = (base, nb, j)
            bmap[base] = (j, t, 0)  # reads start where a store starts (_fwd_read), so only starts are kept
        envs = self._fwd_envs(n) if same else []
        for base, others in same.items():
            # several threads of one store write one slot: the bytes are known only when they all
            # store one tree (a butterfly total every lane of a quad holds), whichever lands last
            j, t, _ = bmap[base]
            v = gen[j].value
            if not fwd.renamable(v, self._fwd_memo_shfl, True):
                return None
            want = fwd.concretize(v, envs[t]).digest
            if any(fwd.concretize(v, envs[u]).digest != want for u in others):
                return None
        return gen, bmap

    def _fwd_setup(
        self, a: Poly
    ) -> tuple[list[SmemEntry], dict[int, tuple[int, int, int]], int, list[int]] | None:
        """(generation, byte map, thread-id bits, each thread's address relative to the shared
        array) for a forwarded shared read, or None when the address is not a function of tid.x."""
        g = self._fwd_generation()
        if g is None:
            return None
        gen, bmap = g
        ntid = self.ntid
        assert ntid is not None
        n = ntid[0].bit_length() - 1
        bits = [f"tx{i}" for i in range(n)]
        rel = a - Poly.sym("smem")
        if any(s not in bits for s in rel.symbols()):
            return None
        return gen, bmap, n, fwd.eval_all(rel, n)

    def forward_ldmatrix(self, a: Poly, parts: list[str], nregs: int) -> list[Node] | None:
        """ldmatrix .m8n8 .b16 (not transposed): register k of lane i holds the 4 bytes at
        row address (lane 8k + i/4) + 4 (i mod 4), forwarded from the store that wrote them."""
        if "trans" in parts or "m8n8" not in parts or "b16" not in parts or "shared" not in parts:
            return None
        if nregs not in (1, 2, 4) or f"x{nregs}" not in parts:
            return None
        setup = self._fwd_setup(a)
        if setup is None:
            return None
        gen, bmap, n, rvals = setup
        out = []
        for k in range(nregs):
            addrs = []
            for x in range(1 << n):
                lane = x & 31
                addrs.append(rvals[(x & ~31) | (8 * k + (lane >> 2))] + 4 * (lane & 3))
            v = self._fwd_read(gen, bmap, addrs, 4, shfl=True)
            if v is None:
                return None
            out.append(v)
        self.fwd_bar = self.bars
        return out

    def _fwd_envs(self, n: int) -> list[dict[str, int]]:
        c = self._fwd_env_cache
        if c is None or len(c) != 1 << n:
            c = self._fwd_env_cache = [{f"tx{i}": (t >> i) & 1 for i in range(n)} for t in range(1 << n)]
        return c

    def _fwd_gen_key(self, gen: list[SmemEntry]) -> bytes:
        """A digest of what a generation's byte map and values are built from (kept with the
        list, so its id is not reused)."""
        got = self._fwd_gen_keys.get(id(gen))
        if got is not None and got[0] is gen:
            return got[1]
        h = hashlib.blake2b(digest_size=16)
        for e in gen:
            pd = e.pred.digest if e.pred is not None else b"-" * 16
            h.update(
                e.kind.encode()
                + b"\x00"
                + e.addr.digest
                + e.value.digest
                + pd
                + e.nbytes.to_bytes(4, "little")
            )
        k = h.digest()
        self._fwd_gen_keys[id(gen)] = (gen, k)
        return k

    def _fwd_read(
        self,
        gen: list[SmemEntry],
        bmap: dict[int, tuple[int, int, int]],
        addrs: list[int],
        nbytes: int,
        shfl: bool = False,
    ) -> Node | None:
        """The value reader x sees at addrs[x] (nbytes), over the reader's thread bits: one store
        of that size, or whole equal-sized stores concatenated (lowest address first).
        ``shfl``: stored values may hold full-warp butterflies (forward.renamable): taken for a
        layout conversion (ldmatrix), and for a shared read whose history the balanced
        collapse and thread_roots.read_at cannot see past (forward_ld).

        Memoised: a read is a pure function of the generation's stores (which also decide
        ``bmap``), the addresses, the size and ``shfl``; unrolled code and the two passes over a
        loop body repeat reads of one generation. The entry holds None until the read is
        built, which is what every early return gives."""
        key = (self._fwd_gen_key(gen), tuple(addrs), nbytes, shfl)
        reads = self._fwd_reads
        if key in reads:
            return reads[key]
        reads[key] = None
        n = len(addrs).bit_length() - 1
        envs_by_t = self._fwd_envs(n)
        bits = [f"tx{i}" for i in range(n)]
        memo = self._fwd_memo_shfl if shfl else self._fwd_memo
        trees: list[Node] = []
        tids: list[int] = []
        conc: dict[tuple[int, int], Node] = {}
        packs: dict[tuple, Node] = {}  # a pack is a function of its width and pieces
        for addr in addrs:
            hit = bmap.get(addr)
            if hit is None or hit[2] != 0:
                return None
            j, t, _ = hit
            e = gen[j]
            if not fwd.renamable(e.value, memo, shfl):
                return None
            if e.nbytes == nbytes:
                trees.append(e.value)
                tids.append(t)
                continue
            w = e.nbytes
            if w > nbytes or nbytes % w:
                return None
            pieces = []
            for off in range(0, nbytes, w):
                h = bmap.get(addr + off)
                if h is None or h[2] != 0 or gen[h[0]].nbytes != w:
                    return None
                v = gen[h[0]].value
                if not fwd.renamable(v, memo, shfl):
                    return None
                c = conc.get((h[0], h[1]))
                if c is None:
                    c = conc[(h[0], h[1])] = fwd.concretize(v, envs_by_t[h[1]])
                pieces.append(c)
            pk = (w, *[p.digest for p in pieces])
            packed = packs.get(pk)
            if packed is None:
                packed = packs[pk] = mk_pack(pieces, 8 * w)
            trees.append(packed)
            tids.append(-1)
        got = reads[key] = fwd.interpolate(trees, tids, bits, self._fwd_leaves)
        return got

    def forward_ld(self, a: Poly, nbytes: int, count: int) -> list[Node] | None:
        """ld.shared of ``count`` registers of ``nbytes`` from this thread's own address."""
        setup = self._fwd_setup(a)
        if setup is None:
            return None
        gen, bmap, _, base = setup
        # a reduction's partials keep their butterflies for the balanced collapse and
        # thread_roots.read_at, unless the history holds what those cannot see past (a GEMM's
        # copies of its K loop's operands, stores summarised by a loop): then they are
        # forwarded too
        shfl = self.has_mma and any(e.kind != "st" or e.addr.poly is None for e in self.smem)
        out = []
        for k in range(count):
            v = self._fwd_read(gen, bmap, [b + k * nbytes for b in base], nbytes, shfl=shfl)
            if v is None:
                return None
            out.append(v)
        self.fwd_bar = self.bars
        return out


def _restrict_by_bound(a: Poly, p: Node) -> Poly:
    """Under a lane predicate ``F < K`` (F a sum of distinct thread bits, K a power of two) the
    bits of F worth K or more are 0 on every lane that runs: the address of a predicated
    shared load is only ever taken with them cleared."""
    if p.kind != "cmp" or p.attrs[0] != "le" or len(p.kids) != 2:
        return a
    diff = p.kids[0].poly  # canonical form: F - K + 1 <= 0, i.e. F < K
    if (
        diff is None
        or p.kids[1].poly is None
        or not p.kids[1].poly.is_const()
        or p.kids[1].poly.const_value()
    ):
        return a
    bits, rest = diff.split_bits()
    if bits is None or not rest.is_const() or rest.const_value() >= 1:
        return a
    k = 1 - rest.const_value()
    if k <= 0 or k & (k - 1):
        return a
    for pos, sym in bits.items():
        if (1 << pos) >= k:
            a = a.substitute(sym, Poly.const(0))
    return a


def _regs(s: str) -> list[str]:
    s = s.strip()
    if s.startswith("{"):
        return [x.strip() for x in split_args(s[1:-1]) if x.strip()]
    return [s.split("|")[0].strip()]


def mk_slice(v: Node, off: int, width: int) -> Node:
    """Bits [off, off+width) of a value, folded into loads, packs and constants."""
    if v.kind == "load" and off % 8 == 0 and width % 8 == 0:
        assert v.kids[0].poly is not None
        return Node("load", (v.attrs[0], width // 8), (int_node(v.kids[0].poly + Poly.const(off // 8)),))
    if v.kind == "masked":
        return Node("masked", (), (mk_slice(v.kids[0], off, width), mk_slice(v.kids[1], off, width)))
    if v.kind == "pack" and v.attrs and isinstance(v.attrs[0], int):
        w = v.attrs[0]
        if off % w == 0 and width == w:
            return v.kids[off // w]
    if v.poly is not None and v.poly.is_const():
        return int_node(Poly.const((v.poly.const_value() >> off) & ((1 << width) - 1)))
    return Node("slice", (off, width), (v,))


def mk_pack(pieces: list[Node], width: int) -> Node:
    """Concatenate pieces (lowest first); undoes a slice of one value into its whole."""
    if pieces and all(p.kind == "slice" and p.attrs == (k * width, width) for k, p in enumerate(pieces)):
        src = pieces[0].kids[0]
        if all(p.kids[0].digest == src.digest for p in pieces):
            return src
    if all(p.poly is not None and p.poly.is_const() for p in pieces):
        v = 0
        for k, p in enumerate(pieces):
            assert p.poly is not None
            v |= (p.poly.const_value() & ((1 << width) - 1)) << (k * width)
        return int_node(Poly.const(v))
    return Node("pack", (width,), tuple(pieces))


def _float_only(self: PTXWalk, ins: Inst, parts: list[str]) -> bool | None:
    return self.float_op(ins, parts)


for _name in ("fma", "ex2", "lg2", "rcp", "sqrt", "rsqrt", "sin", "cos", "tanh", "copysign"):
    setattr(PTXWalk, "op_" + _name, _float_only)


def _word_offsets(a: Poly, nbits: int) -> list[int] | None:
    """``thread_offsets`` when every coefficient of ``a`` is a multiple of 4 (so 4-byte accesses
    at two such offsets either coincide or do not overlap); None otherwise."""
    if any(c % 4 for m, c in a.terms.items() if m != ("smem",)):
        return None
    return thread_offsets(a, nbits)
