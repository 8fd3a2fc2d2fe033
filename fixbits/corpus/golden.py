"""Golden records of pinned corpus outputs: bytes the GPU returned, kept across Triton releases.

A pinned output must not move when Triton changes (3.6 -> 3.9 changed the free order), so the
records are checked on GPU against new runs and, for outputs the CPU tree model reproduces
from the inputs alone (``cpu_replay``), replayed on CPU: regenerate the inputs from
(kernel, dtype, kind, seed, shape), run the model, compare sha256.

File: matrices/golden/enforcement_<name>.yaml with ``schema``, ``environment`` and ``records``.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from fixbits.corpus.registry import ROOT

GOLDEN_DIR = ROOT / "matrices" / "golden"
SCHEMA = "fixbits.enforcement.golden/1"


@dataclass(frozen=True)
class EnforcementRecord:
    """One pinned output of one corpus kernel on one input draw, by sha256 of its bytes."""

    kernel: str
    dtype: str
    kind: str
    seed: int
    shape: tuple[tuple[str, int], ...]
    output: str
    sha256: str
    cpu_replay: bool
    model_equal: bool
    source: str  # file it was loaded from, for messages

    def shape_dict(self) -> dict[str, int]:
        return dict(self.shape)


@dataclass(frozen=True)
class GoldenFile:
    """A record file: where the bytes were recorded and the records."""

    path: Path
    environment: tuple[tuple[str, str], ...]
    records: tuple[EnforcementRecord, ...]


def _err(path: Path, key: str, msg: str) -> ValueError:
    return ValueError(f"{path}: {key}: {msg}")


def load(path: Path) -> GoldenFile:
    data = yaml.safe_load(Path(path).read_text())
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise _err(path, "schema", f"expected {SCHEMA!r}")
    recs = data.get("records")
    if not isinstance(recs, list):
        raise _err(path, "records", "expected a list")
    out = []
    for i, r in enumerate(recs):
        key = f"records[{i}]"
        try:
            out.append(EnforcementRecord(
                kernel=str(r["kernel"]), dtype=str(r["dtype"]), kind=str(r["kind"]), seed=int(r["seed"]),
                shape=tuple((str(k), int(v)) for k, v in dict(r["shape"]).items()), output=str(r["output"]),
                sha256=str(r["sha256"]), cpu_replay=bool(r["cpu_replay"]), model_equal=bool(r.get("model_equal", False)),
                source=Path(path).name))
        except (KeyError, TypeError, ValueError) as e:
            raise _err(path, key, f"bad record ({type(e).__name__}: {e})") from None
        if len(out[-1].sha256) != 64:
            raise _err(path, f"{key}.sha256", "expected 64 hex digits")
    env = tuple((str(k), str(v)) for k, v in (data.get("environment") or {}).items())
    return GoldenFile(Path(path), env, tuple(out))


def files(directory: Path = GOLDEN_DIR) -> list[Path]:
    return sorted(Path(directory).glob("enforcement_*.yaml"))


def all_records(directory: Path = GOLDEN_DIR) -> list[EnforcementRecord]:
    return [r for p in files(directory) for r in load(p).records]


def save(path: Path, environment: dict[str, Any], records: list[EnforcementRecord]) -> None:
    rows = []
    for r in records:
        d = asdict(r)
        d.pop("source")
        d["shape"] = dict(r.shape)
        rows.append(d)
    Path(path).write_text(yaml.safe_dump({"schema": SCHEMA, "environment": environment, "records": rows},
                                         sort_keys=False))


def sha256(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def replay_cpu(rec: EnforcementRecord) -> tuple[bool, str]:
    """(ok, actual sha) of the CPU tree model for a cpu_replay record."""
    return replay_group([rec])[0]


def group_key(rec: EnforcementRecord) -> tuple[str, str, str, int, tuple[tuple[str, int], ...]]:
    """Records sharing one input draw (replayed together: inputs and model computed once)."""
    return (rec.kernel, rec.dtype, rec.kind, rec.seed, rec.shape)


def replay_group(recs: list[EnforcementRecord]) -> list[tuple[bool, str]]:
    """(ok, actual sha) per record; all records must share ``group_key``."""
    from fixbits.corpus.registry import entry

    keys = {group_key(r) for r in recs}
    if len(keys) != 1:
        raise ValueError(f"replay_group needs one input draw, got {sorted(keys)}")
    bad = [r for r in recs if not r.cpu_replay]
    if bad:
        raise ValueError(f"{bad[0].source}: {bad[0].kernel}/{bad[0].output} is not CPU-replayable")
    rec = recs[0]
    mod = _model_module(entry(rec.kernel).module)
    inputs = mod.make_inputs(rec.shape_dict(), rec.dtype, rec.kind, rec.seed)
    want = mod.reference(inputs, {})
    out = []
    for r in recs:
        got = sha256(want[r.output])
        out.append((got == r.sha256, got))
    return out


def _model_module(module: str) -> Any:
    import importlib

    return importlib.import_module(module)
