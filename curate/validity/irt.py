"""A two-parameter logistic (2PL) IRT fit of a models x items correctness matrix.

Model: P(model i answers item j right) = sigmoid(a_j * (theta_i - b_j)), with item
discrimination ``a``, item difficulty ``b`` and model ability ``theta``.

Estimation: joint maximum a posteriori (JML with weak priors) by alternating sweeps: one
Fisher-scoring step on every item's (a_j, b_j) given the abilities (a 2 x 2 system per item, all
items at once in numpy), halved where it would lower the item's log posterior (in (a, b) the
posterior is not concave near a = 0), then one Newton step on every ability given the items.
After each sweep the abilities are centred and their spread moved toward sd 1 (the scale the 2PL
leaves open) by at most 10%, carrying a and b along; the fit is reported on the exact mean-0,
sd-1 scale. Priors: theta ~ N(0, 1), a ~ N(1, 1) (weak; a negative a stays possible, which is
the signal of a mis-keyed item), b ~ N(0, 3^2), and |b| <= 10. It stops when a sweep changes the
log-likelihood by less than 1e-5 per answer. Standard errors are the inverse of each item's (and
model's) posterior Fisher information at the fit, the other side held fixed. Item fit: infit and
outfit mean squares of the standardised residuals (Wright and Masters 1982): 1 is expected, much
above 1 misfits.

Why not a library: ``mirt`` 1.2.0 (PyPI, Rust, marginal ML by EM) took 26 s and 1.6 GB peak RSS
on a simulated 200 x 2000 matrix with standard errors, 5.4 s without (this 2-core CPU), about
200 s projected for 1000 x 14042, against the 60 s budget; ``py-irt`` 0.7.1 (Pyro, variational)
pins pandas < 3 (the project has 3.1); ``girth`` 0.8.0 was last released in 2021; ``irtorch``
pulls plotly, factor_analyzer and splinetorch. Marginal ML also needs many persons, while a
benchmark often has ten models; the priors here keep such a fit finite. Parameter recovery on
simulated data is checked in tests/test_item_validity.py; the speed and memory on 1000 x 14042
in benchmarks/irt.py.
"""
from __future__ import annotations

import dataclasses

import numpy as np
from scipy.special import expit

PRIOR_A = (1.0, 1.0)   # mean, sd of the discrimination a
PRIOR_B_SD = 3.0       # sd of the difficulty b (mean 0)
MAX_STEP = 1.0         # largest change of any parameter per sweep (damps the first steps)
HALVINGS = 6           # step halvings tried per item and sweep before the step is dropped
MAX_RESCALE = 1.1      # largest change of the abilities' scale per sweep
MAX_B = 10.0           # |b| bound, in ability sds: an item few models see differently can otherwise drift
PRIOR_THETA_SD = 1.0   # sd of the abilities' prior


@dataclasses.dataclass(frozen=True)
class IRTFit:
    """Per item: a, b with standard errors, infit/outfit; per model: theta (with SE)."""
    a: np.ndarray
    b: np.ndarray
    a_se: np.ndarray
    b_se: np.ndarray
    theta: np.ndarray
    theta_se: np.ndarray
    infit: np.ndarray
    outfit: np.ndarray
    iterations: int
    converged: bool


