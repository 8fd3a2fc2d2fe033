"""Where two kernels' trees part, in words a kernel author reads."""

from __future__ import annotations

from fixbits.checker.node import Node, render
from fixbits.checker.signature import KernelSignature

_MODE_WORD = {"bfly": "butterfly", "down": "shift-down", "up": "shift-up", "idx": "indexed"}


def shuffle_chain(n: Node) -> list[tuple[str, int | None]]:
    """(mode, offset) of the lane exchanges folded into ``n``, outermost first."""
    out: list[tuple[str, int | None]] = []
    cur = n
    while cur.kind in ("add", "max", "min", "mul", "fma") and len(cur.kids) >= 2:
        sh = next((k for k in cur.kids if k.kind == "shfl"), None)
        if sh is None:
            break
        off = sh.kids[1]
        offv = off.poly.const_value() if off.poly is not None and off.poly.is_const() else None
        out.append((str(sh.attrs[0]), offv))
        cur = next((k for k in cur.kids if k is not sh), cur.kids[0])
    return out


def _chain_words(ch: list[tuple[str, int | None]]) -> str:
    offs = [o for _, o in ch]
    inner_first = list(reversed(offs))
    if all(o is not None for o in inner_first) and len(inner_first) > 1:
        vals = [o for o in inner_first if o is not None]
        order = (
            "count down"
            if vals == sorted(vals, reverse=True)
            else "count up"
            if vals == sorted(vals)
            else "mixed"
        )
        mode = _MODE_WORD.get(ch[0][0], ch[0][0])
        return f"{mode} shuffle offsets {','.join(str(v) for v in vals)} ({order})"
    return "shuffles " + ",".join(f"{m}:{o}" for m, o in reversed(ch))


def _describe_node(n: Node) -> str:
    if n.kind == "mmafold":
        sig = n.attrs[0]
        return f"a tensor-core K loop ({sig[0]} k={sig[1][1:]}, {sig[2]})"
    if n.kind == "loopout":
        return "a loop-carried accumulation " + render(n, 2)
    if n.kind in ("xwarp",):
        return "a cross-warp shared-memory exchange"
    if n.kind == "load":
        assert n.kids[0].poly is not None
        return f"a {n.attrs[1]}-byte load at [{n.kids[0].poly.text()}]"
    if n.kind == "opaque":
        return f"an unmodelled '{n.attrs[0]}'"
    return render(n, 2)


def _smem_words(x: Node) -> str:
    """Where the warps' partials were stored and where this read takes them."""
    hist = x.kids[1].kids
    st = [e for e in hist if e.kind == "st" and e.attrs[0] == "st"]
    warps = set()
    for e in st:
        p = e.kids[0].poly
        if p is not None:
            warps |= {s for s in p.symbols() if s.startswith("tx") and s[2:].isdigit() and int(s[2:]) >= 5}
    read = x.kids[0].poly.text() if x.kids[0].poly is not None else "?"
    return f"{2 ** len(warps)} warps' partials in {len(st)} shared-memory stores, read at [{read}]"


def first_difference(a: Node, b: Node, path: str = "") -> str:
    """Descend both trees along the first differing child; describe the node where they part."""
    ca, cb = shuffle_chain(a), shuffle_chain(b)
    if ca and cb and ca != cb:
        return f"A folds lanes with {_chain_words(ca)}, B with {_chain_words(cb)}"
    if a.kind == b.kind == "xwarp" and a.digest != b.digest:
        return (
            "both exchange partials across warps through shared memory, but with different layouts: "
            f"A {_smem_words(a)}, B {_smem_words(b)}"
        )
    if a.kind == b.kind == "balanced" and a.attrs != b.attrs:
        return f"A is a balanced tree of height {a.attrs[1]}, B of height {b.attrs[1]}"
    if a.kind == b.kind == "tma_store" and a.attrs[0] == b.attrs[0] == "tile":
        if a.attrs != b.attrs:
            return (
                f"the TMA stores' descriptors differ (rank, element type): A {a.attrs[1:]}, B {b.attrs[1:]}"
            )
        if a.kids[0].digest != b.kids[0].digest:
            return first_difference(a.kids[0], b.kids[0], path)
        dims = a.attrs[1]
        names = ["global address"] + [f"global dimension {i}" for i in range(dims)]
        names += [f"global stride {i}" for i in range(dims - 1)]
        for name, ka, kb in zip(names, a.kids[1:], b.kids[1:], strict=True):
            if ka.digest != kb.digest:
                return f"the TMA store's descriptor differs in its {name}: A {_describe_node(ka)}, B {_describe_node(kb)}"
    if a.kind == b.kind and a.attrs == b.attrs and len(a.kids) == len(b.kids):
        for ka, kb in zip(a.kids, b.kids, strict=False):
            if ka.digest != kb.digest:
                return first_difference(ka, kb, path)
        return "trees agree"
    if a.kind == b.kind and a.kind in ("add", "mul", "fma", "min", "max") and a.attrs != b.attrs:
        return f"A combines with {a.kind}.{a.attrs[0]}, B with {b.kind}.{b.attrs[0]}"
    if a.kind == b.kind == "mmafold":
        if a.attrs[:-1] == b.attrs[:-1]:  # (the last attribute: the operand key, mma_operands.py)
            return (
                f"both accumulate through {_describe_node(a)}, but multiply operands built differently "
                "(other base pointers, other arithmetic between the loads and the MMA, or other staged values)"
            )
        return f"A accumulates through {_describe_node(a)}, B through {_describe_node(b)}"
    if a.kind == b.kind == "int":
        return f"A reads address [{a.poly.text() if a.poly else '?'}], B [{b.poly.text() if b.poly else '?'}]"
    return f"A has {_describe_node(a)}, B has {_describe_node(b)}"


