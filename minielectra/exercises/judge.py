"""How an exercise is judged: the learner's outputs against the library's, and against the
outputs of the mistakes learners make, each with the sentence that names it."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch


class NotYet(AssertionError):
    """The learner's piece disagrees with the library; the message says how."""


def _same(a, b) -> bool:
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (torch.Tensor, np.ndarray)) or isinstance(b, (torch.Tensor, np.ndarray)):
        a, b = torch.as_tensor(np.asarray(a, dtype=np.float64) if isinstance(a, np.ndarray)
                               else a), torch.as_tensor(np.asarray(b, dtype=np.float64)
                                                        if isinstance(b, np.ndarray) else b)
        if a.shape != b.shape:
            return False
        return bool(torch.allclose(a.double(), b.double(), rtol=1e-4, atol=1e-5,
                                   equal_nan=True))
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
    return a == b


def judge_exercise(name: str, fn: Callable, library: Callable, reference: Callable,
           mistakes: dict[str, Callable], cases: Callable[[], list[tuple]],
           generic: str) -> Callable:
    """Run ``fn`` on every case: right -> ``fn``; an empty stub -> ``library``; wrong -> NotYet
    naming the known mistake whose outputs it gives, else ``generic``. ``cases()`` makes
    fresh inputs for every function it feeds (a coin is a stream, read once)."""
    try:
        got = [fn(*case) for case in cases()]
    except NotImplementedError:
        print(f"`{name}` is not written yet: fill in its stub above and run this cell again. "
              "The lesson goes on with the library's version.")
        return library
    if not all(_same(out, reference(*case)) for out, case in zip(got, cases())):
        for message, wrong in mistakes.items():  # the mistake that gives all its outputs
            if all(_same(out, wrong(*case)) for out, case in zip(got, cases())):
                raise NotYet(f"`{name}` is not right yet: {message}")
        raise NotYet(f"`{name}` is not right yet: {generic}")
    print(f"`{name}` is right: it agrees with the library on every case it was given.")
    return fn
