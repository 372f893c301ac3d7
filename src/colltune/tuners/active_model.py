"""The active learner's model of one collective (ACCLAiM, Wilkins et al., CLUSTER 2022).

One random forest per collective, the algorithm as a feature: a row is
(nodes, ppn, log2 message size, algorithm code). The target is the algorithm's
log2 slowdown against the fastest algorithm measured at the same point,
log2(t / t_best) — ACCLAiM normalises by algorithm too: what matters for the
decision is how algorithms compare at a point, not the absolute time, which the
size would dominate. A second forest (classifier) learns where algorithms fail
(crash, hang, wrong result), so the decision never picks an algorithm the data
says breaks there; failures never get a time.

Uncertainty: the jackknife variance of the forest's mean over its trees,
V = (B-1)/B * sum_b (mean_without_tree_b - mean)^2 = sum_b (p_b - mean)^2 / (B (B-1)).
"""
from __future__ import annotations

import math

import numpy as np

FEATURES = ("nodes", "ppn", "log2_size", "algorithm")


def is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


class CollectiveModel:
    def __init__(self, algorithms: list[str], trees: int, seed: int):
        if not algorithms:
            raise ValueError("no candidate algorithms")
        self.algorithms = list(algorithms)
        self.trees, self.seed = trees, seed
        self.forest = None
        self.feasible = None          # classifier, or None when every attempt succeeded
        self.all_failed: set[str] = set()

    # -- features ----------------------------------------------------------
    def rows(self, points: np.ndarray) -> np.ndarray:
        """Feature rows of every algorithm at every point (point-major)."""
        pts = np.asarray(points, dtype=float).reshape(-1, 3)
        k, a = len(pts), len(self.algorithms)
        out = np.empty((k * a, 4))
        out[:, 0] = np.repeat(pts[:, 0], a)
        out[:, 1] = np.repeat(pts[:, 1], a)
        out[:, 2] = np.repeat(np.log2(np.maximum(pts[:, 2], 1)), a)
        out[:, 3] = np.tile(np.arange(a), k)
        return out

    # -- training ----------------------------------------------------------
    def fit(self, measured: dict[tuple[int, int, int], dict[str, float | None]]) -> int:
        """measured: point -> {algorithm: time in s, or None when it failed}.
        Returns the number of training rows (successful measurements)."""
        from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
        code = {a: i for i, a in enumerate(self.algorithms)}
        X, y, Xf, yf = [], [], [], []
        for (n, p, m), times in measured.items():
            ok = {a: t for a, t in times.items() if t is not None and t > 0 and a in code}
            for a, t in times.items():
                if a in code:
                    Xf.append((n, p, math.log2(max(m, 1)), code[a]))
                    yf.append(a in ok)
            if not ok:
                continue
            best = min(ok.values())
            for a, t in ok.items():
                X.append((n, p, math.log2(max(m, 1)), code[a]))
                y.append(math.log2(t / best))
        if not X:
            raise ValueError("no successful measurement to learn from")
        self.forest = RandomForestRegressor(n_estimators=self.trees, random_state=self.seed,
                                            n_jobs=1).fit(np.array(X), np.array(y))
        yf = np.array(yf)
        self.feasible = (RandomForestClassifier(n_estimators=self.trees, random_state=self.seed,
                                                n_jobs=1).fit(np.array(Xf), yf)
                         if len(set(yf)) > 1 else None)
        ok_algs = {a for times in measured.values() for a, t in times.items() if t}
        tried = {a for times in measured.values() for a in times}
        self.all_failed = tried - ok_algs
        return len(X)

    # -- queries -------------------------------------------------------------
    def tree_predictions(self, points: np.ndarray) -> np.ndarray:
        """(trees, points, algorithms) predictions of every tree."""
        rows = self.rows(points)
        preds = np.stack([t.predict(rows) for t in self.forest.estimators_])
        return preds.reshape(len(self.forest.estimators_), -1, len(self.algorithms))

    def variance(self, points: np.ndarray) -> np.ndarray:
        """(points, algorithms) jackknife variance of the forest's prediction."""
        p = self.tree_predictions(points)
        b = p.shape[0]
        return ((p - p.mean(axis=0)) ** 2).sum(axis=0) / (b * (b - 1))

    def predict(self, points: np.ndarray) -> np.ndarray:
        """(points, algorithms) predicted log2 slowdown against the best."""
        return self.tree_predictions(points).mean(axis=0)

    def ok_probability(self, points: np.ndarray) -> np.ndarray:
        k = len(np.asarray(points).reshape(-1, 3))
        if self.feasible is None:
            prob = np.ones((k, len(self.algorithms)))
        else:
            col = list(self.feasible.classes_).index(True) if True in self.feasible.classes_ else None
            raw = self.feasible.predict_proba(self.rows(points))
            prob = (raw[:, col] if col is not None else np.zeros(len(raw))).reshape(k, -1)
        for a in self.all_failed:
            prob[:, self.algorithms.index(a)] = 0.0
        return prob

    def best(self, points: np.ndarray) -> list[str]:
        """Predicted fastest algorithm at each point, among those predicted to work
        (all algorithms if none is)."""
        pred = self.predict(points)
        works = self.ok_probability(points) >= 0.5
        masked = np.where(works | ~works.any(axis=1, keepdims=True), pred, np.inf)
        return [self.algorithms[i] for i in masked.argmin(axis=1)]