def trusted(s: KernelSignature) -> list[str]:
    """What an "equal" for this kernel takes on trust rather than reads from its code: the
    tensor-core K-loop exemption (walk.py), where a root holds a fold of MMAs."""
    seen: set[bytes] = set()
    stack = [r.value for o in s.outputs for r in o.roots]
    while stack:
        n = stack.pop()
        if n.digest in seen:
            continue
        seen.add(n.digest)
        if n.kind == "mmafold":
            return [
                "tensor-core K loops are read under the paper's exemption: their K tiles are taken "
                "to be walked in order and to be the tiles each output element needs, and each "
                "accumulator register to hold the element its store writes (the operands' base "
                "pointers, where their tiles start and how far they move per MMA, a loop bound "
                "read from the parameters, the arithmetic before the MMA, the staged values and, "
                "through wgmma descriptors, which staged tile feeds which operand are checked; "
                "which register holds which element is not)"
            ]
        stack.extend(n.kids)
    return []


def _proven_tma(s: KernelSignature) -> bool:
    return any(r.relative and r.value.kind == "tma_store" for o in s.outputs for r in o.roots)


def explain(a: KernelSignature, b: KernelSignature) -> str:
    if a.isa != b.isa:
        return f"different instruction sets ({a.isa} vs {b.isa})"
    if not a.deterministic or not b.deterministic:
        who = "A" if not a.deterministic else "B"
        return f"{who} is run-dependent (float atomics or clock reads): never certified equal, not even to itself"
    if a.fallback or b.fallback:
        why = a.fallback or b.fallback
        return f"compared as text because the walk stopped: {why}"
    pa = {o.param: o for o in a.outputs}
    pb = {o.param: o for o in b.outputs}
    if set(pa) != set(pb):
        ta, tb = _proven_tma(a), _proven_tma(b)
        if ta != tb:
            yes, no = ("A", "B") if ta else ("B", "A")
            return (
                f"{yes}'s TMA store is proven to write one tree per tile through its descriptor's pointer; "
                f"{no}'s is not (its tile is not one coordinate-free tree written by the last barrier "
                "generation, or its descriptor is not followed), so it stays keyed on the descriptor's address"
            )
        return f"they store through different outputs: A {sorted(pa)}, B {sorted(pb)}"
    for idx, param in enumerate(sorted(pa)):
        oa, ob = pa[param], pb[param]
        if oa.digest == ob.digest:
            continue
        label = f"output {idx} (param {param.split(':')[-1]})"
        if len(oa.roots) != len(ob.roots):
            ra, rb = oa.roots[0], ob.roots[0]
            diff = first_difference(ra.value, rb.value)
            return f"{label}: A stores {len(oa.roots)} distinct trees, B {len(ob.roots)}; first: {diff}"
        for ra, rb in zip(oa.roots, ob.roots, strict=False):
            if ra.value.digest != rb.value.digest:
                return f"{label}: " + first_difference(ra.value, rb.value)
            if ra.address.digest != rb.address.digest:
                return f"{label}: same tree stored at different places ({render(ra.address)} vs {render(rb.address)})"
        return f"{label}: stores differ"
    if a.physical != b.physical or a.ntid != b.ntid:
        return f"the trees depend on the thread layout and the launch bounds differ ({a.ntid} vs {b.ntid})"
    return "unmodelled side effects differ"
