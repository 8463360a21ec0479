"""Command line: ``jaxsample demo`` (also ``python -m jaxsample demo``) and ``jaxsample --version``.

Nothing here imports matplotlib until figures are drawn: ``jaxsample demo --list`` and
``--help`` work with the base install, and ``jaxsample demo`` without the ``demo`` extra says
which install command brings it.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import jaxsample
from jaxsample.demo import DEMO_TIME

__all__ = ["main"]

DEMO_INSTALL = 'pip install "jaxsample[demo]"  (from a checkout: pip install ".[demo]")'


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jaxsample", description="jaxsample command line.",
        epilog="Run 'jaxsample demo --help' for the demo's options.")
    parser.add_argument("--version", action="version",
                        version=f"jaxsample {jaxsample.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="command")
    demo = commands.add_parser(
        "demo",
        help="run every method on built-in defaults, print comparison tables, write figures",
        description=(
            "Runs each jaxsample method on small built-in problems beside a reference (exact "
            "samples or the peer a user would otherwise pick), prints one comparison table per "
            f"method and writes PNG figures to --out. The whole demo takes {DEMO_TIME}. Needs "
            f"the demo extra (matplotlib, blackjax): {DEMO_INSTALL}."
        ),
    )
    demo.add_argument("--out", type=Path, default=Path("demo_output"),
                      help="folder for the figures (default: ./demo_output)")
    demo.add_argument("--seed", type=int, default=0, help="PRNG seed (default: 0)")
    demo.add_argument("--only", nargs="+", metavar="SECTION",
                      help="run only these sections (see --list)")
    demo.add_argument("--list", action="store_true",
                      help="list the sections and exit (needs no figures, nor matplotlib)")
    demo.add_argument("--strict", action="store_true",
                      help="exit with status 3 if a figure has a panel without a title or an "
                           "axis label, or a reference line without a legend entry")
    return parser


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        print("\njaxsample: choose a command, e.g. 'jaxsample demo' (or 'jaxsample --version')",
              file=sys.stderr)
        return 2
    if args.command == "demo":
        from jaxsample.demo import available_sections, run_demo

        if args.list:
            for section in available_sections():
                print(f"{section.name:12s} {section.title}")
            return 0
        if importlib.util.find_spec("matplotlib") is None:
            print("jaxsample demo draws figures with matplotlib, which is not installed. Install "
                  f"the demo extra (matplotlib and blackjax): {DEMO_INSTALL}", file=sys.stderr)
            return 1
        import matplotlib

        matplotlib.use("Agg")
        try:
            reports = run_demo(args.out, seed=args.seed, only=args.only)
        except ValueError as err:
            print(f"jaxsample demo: {err}", file=sys.stderr)
            return 2
        problems = [f"{figure}: {problem}" for report in reports.values()
                    for figure, found in report.figure_problems.items() for problem in found]
        if problems and args.strict:
            print("jaxsample demo --strict: figures a reader cannot read on their own:\n  "
                  + "\n  ".join(problems), file=sys.stderr)
            return 3
    return 0
