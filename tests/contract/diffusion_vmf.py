"""Contract entry: vMF spherical flows (``jaxsample.diffusion.vmf``), PC sampler, exact oracle."""

import jax.numpy as jnp
import numpy as np

from contract import KEY, BadInput, Entry
from jaxsample.diffusion import vmf


def _setup(dtype):
    emb = jnp.eye(4, dtype=dtype)
    path = vmf.VMFPath(4, 30.0)
    return emb, path, vmf.Sudoku4Oracle(emb, path)


def _sample(dtype):
    emb, path, oracle = _setup(dtype)
    return lambda key: vmf.sample(key, oracle, emb, path, seq_len=16, num_samples=3,
                                  num_steps=3, sampler="pc")


def _hyper(dtype):
    emb, path, oracle = _setup(dtype)
    return lambda key, h: vmf.sample(key, oracle, emb, path, seq_len=16, num_samples=3,
                                     num_steps=3, sampler="pc", corrector_step_size=h)


def _call(embeddings=None, path=None, posterior=None, **kwargs):
    emb, default_path, oracle = _setup(jnp.float32)
    settings = dict(seq_len=16, num_samples=2, num_steps=2)
    settings.update(kwargs)
    vmf.sample(KEY, posterior or oracle, emb if embeddings is None else embeddings,
               path or default_path, **settings)


def _wrong_shape_posterior(x, t):
    return jnp.full((x.shape[0], 3), 1 / 3, x.dtype)


ENTRIES = [
    Entry(
        name="diffusion.vmf",
        module="jaxsample.diffusion.vmf",
        build=_sample,
        covers=("diffusion.vmf.sample",),
        hyper=_hyper,
        hyper_values=(0.5, 2.0),
        bad_inputs=(
            # non-unit embeddings are refused, not normalised
            BadInput(lambda: _call(embeddings=2 * np.eye(4, dtype=np.float32)), ValueError,
                     "embeddings must be unit"),
            BadInput(lambda: _call(embeddings=np.eye(3, 4, dtype=np.float32)[:, :3]),
                     ValueError, "embeddings"),
            BadInput(lambda: vmf.VMFPath(1, 10.0), ValueError, "dim"),
            BadInput(lambda: vmf.VMFPath(4, 0.0), ValueError, "kappa_max"),
            BadInput(lambda: vmf.VMFPath(4, 10.0, schedule="cubic"), ValueError, "schedule"),
            BadInput(lambda: vmf.VMFPath(4, corrector="snr"), ValueError, "corrector"),
            BadInput(lambda: vmf.GeodesicPath(4, t_end=1.0), ValueError, "t_end"),
            BadInput(lambda: _call(num_steps=0), ValueError, "num_steps"),
            BadInput(lambda: _call(sampler="sde"), ValueError, "sampler"),
            BadInput(lambda: _call(path=vmf.GeodesicPath(4), posterior=vmf.Sudoku4Oracle(
                np.eye(4, dtype=np.float32), vmf.GeodesicPath(4)), sampler="pc"),
                ValueError, "sampler='pc'"),
            BadInput(lambda: _call(posterior=_wrong_shape_posterior), ValueError, "posterior_fn"),
            BadInput(lambda: _call(posterior=3), TypeError, "posterior_fn"),
            BadInput(lambda: _call(path="vmf"), TypeError, "path"),
            BadInput(lambda: _call(corrector_step_size=-1.0), ValueError,
                     "corrector_step_size"),
            BadInput(lambda: vmf.Sudoku4Oracle(np.eye(3, dtype=np.float32), vmf.VMFPath(3, 5.0)),
                     ValueError, "embeddings"),
        ),
        note="hyper is the relative corrector step size c (ε = c/(κ(t) + d − 1), the default "
             "'variance' rule; the paper's 'vanishing' rule is tests/test_vmf.py's); kappa_max "
             "and the embeddings are traced leaves too. Non-finite posteriors are flagged in "
             "info.nonfinite (tests/test_vmf.py).",
    ),
]
