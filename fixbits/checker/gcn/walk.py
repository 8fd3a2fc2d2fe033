"""Transfer functions of AMDGCN instructions over the symbolic work-item (the twin of the PTX walk).

Modelled: VALU float combines (add/mul/fma/fmac/min/max and the rest as named nodes), DPP lane
moves (row_shr, row_bcast, quad_perm, ... kept with their masks), ds_swizzle / ds_bpermute /
v_permlane as lane exchanges, LDS writes and reads with s_barrier as the cross-wave exchange,
MFMA chains, buffer/global loads and stores with their addresses, the exec mask as the lane
predicate, and scalar/vector index arithmetic. Anything else is an opaque node over its operands.
A 64-bit register pair holds its value in the low register (addresses assumed not to overflow).
"""

from __future__ import annotations

import re

from fixbits.checker.forms import Poly, exact_and, exact_bfe, exact_or, exact_shr, token
from fixbits.checker.gcn.parse import GInst, GKernel, expand_reg
from fixbits.checker.node import Node, const_bits, int_node, opaque
from fixbits.checker.walk import TRUE, Unsupported, Walk, icmp, mk_not, mk_select, pred_is_coordinate, to_poly

_FLOAT_KIND = {
    "add": "add", "mul": "mul", "max": "max", "min": "min", "fma": "fma", "sub": "sub",
    "mac": "fma", "fmac": "fma",
}  # fmt: skip
_HARMLESS = ("s_waitcnt", "s_nop", "s_setprio", "s_sleep", "s_dcache", "buffer_wbinvl1", "buffer_inv",
             "s_sethalt", "s_setreg", "s_getreg", "s_trap", "s_icache", "s_memtime", "s_memrealtime",
             "s_waitcnt_vscnt", "s_sched", "s_delay_alu", "s_clause", "s_set_gpr_idx", "s_ttracedata",
             "sched_barrier", "s_sched_barrier")  # fmt: skip
_OOB = 0x80000000


def _imm(tok: str) -> int | None:
    t = tok.strip()
    try:
        if re.fullmatch(r"-?0x[0-9a-fA-F]+", t):
            return int(t, 16)
        if re.fullmatch(r"-?\d+", t):
            return int(t)
    except ValueError:
        return None
    return None


