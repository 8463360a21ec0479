"""bench/gpu.sh must not rot: its dry run (CPU, quick sizes) passes on a small selection."""

import os
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_gpu_script_dry_run():
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    result = subprocess.run(
        ["bash", str(ROOT / "bench" / "gpu.sh"), "--dry-run", "--only", "run", "--tests",
         "covers_every_public_function"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "== device" in result.stdout and "run driver overhead" in result.stdout
