"""Uncertainty: percentile bootstrap intervals and the paired permutation test between two systems.

Seeds are fixed so that reruns print the same intervals and p-values.
"""

from __future__ import annotations

from collections.abc import Sequence


def bootstrap_ci(
    values: Sequence[float], samples: int = 1000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean, in percent (fixed seed: reruns print the same)."""
    import numpy as np

    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return (0.0, 0.0)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(samples, data.size))].mean(axis=1)
    low, high = np.quantile(means, [(1 - level) / 2, 1 - (1 - level) / 2])
    return (round(100 * float(low), 2), round(100 * float(high), 2))


def paired_test(a: Sequence[float], b: Sequence[float], samples: int = 10000, seed: int = 0) -> dict[str, float]:
    """Paired permutation (sign-flip) test of mean(a) - mean(b), two-sided, plus a bootstrap CI.

    Each permutation swaps the two systems' scores on a random subset of questions.
    """
    import numpy as np

    diff = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    observed = float(diff.mean()) if diff.size else 0.0
    rng = np.random.default_rng(seed)
    signs = rng.choice([-1.0, 1.0], size=(samples, diff.size))
    permuted = np.abs((signs * diff).mean(axis=1))
    p_value = (1 + int((permuted >= abs(observed) - 1e-12).sum())) / (samples + 1)
    low, high = bootstrap_ci(diff, seed=seed)
    return {"difference": round(100 * observed, 2), "p_value": round(p_value, 4), "ci95": [low, high]}


def cohen_kappa(a: Sequence[bool], b: Sequence[bool]) -> float:
    """Cohen's kappa of two yes/no raters: agreement beyond what their yes-rates give by chance
    (1 when they agree everywhere; 0 when no better than chance, as a judge that always says yes is
    against any EM with misses; defined as 1 when both give one same answer throughout)."""
    n = len(a)
    if n == 0:
        return 0.0
    observed = sum(x == y for x, y in zip(a, b)) / n
    yes_a, yes_b = sum(a) / n, sum(b) / n
    expected = yes_a * yes_b + (1 - yes_a) * (1 - yes_b)
    if expected == 1.0:
        return 1.0 if observed == 1.0 else 0.0
    return round((observed - expected) / (1 - expected), 4)


def accuracy(correct: Sequence[float]) -> dict:
    """``{"n", "accuracy", "ci95"}`` of per-question scores (1 right, 0 wrong), in percent."""
    return {
        "n": len(correct),
        "accuracy": round(100 * sum(correct) / len(correct), 2) if correct else 0.0,
        "ci95": list(bootstrap_ci(correct)),
    }


def interval(pair: Sequence[float] | None, digits: int = 1) -> str:
    """An interval as reports print it: ``[low, high]``, one decimal unless told (empty when there is none)."""
    return f"[{pair[0]:.{digits}f}, {pair[1]:.{digits}f}]" if pair else ""
