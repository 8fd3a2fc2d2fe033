"""AMDGCN assembly reader (the text Triton's AMD backend emits): kernels, launch facts, instructions.

Register ranges (``v[2:5]``, ``s[4:11]``, ``a[0:15]``) expand to single 32-bit registers; operand
modifiers (``-v1``, ``|v1|``) are kept on the operand; trailing instruction modifiers
(``offen offset:16``, ``row_shr:8 row_mask:0xf``, ``cbsz:1``) are split off into ``mods``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


class GCNError(ValueError):
    """Malformed or unsupported AMDGCN text."""


@dataclass(frozen=True)
class GInst:
    op: str  # opcode without encoding suffix (_e32/_e64), e.g. "v_add_f32_dpp"; ":label" for labels
    args: tuple[str, ...]
    mods: tuple[str, ...]
    text: str


@dataclass
class GKernel:
    name: str
    insts: list[GInst] = field(default_factory=list)
    ntid: tuple[int, int, int] | None = None
    user_sgprs: int = 2
    preload_dwords: int = 0
    wg_ids: tuple[bool, bool, bool] = (True, False, False)
    workitem_dims: int = 0


_MOD_RE = re.compile(
    r"^(offen|idxen|glc|slc|dlc|nt|sc0|sc1|lds|off|gds|clamp|row_\w+:.*|bank_mask:.*|bound_ctrl:.*|quad_perm:.*|"
    r"offset\d?:.*|wave_\w+.*|row_mask:.*|fi:.*|cbsz:.*|abid:.*|blgp:.*|op_sel:.*|op_sel_hi:.*|neg_lo:.*|"
    r"neg_hi:.*|mul:\d|div:\d|dst_sel:.*|dst_unused:.*|src0_sel:.*|src1_sel:.*|swizzle\(.*|format:.*)$"
)


def expand_reg(tok: str) -> list[str]:
    """``v[2:3]`` -> ['v2', 'v3']; plain registers and other operands unchanged."""
    m = re.fullmatch(r"([vsa])\[(\d+):(\d+)\]", tok)
    if m:
        return [f"{m.group(1)}{i}" for i in range(int(m.group(2)), int(m.group(3)) + 1)]
    m = re.fullmatch(r"([vsa])\[(\d+)\]", tok)
    if m:
        return [f"{m.group(1)}{m.group(2)}"]
    return [tok]


def _split_operands(rest: str) -> tuple[list[str], list[str]]:
    parts: list[str] = []
    depth = 0
    cur = ""
    for ch in rest:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    mods: list[str] = []
    if parts:
        last = parts[-1].split()
        # modifiers trail the last operand, separated by spaces
        keep = []
        for i, tok in enumerate(last):
            if i > 0 and (_MOD_RE.match(tok) or ":" in tok):
                mods.append(tok)
            else:
                keep.append(tok)
        parts[-1] = " ".join(keep)
        # operands that are themselves modifiers (e.g. "off" as an address)
    return [p for p in parts if p != ""], mods


def parse_gcn(text: str) -> list[GKernel]:
    if not isinstance(text, str):
        raise GCNError("AMDGCN must be text")
    kernels: list[GKernel] = []
    globls = set(re.findall(r"^\s*\.globl\s+([\w.$]+)", text, re.M))
    lines = text.splitlines()
    cur: GKernel | None = None
    for raw in lines:
        line = raw.split(";", 1)[0].strip()
        if not line:
            continue
        if line.endswith(":") and re.fullmatch(r"[\w.$]+:", line):
            name = line[:-1]
            if name.startswith(".Lfunc_end"):
                cur = None
                continue
            if name in globls:
                cur = GKernel(name)
                kernels.append(cur)
                continue
            if cur is not None:
                cur.insts.append(GInst(":" + name, (), (), line))
            continue
        if cur is None or line.startswith("."):
            if cur is not None and line.startswith(".Lfunc_end"):
                cur = None
            continue
        m = re.match(r"^([a-z_][\w]*)\s*(.*)$", line)
        if not m:
            raise GCNError(f"kernel {cur.name}: cannot read {line[:80]!r}")
        op = re.sub(r"_e(32|64)$", "", m.group(1))
        args, mods = _split_operands(m.group(2))
        cur.insts.append(GInst(op, tuple(args), tuple(mods), line))
        if op == "s_endpgm":
            pass
    if not kernels:
        raise GCNError("no kernel symbol (.globl + label) found")
    for k in kernels:
        blk = re.search(r"\.amdhsa_kernel\s+" + re.escape(k.name) + r"\b(.*?)\.end_amdhsa_kernel", text, re.S)
        if blk:
            b = blk.group(1)

            def num(key: str, default: int, b: str = b) -> int:
                mm = re.search(r"\." + key + r"\s+(\d+)", b)
                return int(mm.group(1)) if mm else default

            k.user_sgprs = num("amdhsa_user_sgpr_count", 2)
            k.preload_dwords = num("amdhsa_user_sgpr_kernarg_preload_length", 0)
            k.wg_ids = (
                bool(num("amdhsa_system_sgpr_workgroup_id_x", 1)),
                bool(num("amdhsa_system_sgpr_workgroup_id_y", 0)),
                bool(num("amdhsa_system_sgpr_workgroup_id_z", 0)),
            )
            k.workitem_dims = num("amdhsa_system_vgpr_workitem_id", 0)
        reqd = re.search(r"\.reqd_workgroup_size:\s*\n\s*-\s*(\d+)\s*\n\s*-\s*(\d+)\s*\n\s*-\s*(\d+)", text)
        flat = re.search(r"\.max_flat_workgroup_size:\s*(\d+)", text)
        if reqd:
            k.ntid = (int(reqd.group(1)), int(reqd.group(2)), int(reqd.group(3)))
        elif flat:
            k.ntid = (int(flat.group(1)), 1, 1)
    return kernels
