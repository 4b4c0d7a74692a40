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


def paired_by_unit(differences: dict, *, digits: int = 2) -> dict:
    """A paired comparison at the unit its claim is about.

    ``differences`` maps each unit (a pre-training seed, for a claim about a pre-training choice)
    to the A - B differences measured inside it (one per fine-tuning seed). Those are averaged
    inside their unit first: fine-tuning seeds of one pre-training run share its weights, so they
    are repeats of one measurement, not independent pairs. The test is then a paired t-test and
    an exact sign-flip over the units. Returns each unit's mean (``by_unit``), the mean over
    units, their sd, ``n`` (units), ``wins`` (units ahead), ``p`` (t) and ``p_flip``.
    """
    means = {str(k): statistics.fmean(v) for k, v in differences.items() if len(v)}
    values = list(means.values())
    if not values:
        raise ValueError("paired_by_unit needs at least one unit with a difference")
    test = paired_t(values)
    return {"by_unit": {k: round(v, digits) for k, v in means.items()}, "n": len(values),
            "mean": test["mean"], "sd": test["sd"], "p": test["p"],
            "p_flip": sign_flip(values) if len(values) <= 20 else float("nan"),
            "wins": sum(v > 0 for v in values)}


def noise_phrase(result: dict, *, alpha: float = 0.05, unit: str = "pre-training seeds") -> str:
    """How a page states a comparison: its p-value, or that it is within the noise of n units."""
    n, p = result["n"], result["p"]
    if p != p:  # one unit: no spread to test against
        return f"one {unit[:-1] if unit.endswith('s') else unit}, untested"
    if p >= alpha:
        return f"within the noise of {n} {unit} (p {p:.2g})"
    return f"p {p:.2g} over {n} {unit}"
