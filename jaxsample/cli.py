"""Command line: ``jaxsample demo`` (also ``python -m jaxsample demo``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jaxsample", description="jaxsample command line.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo",
        help="run every method on built-in defaults, print comparison tables, write figures",
        description=(
            "Runs each jaxsample method on small built-in problems beside a reference (exact "
            "samples or the peer a user would otherwise pick), prints one comparison table per "
            "method and writes PNG figures to --out. Takes under two minutes on 2 CPU cores."
        ),
    )
    demo.add_argument("--out", type=Path, default=Path("demo_output"),
                      help="folder for the figures (default: ./demo_output)")
    demo.add_argument("--seed", type=int, default=0, help="PRNG seed (default: 0)")
    demo.add_argument("--only", nargs="+", metavar="SECTION",
                      help="run only these sections (see --list)")
    demo.add_argument("--list", action="store_true", help="list the sections and exit")
    return parser


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "demo":
        import matplotlib

        matplotlib.use("Agg")
        from jaxsample.demo import available_sections, run_demo

        if args.list:
            for section in available_sections():
                print(f"{section.name:12s} {section.title}")
            return 0
        try:
            run_demo(args.out, seed=args.seed, only=args.only)
        except ValueError as err:
            print(f"jaxsample demo: {err}", file=sys.stderr)
            return 2
    return 0
