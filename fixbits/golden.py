"""Golden records: bytes a GPU produced, kept so a CPU can check the emulator against hardware.

A record names everything needed to recompute its output without the GPU: the inputs by
(kind, seed, shape, dtype) through ``fixbits.inputs.draw``, the descriptor, and the sha256 of
the output bytes the GPU returned (plus, for small outputs, the bytes themselves so a mismatch
can say which element moved and by how many ulps). ``replay`` regenerates the inputs, runs
the emulator and compares hashes; CI without a GPU replays every file under matrices/golden/.

File format (YAML, named golden_*.yaml): ``records:`` a list of mappings with the GoldenRecord fields.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import hashlib
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from fixbits.desc import DescError, GEMMDesc
from fixbits.numerics import formats

GOLDEN_DIR = Path(__file__).resolve().parent.parent / "matrices" / "golden"
CASES: tuple[str, ...] = ("block", "gemm")
# outputs up to this many elements carry their bytes in the record (diagnosis of a mismatch)
INLINE_LIMIT = 4096


class GoldenError(ValueError):
    """A golden file or record is malformed; the message names the file and the key."""


@dataclass(frozen=True)
class GoldenRecord:
    """One recorded output. ``shape`` is (M, N, K); A is draw((M, K), in_dtype, input_kind,
    seed_a), B is draw((K, N), ...seed_b) and, for a block with an incoming accumulator, C is
    draw((M, N), 'fp32', input_kind, seed_acc). With epilogue ops, ``seed_side`` gives their
    operands (see ``side_inputs``)."""

    id: str
    suite: str
    case: str
    shape: tuple[int, int, int]
    in_dtype: str
    out_dtype: str
    input_kind: str
    seed_a: int
    seed_b: int
    descriptor: dict[str, Any]
    desc_hash: str
    sha256: str
    elements: int
    seed_acc: int | None = None
    seed_side: int | None = None
    env: dict[str, Any] = field(default_factory=dict)
    output_b64z: str | None = None
    note: str = ""

    def desc(self) -> GEMMDesc:
        return GEMMDesc.from_dict(self.descriptor, where=f"record {self.id}: descriptor")

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["shape"] = list(self.shape)
        return d


@dataclass(frozen=True)
class ReplayResult:
    """Outcome of replaying one record: ``ok`` when the emulator's bytes hash to ``expected``."""

    record_id: str
    ok: bool
    expected: str
    actual: str
    elements: int
    mismatched: int | None = None
    first_index: tuple[int, int] | None = None
    max_ulps: int | None = None
    message: str = ""


_REQUIRED = [
    f.name
    for f in dataclasses.fields(GoldenRecord)
    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
]
_KNOWN = {f.name for f in dataclasses.fields(GoldenRecord)}


def sha256_of(x: np.ndarray) -> str:
    """sha256 of an array's bytes in C order (the bytes a GPU output copied to host has)."""
    return hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()


def pack_output(x: np.ndarray) -> str:
    return base64.b64encode(zlib.compress(np.ascontiguousarray(x).tobytes(), 9)).decode()


def unpack_output(text: str, dtype: str, shape: tuple[int, int]) -> np.ndarray:
    raw = zlib.decompress(base64.b64decode(text))
    return np.frombuffer(raw, dtype=formats.np_dtype(dtype)).reshape(shape)


def record_from_dict(data: Any, where: str) -> GoldenRecord:
    """Build a record, naming ``where`` (file and key) in every error."""
    if not isinstance(data, dict):
        raise GoldenError(f"{where}: expected a mapping, got {type(data).__name__}")
    unknown = sorted(set(data) - _KNOWN)
    if unknown:
        raise GoldenError(f"{where}: unknown key(s) {', '.join(unknown)}")
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise GoldenError(f"{where}: missing key(s) {', '.join(missing)}")
    d = dict(data)
    shape = d["shape"]
    if not (
        isinstance(shape, list | tuple)
        and len(shape) == 3
        and all(isinstance(s, int) and s >= 0 for s in shape)
    ):
        raise GoldenError(f"{where}.shape: expected [M, N, K] of non-negative integers, got {shape!r}")
    d["shape"] = tuple(shape)
    if d["case"] not in CASES:
        raise GoldenError(f"{where}.case: {d['case']!r} is not one of {', '.join(CASES)}")
    for key in ("in_dtype", "out_dtype"):
        try:
            formats.np_dtype(d[key])
        except ValueError as exc:
            raise GoldenError(f"{where}.{key}: {exc}") from None
    for key in ("seed_a", "seed_b", "elements"):
        if not isinstance(d[key], int):
            raise GoldenError(f"{where}.{key}: expected an integer, got {d[key]!r}")
    for key in ("seed_acc", "seed_side"):
        if d.get(key) is not None and not isinstance(d[key], int):
            raise GoldenError(f"{where}.{key}: expected an integer or null, got {d[key]!r}")
    if not isinstance(d["sha256"], str) or len(d["sha256"]) != 64:
        raise GoldenError(f"{where}.sha256: expected 64 hex digits, got {d['sha256']!r}")
    try:
        GEMMDesc.from_dict(d["descriptor"], where=f"{where}.descriptor")
    except DescError as exc:
        raise GoldenError(str(exc)) from None
    return GoldenRecord(**d)