def fit_2pl(correct, *, max_iter: int = 200, tol: float = 1e-5) -> IRTFit:
    """Fit a 2PL model to ``correct`` (models x items; bool or 0/1, NaN = not answered). It stops
    when a sweep changes the log-likelihood by less than ``tol`` per answer: the likelihood, not
    the parameters, since an item few models tell apart can drift along its flat ridge (a and b
    trading off) for many sweeps without changing the fit (a change well inside its SE)."""
    x, seen = _as_matrix(correct)
    n_items = x.shape[1]
    theta = _start_theta(x, seen)
    a, b = np.full(n_items, PRIOR_A[0]), _start_b(x, seen)
    converged, sweep = False, 0
    cells = x.size if seen is None else float(seen.sum())
    previous = None
    for sweep in range(1, max_iter + 1):
        da, db, loglik = _item_step(x, seen, theta, a, b)
        if previous is not None and abs(loglik - previous) < tol * cells:
            converged = True
            break
        previous = loglik
        dt = _theta_step(x, seen, theta, a + da, b + db)
        theta, a, b = _standardised(theta + dt, a + da, b + db)
    if theta.std() > 0:  # report on the scale of abilities with mean 0, sd 1 (the same fit, b kept in bounds)
        mean, sd = theta.mean(), theta.std()
        theta, a, b = (theta - mean) / sd, a * sd, np.clip((b - mean) / sd, -MAX_B, MAX_B)
    (i_aa, i_ab, i_bb), _ = _item_information(x, seen, theta, a, b)
    det = i_aa * i_bb - i_ab**2
    theta_se = 1.0 / np.sqrt(_theta_information(seen, theta, a, b))
    infit, outfit = item_fit(x, seen, theta, a, b)
    return IRTFit(a=a, b=b, a_se=np.sqrt(i_bb / det), b_se=np.sqrt(i_aa / det), theta=theta, theta_se=theta_se,
                  infit=infit, outfit=outfit, iterations=sweep, converged=converged)


def _as_matrix(correct) -> tuple[np.ndarray, np.ndarray | None]:
    """(0/1 float32 matrix, mask of answered cells or None when all are)."""
    arr = np.asarray(correct)
    if arr.ndim != 2:
        raise ValueError(f"correct must be a models x items matrix, got shape {arr.shape}")
    if arr.dtype == bool:
        return arr.astype(np.float32), None
    arr = arr.astype(np.float32)
    seen = ~np.isnan(arr)
    if seen.all():
        return arr, None
    return np.where(seen, arr, 0).astype(np.float32), seen.astype(np.float32)


def _start_theta(x, seen) -> np.ndarray:
    """Standardised logits of each model's share correct."""
    share = x.sum(1) / (x.shape[1] if seen is None else seen.sum(1))
    logit = np.log((share + 0.01) / (1.01 - share))
    sd = logit.std()
    return (logit - logit.mean()) / (sd if sd > 0 else 1.0)


def _start_b(x, seen) -> np.ndarray:
    """Minus the logit of each item's share correct (b at a = 1 and abilities around 0)."""
    share = x.sum(0) / (x.shape[0] if seen is None else np.maximum(seen.sum(0), 1))
    return -np.log((share + 0.01) / (1.01 - share)).astype(float)


def _standardised(theta, a, b):
    """The same model with abilities of mean 0 and a spread moved toward sd 1 (the scale the 2PL
    leaves open), by at most ``MAX_RESCALE`` per sweep: dividing by a spread the first steps or
    a few look-alike models shrink to ~0 would throw b far out, into a local optimum."""
    mean, sd = theta.mean(), np.clip(theta.std(), 1 / MAX_RESCALE, MAX_RESCALE)
    return (theta - mean) / sd, a * sd, np.clip((b - mean) / sd, -MAX_B, MAX_B)


def _residuals(x, seen, theta, a, b):
    """(x - P, P(1 - P)), both zero where not answered."""
    p = expit(np.subtract.outer(theta, b).astype(np.float32) * a.astype(np.float32))
    r = x - p
    w = p * (1 - p)
    if seen is not None:
        r *= seen
        w *= seen
    return r, w


def _item_information(x, seen, theta, a, b):
    """Per item, the posterior Fisher information of (a, b) given theta, and the score (gradient)."""
    r, w = _residuals(x, seen, theta, a, b)
    t = theta.astype(np.float32)
    n = w.sum(0, dtype=float)
    tw, ttw = (t @ w).astype(float), ((t * t) @ w).astype(float)
    # d logit / da = theta - b, d logit / db = -a
    i_aa = ttw - 2 * b * tw + b * b * n + 1 / PRIOR_A[1] ** 2
    i_ab = -a * (tw - b * n)
    i_bb = a * a * n + 1 / PRIOR_B_SD**2
    rs, tr = r.sum(0, dtype=float), (t @ r).astype(float)
    g_a = tr - b * rs - (a - PRIOR_A[0]) / PRIOR_A[1] ** 2
    g_b = -a * rs - b / PRIOR_B_SD**2
    return (i_aa, i_ab, i_bb), (g_a, g_b)