class GCNWalk(Walk):
    def __init__(self, kernel: GKernel, has_mma: bool):
        super().__init__()
        self.k = kernel
        self.insts = kernel.insts
        self.has_mma = has_mma
        self.param_syms: set[str] = set()
        env: dict[str, Node] = {}
        env["s0"] = int_node(Poly.sym("kernarg"))
        env["s1"] = Node("hi", (), (env["s0"],))
        for i in range(kernel.preload_dwords):
            env[f"s{2 + i}"] = self._karg(4 * i)
        nxt = kernel.user_sgprs
        for d, on in zip("xyz", kernel.wg_ids, strict=False):
            if on:
                env[f"s{nxt}"] = int_node(Poly.sym(f"ctaid.{d}"))
                nxt += 1
        n = kernel.ntid[0] if kernel.ntid else 0
        if n and n & (n - 1) == 0 and kernel.workitem_dims == 0:
            env["v0"] = int_node(Poly.bits("tx", n.bit_length() - 1))
        else:
            env["v0"] = int_node(Poly.sym("tid.packed"))
        self.env = env

    def _karg(self, off: int) -> Node:
        s = f"p:{off}"
        self.param_syms.add(s)
        return int_node(Poly.sym(s))

    # ---- hooks -------------------------------------------------------------------------------
    def insts_len(self) -> int:
        return len(self.insts)

    def label_at(self, i: int) -> str | None:
        op = self.insts[i].op
        return op[1:] if op.startswith(":") else None

    def branch_target(self, i: int) -> str | None:
        ins = self.insts[i]
        if ins.op == "s_branch" or ins.op.startswith("s_cbranch_"):
            return ins.args[0]
        if ins.op in ("s_setpc_b64", "s_swappc_b64", "s_call_b64"):
            raise Unsupported(f"{ins.op} is not modelled")
        return None

    def branch_at(self, i: int) -> tuple[str, Node | None] | None:
        tgt = self.branch_target(i)
        if tgt is None:
            return None
        op = self.insts[i].op
        if op == "s_branch":
            return tgt, None
        cond = {
            "s_cbranch_scc1": lambda: self.get("scc"),
            "s_cbranch_scc0": lambda: mk_not(self.get("scc")),
            "s_cbranch_vccnz": lambda: Node("anylane", (), (self.get("vcc"),)),
            "s_cbranch_vccz": lambda: mk_not(Node("anylane", (), (self.get("vcc"),))),
            "s_cbranch_execnz": lambda: Node("anylane", (), (self.get_exec(),)),
            "s_cbranch_execz": lambda: mk_not(Node("anylane", (), (self.get_exec(),))),
        }.get(op)
        if cond is None:
            raise Unsupported(f"branch {op}")
        return tgt, cond()

    def is_return(self, i: int) -> bool:
        return self.insts[i].op == "s_endpgm"

    def written_regs(self, lo: int, hi: int) -> set[str]:
        out: set[str] = set()
        for ins in self.insts[lo:hi]:
            if ins.op.startswith(":") or not ins.args:
                continue
            if ins.op.startswith(
                (
                    "buffer_store",
                    "global_store",
                    "ds_write",
                    "s_cbranch",
                    "s_branch",
                    "flat_store",
                    "buffer_atomic",
                    "global_atomic",
                    "ds_add",
                    "s_barrier",
                )
            ):
                continue
            out.update(self._dst_regs(ins.args[0]))
            if ins.op.startswith(("v_cmp", "s_cmp")) or "_co_" in ins.op:
                out.update({"vcc", "scc"})
            if ins.op.startswith("s_"):
                out.add("scc")
            if ins.op.startswith(("v_cmpx", "s_and_saveexec", "s_or_saveexec", "s_andn2_saveexec")) or (
                ins.args[0] == "exec"
            ):
                out.add("exec")
        return out

    def _dst_regs(self, a: str) -> list[str]:
        a = a.strip()
        if a in ("vcc", "exec", "scc"):
            return [a]
        return [r for r in expand_reg(a) if re.fullmatch(r"[vsa]\d+", r)]

    # exec and scc live in the register map so loops and merges carry them
    def get_exec(self) -> Node:
        assert self.env is not None
        return self.env.get("exec", TRUE)

    def run(self) -> None:
        assert self.env is not None
        self.env["exec"] = TRUE
        super().run()

    # ---- operands ------------------------------------------------------------------------------
    def val(self, a: str) -> Node:
        a = a.strip()
        neg = a.startswith("-") and not re.fullmatch(r"-\d+|-0x[0-9a-fA-F]+", a)
        if neg:
            return Node("neg", (), (self.val(a[1:]),))
        if a.startswith("|") and a.endswith("|"):
            return Node("fabs", (), (self.val(a[1:-1]),))
        if a.startswith(("abs(", "neg(")):
            return Node(a[:3] if a[0] == "a" else "neg", (), (self.val(a[4:-1]),))
        regs = expand_reg(a)
        if re.fullmatch(r"[vsa]\d+", regs[0]):
            return self.get(regs[0])
        if a in ("vcc", "vcc_lo"):
            return self.get("vcc")
        if a == "exec":
            return self.get_exec()
        if a == "scc":
            return self.get("scc")
        if a in ("m0",):
            return self.get("m0")
        im = _imm(a)
        if im is not None:
            return int_node(Poly.const(im))
        fm = re.fullmatch(r"(-?\d+\.\d*(?:e[-+]?\d+)?)", a)
        if fm:
            return Node("fconst", (a,))
        if a == "off":
            return int_node(Poly.const(0))
        return opaque("operand:" + a)

    def pval(self, a: str) -> Poly:
        return to_poly(self.val(a))

    def wr(self, ins: GInst, reg: str, new: Node, kind: str = "") -> None:
        """Write a vector register under the exec mask (a scalar write ignores exec)."""
        assert self.env is not None
        if not reg.startswith("v") and not reg.startswith("a"):
            self.env[reg] = new
            return
        ex = self.get_exec()
        if ex.kind == "true":
            self.env[reg] = new
            return
        old = self.env.get(reg)
        if pred_is_coordinate(ex):
            self.env[reg] = Node("masked", (), (new, old)) if kind == "load" and old is not None else new
            return
        self.env[reg] = mk_select(ex, new, old if old is not None else Node("undef", ()))

    def wr_pair(self, ins: GInst, dst: str, value: Node) -> None:
        regs = self._dst_regs(dst)
        self.wr(ins, regs[0], value)
        for r in regs[1:]:
            self.wr(ins, r, Node("hi", (), (value,)))

    # ---- transfer function -------------------------------------------------------------------
    def step(self, i: int) -> None:
        ins = self.insts[i]
        op = ins.op
        if op.startswith(_HARMLESS):
            return
        if op == "s_barrier":
            self.barrier()
            return
        try:
            done = self.dispatch(ins)
        except (IndexError, KeyError) as e:
            raise Unsupported(f"{ins.text[:60]}: {e}") from e
        if not done:
            self.unknown(ins)

    def unknown(self, ins: GInst) -> None:
        kids = tuple(self.val(a) for a in ins.args[1:])
        if ins.op.startswith("ds_"):
            kids = kids + (self.smem_history(),)  # what it reads from LDS is part of its value
        node = opaque(ins.op + " " + " ".join(ins.mods), kids)
        if ins.op.startswith(("buffer_atomic", "global_atomic", "flat_atomic", "ds_add_f", "ds_add_rtn_f")):
            self.nondeterministic = True
        writes_mem = ins.op.startswith(
            ("buffer_", "global_", "flat_", "ds_", "scratch_", "s_store", "s_buffer_store")
        )
        if writes_mem or not ins.args:
            allk = tuple(self.val(a) for a in ins.args)
            self.effects.append(opaque(ins.op + " " + " ".join(ins.mods), allk + (self.get_exec(),)))
            if ins.op.startswith(("ds_", "buffer_", "global_", "flat_")):
                # an unmodelled write may land in LDS: no later read may assume what is there
                self.smem_store("st", int_node(Poly.const(0)), Node("smemwrite", (ins.op,), allk), None, -1)
        if ins.args:
            regs = self._dst_regs(ins.args[0])
            for k, r in enumerate(regs):
                self.wr(ins, r, Node("opaque", (ins.op, k), kids))
        del node

    def dispatch(self, ins: GInst) -> bool:
        op = ins.op
        a = ins.args
        if op.startswith("v_cmp"):
            return self.v_cmp(ins)
        if op.startswith("s_cmp"):
            m = re.match(r"s_cmp_(\w+?)_([iub]\d+)", op)
            if not m:
                return False
            self.set("scc", self._cmp(m.group(1), m.group(2), self.val(a[0]), self.val(a[1])))
            return True
        if op in (
            "s_mov_b32",
            "s_mov_b64",
            "v_mov_b32",
            "v_accvgpr_write_b32",
            "v_accvgpr_read_b32",
            "v_accvgpr_mov_b32",
            "s_movk_i32",
            "v_mov_b64",
        ):
            dst = a[0]
            if dst == "exec":
                self.set("exec", self.val(a[1]))
                return True
            v = self.val(a[1])
            if (
                op.endswith("_dpp")
                or ins.mods
                and any(m.startswith(("row_", "quad_perm", "wave_")) for m in ins.mods)
            ):
                v = self._dpp(ins, v)
            if op in ("s_mov_b64", "v_mov_b64"):
                self.wr_pair(ins, dst, v)
            else:
                self.wr(ins, self._dst_regs(dst)[0], v)
            return True
        if op == "v_mov_b32_dpp":
            v = self._dpp(ins, self.val(a[1]))
            self.wr(ins, self._dst_regs(a[0])[0], v)
            return True
        if op.startswith(("s_and_saveexec_b64", "s_or_saveexec_b64", "s_andn2_saveexec_b64")):
            old = self.get_exec()
            src = self.val(a[1])
            self.wr_pair(ins, a[0], old)
            if op.startswith("s_and_"):
                self.set("exec", Node("and", ("pred",), (old, src)) if old.kind != "true" else src)
            elif op.startswith("s_or_"):
                self.set("exec", Node("or", ("pred",), (old, src)))
            else:
                self.set("exec", Node("and", ("pred",), (old, mk_not(src))))
            return True
        if op in (
            "s_and_b64",
            "s_or_b64",
            "s_xor_b64",
            "s_andn2_b64",
            "s_orn2_b64",
            "s_and_b32",
            "s_or_b32",
            "s_xor_b32",
            "s_andn2_b32",
        ):
            return self.s_logic(ins)
        if op.startswith("s_cselect"):
            v = mk_select(self.get("scc"), self.val(a[1]), self.val(a[2]))
            if v.kind == "select" and all(k.poly is not None for k in v.kids[1:]):
                v = self._int_tok(op, [v], ins)
            if op.endswith("b64"):
                self.wr_pair(ins, a[0], v)
            else:
                self.set(self._dst_regs(a[0])[0], v)
            return True
        if op.startswith("s_load_dword") or op.startswith("s_buffer_load"):
            return self.s_load(ins)
        if op.startswith(("buffer_load", "global_load", "flat_load")):
            if "lds" in ins.mods or "_lds" in op:
                return False  # loads straight into LDS: an unmodelled LDS write (see unknown)
            return self.vload(ins)
        if op.startswith(("buffer_store", "global_store", "flat_store")):
            return self.vstore(ins)
        if op.startswith("ds_read") or op.startswith("ds_load"):
            return self.ds_read(ins)
        if op.startswith("ds_write") or op.startswith("ds_store"):
            return self.ds_write(ins)
        if op in ("ds_swizzle_b32", "ds_bpermute_b32", "ds_permute_b32") or op.startswith("v_permlane"):
            kids = tuple(self.val(x) for x in a[1:])
            self.wr(ins, self._dst_regs(a[0])[0], Node("lanex", (op, " ".join(ins.mods)), kids))
            return True
        if op.startswith(("v_readlane", "v_readfirstlane")):
            src = self.val(a[1])
            v = src if not src.variant else Node("lanex", (op,), tuple(self.val(x) for x in a[1:]))
            self.set(self._dst_regs(a[0])[0], v)
            return True
        if op.startswith("v_writelane"):
            return False
        if op.startswith(("v_mfma", "v_smfmac", "v_wmma")):
            return self.mfma(ins)
        if op == "v_cndmask_b32" or op == "v_cndmask_b32_dpp":
            return self.cndmask(ins)
        if (
            op.startswith("v_")
            and re.search(r"_(f16|f32|f64|bf16)(_|$)", op)
            and not op.startswith("v_cvt_u32")
            and not op.startswith(("v_cvt_i32", "v_cvt_u16", "v_cvt_i16", "v_cvt_f32_u32", "v_cvt_f32_i32"))
        ):
            return self.vfloat(ins)
        return self.vint(ins)

    # ---- pieces ------------------------------------------------------------------------------
    def _cmp(self, cmp: str, ty: str, x: Node, y: Node) -> Node:
        if ty[0] in "iub":
            return icmp(cmp, ty[0], to_poly(x) - to_poly(y))
        return Node("cmp", (cmp, ty), (x, y))

    def v_cmp(self, ins: GInst) -> bool:
        m = re.match(r"v_cmpx?_(\w+?)_([iufb]\d+)", ins.op)
        if not m:
            return False
        a = ins.args
        if ins.op.startswith("v_cmpx"):
            # writes exec directly (and, on gfx9, also the sdst)
            x, y = (self.val(t) for t in a[-2:])
            n = self._cmp(m.group(1), m.group(2), x, y)
            self.set("exec", Node("and", ("pred",), (self.get_exec(), n)))
            return True
        if len(a) == 3:
            dst, x, y = a[0], self.val(a[1]), self.val(a[2])
        else:
            dst, x, y = "vcc", self.val(a[0]), self.val(a[1])
        n = self._cmp(m.group(1), m.group(2), x, y)
        ex = self.get_exec()
        if ex.kind != "true":
            n = Node("and", ("pred",), (ex, n))
        if dst == "vcc":
            self.set("vcc", n)
        else:
            self.wr_pair(ins, dst, n)
        return True

    def s_logic(self, ins: GInst) -> bool:
        a = ins.args
        x, y = self.val(a[1]), self.val(a[2])
        op = ins.op
        is_pred = x.poly is None or y.poly is None
        if is_pred:
            base = op.split("_")[1]
            if base == "and":
                n = Node("and", ("pred",), (x, y))
            elif base == "or":
                n = Node("or", ("pred",), (x, y))
            elif base == "andn2":
                n = Node("and", ("pred",), (x, mk_not(y)))
            elif base == "xor":
                n = Node("xor", ("pred",), (x, y))
            else:
                n = Node("opaque", (op,), (x, y))
        else:
            px, py = x.poly, y.poly
            assert px is not None and py is not None
            r = None
            if op.startswith("s_and"):
                if not op.startswith("s_andn2"):
                    if py.is_const():
                        r = exact_and(px, py.const_value())
                    elif px.is_const():
                        r = exact_and(py, px.const_value())
            elif op.startswith("s_or_"):
                r = exact_or(px, py)
            n = int_node(r) if r is not None else self._int_tok(op, [x, y], ins)
        dst = a[0]
        if dst == "exec":
            cur = self.get_exec()
            if op.startswith("s_or") and x.digest == cur.digest and (y.kind == "true" or _covers(y, cur)):
                self.set("exec", y)  # restore of the mask saved by the matching saveexec
            else:
                self.set("exec", n)
            return True
        if op.endswith("b64"):
            self.wr_pair(ins, dst, n)
        else:
            self.set(self._dst_regs(dst)[0], n)
        self.set("scc", Node("nonzero", (), (n,)))
        return True

    def _int_tok(self, op: str, kids: list[Node], ins: GInst) -> Node:
        variant = any(k.variant for k in kids)
        p = token(op + " " + " ".join(ins.mods), [k.digest for k in kids], variant)
        if any(k.poly is None or k.poly.has_data() for k in kids):
            p = Poly.sym("D:" + p.text().split(":", 1)[1])
        return int_node(p)

    def s_load(self, ins: GInst) -> bool:
        dsts = self._dst_regs(ins.args[0])
        base = self.val(ins.args[1])
        off = _imm(ins.args[2]) if len(ins.args) > 2 else 0
        if base.poly is not None and base.poly == Poly.sym("kernarg") and off is not None:
            for k, r in enumerate(dsts):
                self.set(r, self._karg(off + 4 * k))
            return True
        addr = to_poly(base) + Poly.const(off or 0)
        for k, r in enumerate(dsts):
            self.set(r, Node("load", ("scalar", 4), (int_node(addr + Poly.const(4 * k)),)))
        return True

    def _offset_mod(self, ins: GInst) -> int:
        for m in ins.mods:
            if m.startswith("offset:"):
                return int(m.split(":")[1], 0)
        return 0

    def _buffer_addr(
        self, ins: GInst, voff_arg: str, rsrc_arg: str, soff_arg: str | None
    ) -> tuple[Poly, Node | None]:
        rsrc = expand_reg(rsrc_arg)
        base = to_poly(self.get(rsrc[0])) if re.fullmatch(r"s\d+", rsrc[0]) else to_poly(self.val(rsrc_arg))
        cond = None
        voff = Poly.const(0)
        if "offen" in ins.mods:
            vnode = self.val(voff_arg)
            if vnode.kind == "oobsel":
                cond, vnode = vnode.kids[0], vnode.kids[1]
            voff = to_poly(vnode)
        soff = to_poly(self.val(soff_arg)) if soff_arg is not None else Poly.const(0)
        return base + voff + soff + Poly.const(self._offset_mod(ins)), cond

    def _width(self, op: str) -> tuple[int, int]:
        """(registers, bytes per register) of a load/store opcode."""
        m = re.search(r"_(dword|b)(x?)(\d*)$", op)
        if op.endswith(("ushort", "short", "u16", "i16", "b16", "d16", "d16_hi")):
            return 1, 2
        if op.endswith(("ubyte", "sbyte", "u8", "i8", "b8")):
            return 1, 1
        if m and m.group(1) == "dword":
            return (int(m.group(3)) if m.group(3) else 1), 4
        if m and m.group(1) == "b":
            bits = int(m.group(3))
            return max(1, bits // 32), min(4, bits // 8)
        return 1, 4

    def vload(self, ins: GInst) -> bool:
        a = ins.args
        dsts = self._dst_regs(a[0])
        nregs, nb = self._width(ins.op)
        if ins.op.startswith("buffer_"):
            addr, cond = self._buffer_addr(ins, a[1], a[2], a[3] if len(a) > 3 else None)
        else:
            vaddr = self.val(a[1])
            saddr = to_poly(self.val(a[2])) if len(a) > 2 and a[2] != "off" else Poly.const(0)
            addr, cond = to_poly(vaddr) + saddr + Poly.const(self._offset_mod(ins)), None
        if len(dsts) != nregs:
            raise Unsupported(f"load arity {ins.text[:60]}")
        for k, r in enumerate(dsts):
            v = Node("load", ("global", nb), (int_node(addr + Poly.const(k * nb)),))
            if cond is not None:
                v = (
                    Node("masked", (), (v, int_node(Poly.const(0))))
                    if pred_is_coordinate(cond)
                    else mk_select(cond, v, int_node(Poly.const(0)))
                )
            self.wr(ins, r, v, kind="load")
        return True

    def vstore(self, ins: GInst) -> bool:
        a = ins.args
        nregs, nb = self._width(ins.op)
        srcs = expand_reg(a[0])
        if ins.op.startswith("buffer_"):
            addr, cond = self._buffer_addr(ins, a[1], a[2], a[3] if len(a) > 3 else None)
        else:
            srcs = expand_reg(a[1])
            vaddr = self.val(a[0])
            saddr = to_poly(self.val(a[2])) if len(a) > 2 and a[2] != "off" else Poly.const(0)
            addr, cond = to_poly(vaddr) + saddr + Poly.const(self._offset_mod(ins)), None
        ex = self.get_exec()
        preds = [p for p in (ex if ex.kind != "true" else None, cond) if p is not None]
        for k, r in enumerate(srcs[:nregs]):
            v = self.val(r)
            for p in preds:
                if not pred_is_coordinate(p):
                    v = Node("select", (), (p, v, Node("keep", ())))
            self.global_store(addr + Poly.const(k * nb), v, nb)
        return True

    def ds_read(self, ins: GInst) -> bool:
        a = ins.args
        dsts = self._dst_regs(a[0])
        nregs, nb = self._width(ins.op)
        addr = to_poly(self.val(a[1])) + Poly.const(self._offset_mod(ins)) + Poly.sym("smem")
        if "2st64" in ins.op or ins.op.startswith(("ds_read2", "ds_load_2")):
            return False
        for k, r in enumerate(dsts):
            self.wr(ins, r, self.smem_load(int_node(addr + Poly.const(k * nb)), nb))
        return True

    def ds_write(self, ins: GInst) -> bool:
        a = ins.args
        if ins.op.startswith(("ds_write2", "ds_store_2")):
            return False
        nregs, nb = self._width(ins.op)
        addr = to_poly(self.val(a[0])) + Poly.const(self._offset_mod(ins)) + Poly.sym("smem")
        srcs = expand_reg(a[1])
        ex = self.get_exec()
        pred = None if ex.kind == "true" else ex
        for k, r in enumerate(srcs[:nregs]):
            self.smem_store("st", int_node(addr + Poly.const(k * nb)), self.val(r), pred, nb)
        return True

    def mfma(self, ins: GInst) -> bool:
        a = ins.args
        m = re.match(r"v_(mfma|smfmac|wmma)_(\w+?)_(\d+)x(\d+)x(\d+)_?(\w*)", ins.op)
        if not m or len(a) < 4:
            return False
        dsts = self._dst_regs(a[0])
        srcc = expand_reg(a[3])
        if len(srcc) != len(dsts):
            srcc = [srcc[0]] * len(dsts) if len(srcc) == 1 else srcc
        if len(srcc) != len(dsts):
            return False
        A = Node("pack", ("vec",), tuple(self.val(x) for x in expand_reg(a[1])))
        B = Node("pack", ("vec",), tuple(self.val(x) for x in expand_reg(a[2])))
        sig = (m.group(1), f"k{m.group(5)}", f"{m.group(2)}.{m.group(6)}", tuple(sorted(ins.mods)))
        olds = [self.val(x) for x in srcc]
        for idx, r in enumerate(dsts):
            self.wr(ins, r, Node("mma", (sig, idx), (olds[idx], A, B, TRUE)))
        return True

    def cndmask(self, ins: GInst) -> bool:
        a = ins.args
        dst = self._dst_regs(a[0])[0]
        x, y = self.val(a[1]), self.val(a[2])
        c = self.val(a[3]) if len(a) > 3 else self.get("vcc")
        # d = c ? y : x. An out-of-range buffer offset on the false side is a masked access.
        if x.poly is not None and x.poly.is_const() and x.poly.const_value() == _OOB:
            self.wr(ins, dst, Node("oobsel", (), (c, y)))
            return True
        if x.poly is not None and y.poly is not None:
            self.wr(ins, dst, self._int_tok("cndmask", [c, x, y], ins))
            return True
        self.wr(ins, dst, mk_select(c, y, x))
        return True

    def _dpp(self, ins: GInst, src: Node) -> Node:
        ctrl = tuple(m for m in ins.mods if not m.startswith(("row_mask", "bank_mask")))
        return Node("dpp", ctrl, (src,))

    def _dpp_masked(self, ins: GInst, result: Node, old: Node) -> Node:
        rm = next((m for m in ins.mods if m.startswith("row_mask")), "row_mask:0xf")
        bm = next((m for m in ins.mods if m.startswith("bank_mask")), "bank_mask:0xf")
        if int(rm.split(":")[1], 0) == 0xF and int(bm.split(":")[1], 0) == 0xF:
            return result
        return Node("dppmask", (rm, bm), (result, old))

    def vfloat(self, ins: GInst) -> bool:
        op = ins.op
        dpp = op.endswith("_dpp") or any(m.startswith(("row_", "quad_perm", "wave_")) for m in ins.mods)
        base = op[:-4] if op.endswith("_dpp") else op
        base = re.sub(r"_sdwa$", "", base)
        m = re.match(r"v_(pk_)?(\w+?)_(f16|f32|f64|bf16)$", base)
        a = ins.args
        dst = a[0]
        if "_co_" in base or dst in ("vcc",):
            return False
        ops = [self.val(x) for x in a[1:]]
        if dpp and ops:
            ops[0] = self._dpp(ins, ops[0])
        mods = tuple(
            sorted(
                x
                for x in ins.mods
                if not x.startswith(("row_", "quad_perm", "bank_mask", "bound_ctrl", "wave_", "fi:"))
            )
        )
        old = self.val(self._dst_regs(dst)[0]) if self._dst_regs(dst) else Node("undef", ())
        if m and not m.group(1):
            name, ty = m.group(2), m.group(3)
            if name in ("fmac", "mac"):
                node = Node("fma", (ty,) + mods, (ops[0], ops[1], old))
            elif name == "subrev":
                node = Node("sub", (ty,) + mods, (ops[1], ops[0]))
            elif name in _FLOAT_KIND:
                node = Node(_FLOAT_KIND[name], (ty,) + mods, tuple(ops))
            else:
                node = Node("v_" + name, (ty,) + mods, tuple(ops))
        else:
            node = Node(base, mods, tuple(ops))
        if dpp:
            node = self._dpp_masked(ins, node, old)
        regs = self._dst_regs(dst)
        if len(regs) == 1:
            self.wr(ins, regs[0], node)
        else:
            for k, r in enumerate(regs):
                self.wr(ins, r, Node("part", (k,), (node,)))
        return True

    def vint(self, ins: GInst) -> bool:
        op = re.sub(r"_(dpp|sdwa)$", "", ins.op)
        a = ins.args
        if not a:
            return False
        regs = self._dst_regs(a[0])
        if not regs:
            return False
        srcs: list[str] = list(a[1:])
        r: Poly | None
        if "_co_" in op or op.startswith(("v_addc", "v_subb", "s_addc", "s_subb")):
            # carry-out adds: the sum is exact, the carry register becomes data
            if len(a) >= 4 and a[1] in ("vcc",) or re.fullmatch(r"s\[\d+:\d+\]", a[1]):
                srcs = list(a[2:])
            if op.startswith(("v_addc", "v_subb", "s_addc", "s_subb")):
                self.wr(ins, regs[0], Node("hi", ("carry",), tuple(self.val(x) for x in srcs)))
                return True
        if op.startswith(("s_add_u32", "s_add_i32", "v_add_u32", "v_add_i32", "v_add_co_u32", "s_add_co")):
            r = self.pval(srcs[0]) + self.pval(srcs[1])
        elif op.startswith(("s_sub_u32", "s_sub_i32", "v_sub_u32", "v_sub_i32", "v_sub_co_u32")):
            r = self.pval(srcs[0]) - self.pval(srcs[1])
        elif op.startswith(("v_subrev_u32", "v_subrev_co_u32")):
            r = self.pval(srcs[1]) - self.pval(srcs[0])
        elif op.startswith(("s_mul_i32", "v_mul_lo_u32", "v_mul_u32_u24", "v_mul_i32_i24")):
            r = self.pval(srcs[0]) * self.pval(srcs[1])
        elif op.startswith(("v_mad_u32_u24", "v_mad_i32_i24", "v_mad_u64_u32", "v_mad_i64_i32")):
            if op.startswith(("v_mad_u64", "v_mad_i64")):
                srcs = [s for s in srcs if not re.fullmatch(r"s\[\d+:\d+\]|vcc", s)]
            r = self.pval(srcs[0]) * self.pval(srcs[1]) + self.pval(srcs[2])
        elif op.startswith(("s_lshl_b32", "s_lshl_b64")):
            r = self._shl(self.pval(srcs[0]), self.pval(srcs[1]))
        elif op.startswith(("v_lshlrev_b32", "v_lshlrev_b64", "v_lshlrev_b16")):
            r = self._shl(self.pval(srcs[1]), self.pval(srcs[0]))
        elif op.startswith(("s_lshr_b32",)):
            r = self._shr(self.pval(srcs[0]), self.pval(srcs[1]))
        elif op.startswith(("v_lshrrev_b32",)):
            r = self._shr(self.pval(srcs[1]), self.pval(srcs[0]))
        elif op.startswith(("v_lshl_add_u32", "v_lshl_add_u64")):
            s = self._shl(self.pval(srcs[0]), self.pval(srcs[1]))
            r = s + self.pval(srcs[2]) if s is not None else None
        elif op.startswith("v_add_lshl_u32"):
            r = self._shl(self.pval(srcs[0]) + self.pval(srcs[1]), self.pval(srcs[2]))
        elif op.startswith("v_lshl_or_b32"):
            s = self._shl(self.pval(srcs[0]), self.pval(srcs[1]))
            r = exact_or(s, self.pval(srcs[2])) if s is not None else None
        elif op.startswith(("v_add3_u32",)):
            r = self.pval(srcs[0]) + self.pval(srcs[1]) + self.pval(srcs[2])
        elif op.startswith(("v_or3_b32",)):
            t = exact_or(self.pval(srcs[0]), self.pval(srcs[1]))
            r = exact_or(t, self.pval(srcs[2])) if t is not None else None
        elif op.startswith(("v_and_b32", "s_and_b32")):
            x, y = self.pval(srcs[0]), self.pval(srcs[1])
            r = (
                exact_and(y, x.const_value())
                if x.is_const()
                else exact_and(x, y.const_value())
                if y.is_const()
                else None
            )
        elif op.startswith(("v_or_b32", "s_or_b32")):
            r = exact_or(self.pval(srcs[0]), self.pval(srcs[1]))
        elif op.startswith(("v_xor_b32", "s_xor_b32")):
            x, y = self.pval(srcs[0]), self.pval(srcs[1])
            r = (
                Poly.const(x.const_value() ^ y.const_value())
                if x.is_const() and y.is_const()
                else exact_or(x, y)
            )
        elif op.startswith(("v_bfe_u32", "s_bfe_u32")):
            x, pos, ln = (self.pval(s) for s in srcs[:3])
            r = (
                exact_bfe(x, pos.const_value(), ln.const_value())
                if pos.is_const() and ln.is_const()
                else None
            )
        elif op in ("v_bfrev_b32",):
            x = self.pval(srcs[0])
            r = Poly.const(int(f"{x.const_value() & 0xFFFFFFFF:032b}"[::-1], 2)) if x.is_const() else None
        elif op.startswith("v_pack_b32_f16"):
            self.wr(ins, regs[0], _pack([self.val(srcs[0]), self.val(srcs[1])], 16))
            return True
        else:
            kids = [self.val(x) for x in srcs]
            if op.startswith(("v_", "s_")) and kids and all(k.poly is not None for k in kids):
                self.wr(ins, regs[0], self._int_tok(op, kids, ins))
                for r2 in regs[1:]:
                    self.wr(ins, r2, Node("hi", (), (self.get(regs[0]),)))
                return True
            return False
        if r is None:
            node = self._int_tok(op, [self.val(x) for x in srcs], ins)
        else:
            node = int_node(r)
        self.wr(ins, regs[0], node)
        for r2 in regs[1:]:
            self.wr(ins, r2, Node("hi", (), (node,)))
        if op.startswith("s_"):
            self.set("scc", Node("opaque", ("scc", op), (node,)))
        return True

    def _shl(self, x: Poly, k: Poly) -> Poly | None:
        if k.is_const() and 0 <= k.const_value() < 64:
            return x.scale(1 << k.const_value())
        return None

    def _shr(self, x: Poly, k: Poly) -> Poly | None:
        if k.is_const() and 0 <= k.const_value() < 64:
            return exact_shr(x, k.const_value())
        return None


def _covers(saved: Node, cur: Node) -> bool:
    """True when ``cur`` is ``saved`` narrowed by further ands (so or-ing restores ``saved``)."""
    n = cur
    while n.kind == "and" and n.kids:
        if any(k.digest == saved.digest for k in n.kids):
            return True
        n = n.kids[0]
    return False


def _pack(pieces: list[Node], width: int) -> Node:
    if all(p.poly is not None and p.poly.is_const() for p in pieces):
        v = 0
        for k, p in enumerate(pieces):
            assert p.poly is not None
            v |= (p.poly.const_value() & ((1 << width) - 1)) << (k * width)
        return const_bits(v, 32)
    return Node("pack", (width,), tuple(pieces))
