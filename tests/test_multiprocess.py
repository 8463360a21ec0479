"""Beyond one machine: two local JAX processes (gloo collectives) run ETD on particles sharded
across both; the gathered result equals the single-process run."""

import os
import pathlib
import socket
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
from _xla import flags_without
from multiprocess_case import initial_positions, make_algorithm, run_case

import jaxsample

HERE = pathlib.Path(__file__).parent


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def test_two_processes_match_one(tmp_path):
    port = str(_free_port())
    out = tmp_path / "positions.npy"
    flags = [*flags_without("device_count"), "--xla_force_host_platform_device_count=2"]
    env = dict(os.environ, XLA_FLAGS=" ".join(flags),
               JAX_PLATFORMS="cpu", PYTHONPATH=str(HERE))
    workers = [subprocess.Popen([sys.executable, str(HERE / "_multiprocess_worker.py"), str(i),
                                 port, str(out)], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True) for i in range(2)]
    logs = []
    for worker in workers:
        try:
            logs.append(worker.communicate(timeout=240)[0])
        finally:
            worker.kill()
    assert all(w.returncode == 0 for w in workers), "\n".join(logs)[-4000:]
    sharded = np.load(out)
    single = run_case(jaxsample, make_algorithm(jaxsample, jnp), jnp.asarray(initial_positions()))
    assert sharded.shape == single.shape and jax.device_count() == 4
    np.testing.assert_allclose(sharded, np.asarray(single), rtol=1e-4, atol=1e-5)
