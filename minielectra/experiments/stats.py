"""Paired significance tests for seed-paired differences, in plain Python: Student's t
(closed-form CDF, Abramowitz & Stegun 26.7.3-4) and the exact sign-flip permutation test, whose
smallest p-value with n seeds is 2 / 2^n (it cannot say "p < 0.05" with fewer than 6 seeds)."""

from __future__ import annotations

import itertools
import math
import statistics


def t_two_sided(t: float, df: int) -> float:
    """``P(|T| >= |t|)`` for Student's t with ``df`` (integer >= 1) degrees of freedom."""
    theta = math.atan(abs(t) / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    if df % 2:  # odd: (2/pi) (theta + sin cos (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ...))
        total, term = 0.0, math.cos(theta)
        for k in range(1, (df - 1) // 2 + 1):
            total += term
            term *= c2 * (2 * k) / (2 * k + 1)
        inside = 2 / math.pi * (theta + math.sin(theta) * total)
    else:  # even: sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...)
        total, term = 0.0, 1.0
        for k in range(1, df // 2 + 1):
            total += term
            term *= c2 * (2 * k - 1) / (2 * k)
        inside = math.sin(theta) * total
    return min(1.0, max(0.0, 1.0 - inside))


def paired_t(differences: list[float]) -> dict:
    """Mean, sd, t and the two-sided p-value of seed-paired ``differences`` (n >= 2)."""
    n = len(differences)
    mean = statistics.fmean(differences)
    sd = statistics.stdev(differences) if n > 1 else float("nan")
    if n < 2:
        return {"n": n, "mean": mean, "sd": sd, "t": float("nan"), "p": float("nan")}
    if sd == 0:
        return {"n": n, "mean": mean, "sd": sd, "t": math.copysign(math.inf, mean) if mean else 0.0,
                "p": 0.0 if mean else 1.0}
    t = mean / (sd / math.sqrt(n))
    return {"n": n, "mean": mean, "sd": sd, "t": t, "p": t_two_sided(t, n - 1)}


def sign_flip(differences: list[float]) -> float:
    """Exact two-sided p-value of the paired sign-flip permutation test (n <= 20)."""
    n = len(differences)
    if n == 0 or n > 20:
        raise ValueError(f"sign_flip enumerates 2^n patterns: needs 1 <= n <= 20, got {n}")
    observed = abs(sum(differences)) - 1e-12
    hits = sum(abs(sum(s * d for s, d in zip(signs, differences))) >= observed
               for signs in itertools.product((1, -1), repeat=n))
    return hits / 2 ** n