def load_file(path: str | Path) -> list[GoldenRecord]:
    """All records of one YAML file (GoldenError names the file and the key on bad content)."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise GoldenError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("records"), list):
        raise GoldenError(f"{path}: expected a mapping with a 'records' list")
    return [record_from_dict(r, f"{path}: records[{i}]") for i, r in enumerate(data["records"])]


def save_file(path: str | Path, records: list[GoldenRecord]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump({"records": [r.to_dict() for r in records]}, sort_keys=False, width=120)
    path.write_text(text)


def golden_files(directory: str | Path = GOLDEN_DIR, pattern: str = "golden_*.yaml") -> list[Path]:
    """The record files of a directory: golden_*.yaml (a capture's summary.yaml sits beside them;
    its mismatch_*.yaml / measure_*.yaml hold records the emulator is not (yet) exact on)."""
    return sorted(Path(directory).glob(pattern))


def regenerate_inputs(record: GoldenRecord) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(A, B, incoming accumulator or None) of a record, from its kinds and seeds."""
    from fixbits.inputs import draw

    m, n, k = record.shape
    a = draw((m, k), record.in_dtype, record.input_kind, record.seed_a)
    b = draw((k, n), record.in_dtype, record.input_kind, record.seed_b)
    acc = None if record.seed_acc is None else draw((m, n), "fp32", record.input_kind, record.seed_acc)
    return a, b, acc


def side_inputs(record: GoldenRecord) -> dict[str, np.ndarray]:
    """Epilogue operands of a record, all of out_dtype and 'ordinary': bias (N,) from seed_side,
    residual (M, N) from seed_side + 1, gate (M, N) from seed_side + 2."""
    if record.seed_side is None:
        return {}
    m, n, _ = record.shape
    return side_inputs_for(m, n, record.out_dtype, record.seed_side)


def side_inputs_for(m: int, n: int, out: str, s: int) -> dict[str, np.ndarray]:
    """The epilogue operands for an (M, N) output of dtype ``out`` from seed ``s``."""
    from fixbits.inputs import draw

    return {
        "bias": draw((n,), out, "ordinary", s),
        "residual": draw((m, n), out, "ordinary", s + 1),
        "gate": draw((m, n), out, "ordinary", s + 2),
    }


def replay(record: GoldenRecord) -> ReplayResult:
    """Recompute a record's output on the CPU emulator and compare it with the recorded hash."""
    from fixbits.emulate import emulate

    a, b, acc = regenerate_inputs(record)
    out = emulate(record.desc(), a, b, acc=acc, **side_inputs(record))
    actual = sha256_of(out)
    if actual == record.sha256:
        return ReplayResult(record.id, True, record.sha256, actual, out.size)
    msg = (
        f"{record.id}: emulator sha256 {actual[:16]}… != recorded {record.sha256[:16]}… ({out.size} elements)"
    )
    if record.output_b64z is None:
        return ReplayResult(
            record.id, False, record.sha256, actual, out.size, message=msg + "; recorded bytes not inlined"
        )
    expected = unpack_output(record.output_b64z, record.out_dtype, out.shape)
    diff = formats.bits(expected) != formats.bits(out)
    where = np.argwhere(diff)
    first = (int(where[0][0]), int(where[0][1])) if len(where) else None
    ulps = int(formats.ulp_distance(expected, out).max()) if len(where) else 0
    if first is not None:
        i, j = first
        msg += (
            f"; {int(diff.sum())} differ, first at {first}: gpu 0x{int(formats.bits(expected)[i, j]):x} "
            f"emulator 0x{int(formats.bits(out)[i, j]):x}, max {ulps} ulp"
        )
    return ReplayResult(record.id, False, record.sha256, actual, out.size, int(diff.sum()), first, ulps, msg)


# -- `fixbits replay` -------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dir", default=str(GOLDEN_DIR), help="directory of golden YAML files (default: matrices/golden)"
    )
    parser.add_argument(
        "--glob",
        default="golden_*.yaml",
        help="file pattern (mismatch_*.yaml / measure_*.yaml to diagnose a capture)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print every record")


def run(args: argparse.Namespace) -> int:
    files = golden_files(args.dir, getattr(args, "glob", "golden_*.yaml"))
    counts = {"files": len(files), "records": 0, "matched": 0, "mismatched": 0, "errors": 0}
    for path in files:
        try:
            records = load_file(path)
        except GoldenError as exc:
            counts["errors"] += 1
            print(f"ERROR {exc}")
            continue
        for rec in records:
            counts["records"] += 1
            try:
                res = replay(rec)
            except Exception as exc:  # one bad record must not hide the others
                counts["errors"] += 1
                print(f"ERROR {path.name}: {rec.id}: {type(exc).__name__}: {exc}")
                continue
            counts["matched" if res.ok else "mismatched"] += 1
            if not res.ok:
                print(f"MISMATCH {path.name}: {res.message}")
            elif args.verbose:
                print(f"ok {path.name}: {rec.id} ({res.elements} elements)")
    print("  ".join(f"{k} {v}" for k, v in counts.items()))
    return 0 if counts["mismatched"] == 0 and counts["errors"] == 0 else 1
