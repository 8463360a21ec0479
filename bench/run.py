"""Runs every benchmark in one process and writes a Markdown report.

    python bench/run.py                 # full size, writes bench/results.md
    python bench/run.py --quick         # CI-sized (= --size quick), writes bench/results_quick.md
    python bench/run.py --size gpu      # accelerator sizes, writes bench/results_gpu.md
    python bench/run.py --only etd shs

Benchmarks are the ``bench/bench_*.py`` modules; each compares a jaxsample method with the peer a
user would pick instead, on the same inputs, and reports quality and time.

Times are only comparable on an otherwise idle host. Before each module the runner waits (up to
``--wait`` seconds) for the 1-minute load average to fall below ``--max-load`` (default 1.5), and
records the load before and after the module under each of its tables. A module that starts above
the threshold is marked "not comparable" in its title; ``--strict-load`` skips it instead (exit
status 1).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import harness  # noqa: E402
from harness import QUIET_LOAD, SIZES, BenchTable, device_facts  # noqa: E402


def discover() -> dict[str, Path]:
    return {path.stem.removeprefix("bench_"): path for path in sorted(HERE.glob("bench_*.py"))}


def load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv=None) -> int:
    modules = discover()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default="full", help="problem sizes")
    parser.add_argument("--quick", action="store_true", help="CI-sized problems (--size quick)")
    parser.add_argument("--only", nargs="+", choices=sorted(modules), help="run only these")
    parser.add_argument("--out", type=Path, help="Markdown output (default: by mode)")
    parser.add_argument("--max-load", type=float, default=QUIET_LOAD,
                        help="1-minute load average above which a timing is not comparable")
    parser.add_argument("--wait", type=float, default=None,
                        help="seconds to wait for the load to fall before each module "
                             "(default: 180 at full size, 0 for quick and gpu runs)")
    parser.add_argument("--strict-load", action="store_true",
                        help="skip (and fail) a module that would start above --max-load")
    args = parser.parse_args(argv)
    size = "quick" if args.quick else args.size
    if args.wait is None:
        args.wait = 180.0 if size == "full" else 0.0
    out = args.out or HERE / {"quick": "results_quick.md", "full": "results.md",
                              "gpu": "results_gpu.md"}[size]

    header = [
        "# jaxsample benchmarks",
        "",
        *device_facts(),
        f"- size: {size}; times are medians after a warm-up call",
        f"- timings comparable only below a 1-minute load average of {args.max_load}; each "
        "table states the load before its module (the log has the load after it, which is the "
        "bench's own threads)",
        "",
    ]
    sections, failed = [], []
    for name in args.only or sorted(modules):
        before = harness.wait_for_quiet(args.max_load, args.wait)
        noisy = before >= args.max_load
        print(f"[bench] {name} ... (load average {before:.2f})", flush=True)
        t0 = time.perf_counter()
        if noisy and args.strict_load:
            failed.append(name)
            tables = [BenchTable(f"{name}: SKIPPED", [], notes=[
                f"load average {before:.2f} >= {args.max_load} after waiting {args.wait:.0f} s"])]
        else:
            # each module is guarded: one failure is reported and the others still run
            try:
                tables = load(name, modules[name]).run(size)
            except Exception:  # noqa: BLE001 - reported in the table and the exit status
                failed.append(name)
                trace = traceback.format_exc()
                print(trace, flush=True)
                tables = [BenchTable(f"{name}: FAILED", [],
                                     notes=[trace.strip().splitlines()[-1]])]
        after = harness.load_average()
        # the load after a module is its own threads', not the host's: the log has it, the
        # tables state only the load the timing started from
        print(f"[bench] {name} done in {time.perf_counter() - t0:.1f}s (load average "
              f"{after:.2f} after)", flush=True)
        for table in tables:
            stamp = f"load average {before:.2f} before the module"
            if noisy and not args.strict_load:
                table.title += f" (timed at load {before:.1f} > {args.max_load}: not comparable)"
                stamp += " (above the threshold: times not comparable)"
            table.notes = [*table.notes, stamp]
            text = table.to_markdown()
            print(text + "\n", flush=True)
            sections.append(text)
        # written after every module, so a crash or a time limit keeps what ran
        out.write_text("\n".join(header) + "\n" + "\n\n".join(sections) + "\n")
    print(f"[bench] wrote {out}" + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
