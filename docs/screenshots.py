"""Check the rendered site in a real browser: serve the built site and screenshot three pages.

Usage (from the repository root, after ``mkdocs build --strict``)::

    python docs/screenshots.py [--site site] [--out docs_screenshots] [--browser chromium]

Serves ``--site`` on a free local port, takes headless-Chromium screenshots of the home page, one
method page (ETD) and one API page (``jaxsample.particles``), and writes them as PNGs to
``--out``. Look at them: formulas typeset, tables aligned, code highlighted, the API entries
rendered with their signatures and docstring sections. MathJax loads from a CDN, so formulas
render only where the machine can reach it (offline, the raw TeX shows).
"""

import argparse
import functools
import http.server
import pathlib
import shutil
import subprocess
import sys
import threading

PAGES = {
    "home": "",
    "method_etd": "methods/etd/",
    "api_particles": "api/particles/",
}


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def find_browser(name: str | None) -> str:
    for candidate in [name] if name else ["chromium", "chromium-browser", "google-chrome"]:
        path = shutil.which(candidate)
        if path:
            return path
    sys.exit("no Chromium found: install one (e.g. apt-get install chromium) or pass --browser")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", default="site", help="the built site (mkdocs build)")
    parser.add_argument("--out", default="docs_screenshots", help="folder for the PNGs")
    parser.add_argument("--browser", default=None, help="Chromium executable")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=2000)
    args = parser.parse_args(argv)

    site = pathlib.Path(args.site).resolve()
    if not (site / "index.html").exists():
        sys.exit(f"{site} has no index.html: run `mkdocs build --strict` first")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    browser = find_browser(args.browser)

    handler = functools.partial(QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        for name, path in PAGES.items():
            png = out / f"{name}.png"
            subprocess.run(
                [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                 f"--window-size={args.width},{args.height}", "--virtual-time-budget=8000",
                 f"--screenshot={png.resolve()}", base + path],
                check=True, capture_output=True, timeout=120)
            print(f"{base + path} -> {png}")
    finally:
        server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
