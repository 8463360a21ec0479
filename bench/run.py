"""Runs every benchmark in one process and writes a Markdown report.

    python bench/run.py            # full size, writes bench/results.md
    python bench/run.py --quick    # CI-sized, writes bench/results_quick.md
    python bench/run.py --only etd shs

Benchmarks are the ``bench/bench_*.py`` modules; each compares a jaxsample method with the peer a
user would pick instead, on the same inputs, and reports quality and time.
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import sys
import time
from pathlib import Path

import jax

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def discover() -> dict:
    modules = {}
    for path in sorted(HERE.glob("bench_*.py")):
        name = path.stem.removeprefix("bench_")
        spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        modules[name] = module
    return modules


def main(argv=None) -> int:
    modules = discover()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CI-sized problems")
    parser.add_argument("--only", nargs="+", choices=sorted(modules), help="run only these")
    parser.add_argument("--out", type=Path, help="Markdown output (default: by mode)")
    args = parser.parse_args(argv)
    out = args.out or HERE / ("results_quick.md" if args.quick else "results.md")

    device = jax.devices()[0]
    header = [
        "# jaxsample benchmarks",
        "",
        f"- device: {jax.default_backend().upper()} ({device.device_kind}), "
        f"{jax.device_count()} device(s); host: {platform.machine()}, "
        f"{platform.python_version()}, jax {jax.__version__}",
        f"- mode: {'quick' if args.quick else 'full'}; times are medians after a warm-up call",
        "",
    ]
    sections = []
    for name in args.only or sorted(modules):
        t0 = time.perf_counter()
        print(f"[bench] {name} ...", flush=True)
        tables = modules[name].run(quick=args.quick)
        print(f"[bench] {name} done in {time.perf_counter() - t0:.1f}s", flush=True)
        for table in tables:
            text = table.to_markdown()
            print(text + "\n", flush=True)
            sections.append(text)
    out.write_text("\n".join(header) + "\n" + "\n\n".join(sections) + "\n")
    print(f"[bench] wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
