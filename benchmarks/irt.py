"""Time and peak memory of the 2PL fit (``curate.validity.irt.fit_2pl``) on a simulated matrix of
MMLU's size: 1000 models x 14042 items, with known a, b and theta, and how well it recovers them.

Acceptance (issue 28): <= 60 s and <= 2 GB on a 2-core CPU. Peak memory is the process's maximum
resident set size (``resource.getrusage``), the simulation's own arrays included.

    nice -n 10 .venv/bin/python benchmarks/irt.py [--models 1000] [--items 14042]
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def simulate(n_models: int, n_items: int, seed: int = 0):
    """theta ~ N(0, 1), a ~ U(0.5, 2.5), b ~ N(0, 1); a models x items bool matrix."""
    rng = np.random.default_rng(seed)
    theta, a, b = rng.normal(size=n_models), rng.uniform(0.5, 2.5, n_items), rng.normal(size=n_items)
    correct = np.empty((n_models, n_items), dtype=bool)
    for start in range(0, n_models, 100):  # in blocks: the float64 probabilities stay small
        t = theta[start:start + 100, None]
        correct[start:start + 100] = rng.random((len(t), n_items)) < 1 / (1 + np.exp(-a * (t - b)))
    return correct, theta, a, b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--items", type=int, default=14042)
    args = parser.parse_args()
    from curate.validity.irt import fit_2pl

    correct, theta, a, b = simulate(args.models, args.items)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    fit = fit_2pl(correct)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"2PL fit of a simulated {args.models} x {args.items} matrix on {os.cpu_count()} CPUs "
          f"(load average {os.getloadavg()[0]:.1f})")
    print(f"time {seconds:.1f} s (target <= 60), {fit.iterations} sweeps, converged {fit.converged}")
    print(f"peak RSS {peak:.0f} MiB (target <= 2048; {before:.0f} MiB before the fit, with the simulation)")
    # The fit puts the models' abilities at mean 0, sd 1; the truth on that same scale:
    mean, sd = theta.mean(), theta.std()
    same_scale = {"a": a * sd, "b": (b - mean) / sd, "theta": (theta - mean) / sd}
    for name, est, true, se in (("a", fit.a, a, fit.a_se), ("b", fit.b, b, fit.b_se),
                                ("theta", fit.theta, theta, fit.theta_se)):
        cover = np.mean(np.abs(est - true) <= 1.96 * se)
        cover_same = np.mean(np.abs(est - same_scale[name]) <= 1.96 * se)
        print(f"{name:>5}: correlation with the truth {np.corrcoef(est, true)[0, 1]:.4f}, "
              f"median SE {np.median(se):.3f}, "
              f"true value within 1.96 SE {cover:.3f} ({cover_same:.3f} with the truth on the fit's scale)")
    print(f"infit median {np.median(fit.infit):.3f}, outfit median {np.median(fit.outfit):.3f} (1 expected)")


if __name__ == "__main__":
    main()
