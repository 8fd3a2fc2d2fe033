"""The `fixbits` command. Each subcommand lives in the module that owns its job; this file only
dispatches, so a subcommand's heavy imports (torch, triton) happen only when it runs."""

from __future__ import annotations

import argparse
import importlib
import sys

# subcommand -> (module exposing add_arguments(parser) and run(args) -> int, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "env": ("fixbits.env", "print the environment fingerprint (GPU, driver, CUDA, cuBLAS, torch, triton)"),
    "emulate": ("fixbits.emulate", "run the CPU emulator for a descriptor on seeded inputs"),
    "replay": ("fixbits.golden", "replay golden records through the emulator (CPU) or the GPU"),
    "report": ("fixbits.report.cli", "merge per-worker JUnit XML files and print a drift summary"),
    "reconstruct": ("fixbits.probe.reconstruct", "build an arch profile: scan heuristic answers, probe, verify"),
    "probe": ("fixbits.probe.cli", "recover the GEMMDesc of one shape from cuBLAS or the emulator"),
    "check": ("fixbits.checker.cli", "static bitwise equivalence of two PTX/AMDGCN files"),
    "bug": ("fixbits.bugs.cli", "reproduce a known cuBLAS defect (splitk-tail)"),
    "shapes": ("fixbits.shapes", "list the realistic shape set or a seeded fuzz set"),
    "gate": ("fixbits.gate", "compare the environment with the recorded one, run the affected suites, report drift"),
}


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fixbits", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        if name in argv[:1]:  # only import the module whose arguments are needed
            importlib.import_module(module).add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    return int(importlib.import_module(args._module).run(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