def _item_step(x, seen, theta, a, b):
    """One Fisher-scoring step on every item's (a, b) given theta, halved (up to HALVINGS
    times, then dropped) where it would lower the item's log posterior by more than float32
    rounding (1e-6 of it): in (a, b) the posterior is not concave near a = 0, where an unchecked
    step can jump between two signs of a for ever. Also returns the log posterior before it."""
    (i_aa, i_ab, i_bb), (g_a, g_b) = _item_information(x, seen, theta, a, b)
    det = i_aa * i_bb - i_ab**2
    da = (i_bb * g_a - i_ab * g_b) / det
    db = (i_aa * g_b - i_ab * g_a) / det
    da, db = np.clip(da, -MAX_STEP, MAX_STEP), np.clip(db, -MAX_STEP, MAX_STEP)
    cols = np.arange(len(a))
    before = _item_log_posterior(x, seen, theta, a, b)
    loglik = float(before.sum() + _log_prior(a, b).sum())
    for _ in range(HALVINGS):
        worse = _item_log_posterior(_columns(x, cols), _columns(seen, cols), theta, a[cols] + da[cols],
                                    b[cols] + db[cols]) < before[cols] - 1e-6 * np.abs(before[cols]) - 1e-9
        cols = cols[worse]
        if not len(cols):
            break
        da[cols] /= 2
        db[cols] /= 2
    da[cols], db[cols] = 0.0, 0.0
    return da, db, loglik


def _columns(matrix, cols):
    return None if matrix is None else (matrix if len(cols) == matrix.shape[1] else matrix[:, cols])


def _item_log_posterior(x, seen, theta, a, b) -> np.ndarray:
    """Per item: the log-likelihood of its answers given theta, plus the log priors of a and b."""
    z = np.subtract.outer(theta, b).astype(np.float32) * a.astype(np.float32)
    loglik = x * z - np.logaddexp(np.float32(0), z)
    if seen is not None:
        loglik *= seen
    return loglik.sum(0, dtype=float) - _log_prior(a, b)


def _log_prior(a, b) -> np.ndarray:
    """Minus the log prior density of each item's (a, b), up to a constant."""
    return (a - PRIOR_A[0]) ** 2 / (2 * PRIOR_A[1] ** 2) + b**2 / (2 * PRIOR_B_SD**2)


def _theta_step(x, seen, theta, a, b):
    """One Newton step on every model's theta given the items."""
    r, w = _residuals(x, seen, theta, a, b)
    af = a.astype(np.float32)
    grad = (r @ af).astype(float) - theta / PRIOR_THETA_SD**2
    info = _theta_information(seen, theta, a, b, w)
    return np.clip(grad / info, -MAX_STEP, MAX_STEP)


def _theta_information(seen, theta, a, b, w=None) -> np.ndarray:
    if w is None:
        _, w = _residuals(np.zeros((len(theta), len(a)), np.float32), seen, theta, a, b)
    return (w @ (a * a).astype(np.float32)).astype(float) + 1 / PRIOR_THETA_SD**2


def item_fit(x, seen, theta, a, b):
    """Infit (information-weighted) and outfit (unweighted) mean squares per item."""
    r, w = _residuals(x, seen, theta, a, b)
    n = x.shape[0] if seen is None else seen.sum(0)
    z2 = np.divide(r * r, w, out=np.zeros_like(r), where=w > 0)
    infit = (r * r).sum(0, dtype=float) / np.maximum(w.sum(0, dtype=float), 1e-12)
    outfit = z2.sum(0, dtype=float) / np.maximum(n, 1)
    return infit, outfit
