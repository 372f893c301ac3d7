"""The active learner's model of one collective (ACCLAiM, Wilkins et al., CLUSTER 2022).

One random forest per collective, the algorithm as a feature: a row is
(nodes, ppn, log2 message size[, log2 rank count, rank count a power of two],
algorithm code) — the bracket is the default `ranks` feature set. The target is the algorithm's
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


MODELS = ("forest", "extratrees")
# point features: ACCLAiM's (nodes, ppn, log2 size); "ranks" adds log2 of the rank
# count and whether it is a power of two (what recursive-doubling / halving
# algorithms' step counts depend on)
FEATURE_SETS = ("acclaim", "ranks")


# An algorithm that failed at this many measured points with one ppn, and worked at
# none with it, is not picked for that ppn: SMPI's SMP algorithms deadlock at a ppn
# they do not support (smp_rdb allreduce at ppn 3), and the classifier, which shares
# its trees with every algorithm and layout, gave 6x3 a success probability >= 0.5
# after smp_rdb had failed at all 5 of its ppn-3 points.
PPN_FAILURES = 2


def failed_by_ppn(measured) -> dict[str, set[int]]:
    """algorithm -> the ppn values where it failed at PPN_FAILURES measured points or
    more and worked at none."""
    failed: dict[tuple[str, int], int] = {}
    worked: set[tuple[str, int]] = set()
    for (_, ppn, _), times in measured.items():
        for a, t in times.items():
            if t:
                worked.add((a, ppn))
            else:
                failed[(a, ppn)] = failed.get((a, ppn), 0) + 1
    out: dict[str, set[int]] = {}
    for (a, ppn), k in failed.items():
        if k >= PPN_FAILURES and (a, ppn) not in worked:
            out.setdefault(a, set()).add(ppn)
    return out


class CollectiveModel:
    """kind: "forest" (RandomForestRegressor: bootstrap samples, best split
    thresholds; ACCLAiM's model, the default) or "extratrees" (ExtraTreesRegressor:
    every tree on all rows, random split thresholds; measured, not adopted:
    docs/active.md)."""

    def __init__(self, algorithms: list[str], trees: int, seed: int, kind: str = "forest",
                 per_algorithm: bool = False, features: str = "acclaim"):
        if not algorithms:
            raise ValueError("no candidate algorithms")
        if kind not in MODELS:
            raise ValueError(f"unknown model {kind!r} (one of {', '.join(MODELS)})")
        self.algorithms = list(algorithms)
        self.trees, self.seed, self.kind = trees, seed, kind
        # per_algorithm: one regressor per algorithm on (nodes, ppn, log2 size), instead
        # of one with the algorithm's code as a feature
        self.per_algorithm = per_algorithm
        if features not in FEATURE_SETS:
            raise ValueError(f"unknown features {features!r} (one of {', '.join(FEATURE_SETS)})")
        self.features = features
        self.forest = None
        # algorithms never to pick (e.g. they returned wrong data somewhere): set by the learner
        self.untrusted: set[str] = set()
        self.feasible = None          # classifier, or None when every attempt succeeded
        self.all_failed: set[str] = set()
        self.failed_ppn: dict[str, set[int]] = {}    # failed_by_ppn of the data

    # -- features ----------------------------------------------------------
    def point_features(self, points) -> np.ndarray:
        """(points, features) of points (nodes, ppn, size)."""
        pts = np.asarray(points, dtype=float).reshape(-1, 3)
        cols = [pts[:, 0], pts[:, 1], np.log2(np.maximum(pts[:, 2], 1))]
        if self.features == "ranks":
            ranks = pts[:, 0] * pts[:, 1]
            cols += [np.log2(np.maximum(ranks, 1)),
                     np.array([is_pow2(int(r)) for r in ranks], dtype=float)]
        return np.column_stack(cols)

    def rows(self, points: np.ndarray) -> np.ndarray:
        """Feature rows of every algorithm at every point (point-major): the point's
        features, then the algorithm's code."""
        f = self.point_features(points)
        k, a = len(f), len(self.algorithms)
        return np.column_stack([np.repeat(f, a, axis=0), np.tile(np.arange(a), k)])

    # -- training ----------------------------------------------------------
    def fit(self, measured: dict[tuple[int, int, int], dict[str, float | None]]) -> int:
        """measured: point -> {algorithm: time in s, or None when it failed}.
        Returns the number of training rows (successful measurements)."""
        from sklearn.ensemble import ExtraTreesRegressor, RandomForestClassifier, RandomForestRegressor
        code = {a: i for i, a in enumerate(self.algorithms)}
        pts = list(measured)            # insertion order: the forest's bootstrap draws depend on it
        if not pts:
            raise ValueError("no successful measurement to learn from")
        feats = self.point_features(pts)
        X, y, Xf, yf = [], [], [], []
        for f, pt in zip(feats, pts):
            times = measured[pt]
            ok = {a: t for a, t in times.items() if t is not None and t > 0 and a in code}
            for a, t in times.items():
                if a in code:
                    Xf.append((*f, code[a]))
                    yf.append(a in ok)
            if not ok:
                continue
            best = min(ok.values())
            for a, t in ok.items():
                X.append((*f, code[a]))
                y.append(math.log2(t / best))
        if not X:
            raise ValueError("no successful measurement to learn from")
        reg = RandomForestRegressor if self.kind == "forest" else ExtraTreesRegressor
        X, y = np.array(X), np.array(y)
        if self.per_algorithm:
            self.forest = {}
            for i in range(len(self.algorithms)):
                sel = X[:, -1] == i
                if sel.any():
                    self.forest[i] = reg(n_estimators=self.trees, random_state=self.seed,
                                         n_jobs=1).fit(X[sel, :-1], y[sel])
            self._unseen = float(y.max()) + 1.0     # never measured: all_failed masks it
        else:
            self.forest = reg(n_estimators=self.trees, random_state=self.seed, n_jobs=1).fit(X, y)
        yf = np.array(yf)
        self.feasible = (RandomForestClassifier(n_estimators=self.trees, random_state=self.seed,
                                                n_jobs=1).fit(np.array(Xf), yf)
                         if len(set(yf)) > 1 else None)
        ok_algs = {a for times in measured.values() for a, t in times.items() if t}
        tried = {a for times in measured.values() for a in times}
        self.all_failed = tried - ok_algs
        self.failed_ppn = failed_by_ppn(measured)
        return len(X)

    # -- queries -------------------------------------------------------------
    def tree_predictions(self, points: np.ndarray) -> np.ndarray:
        """(trees, points, algorithms) predictions of every tree."""
        if isinstance(self.forest, dict):
            x = self.point_features(points)
            out = np.full((self.trees, len(x), len(self.algorithms)), self._unseen)
            for i, f in self.forest.items():
                out[:, :, i] = np.stack([t.predict(x) for t in f.estimators_])
            return out
        rows = self.rows(points)
        preds = np.stack([t.predict(rows) for t in self.forest.estimators_])
        return preds.reshape(len(self.forest.estimators_), -1, len(self.algorithms))

    @staticmethod
    def _jackknife(per_tree: np.ndarray) -> np.ndarray:
        """Jackknife variance of the mean over the first axis (the trees)."""
        b = per_tree.shape[0]
        return ((per_tree - per_tree.mean(axis=0)) ** 2).sum(axis=0) / (b * (b - 1))

    def excluded(self, points: np.ndarray) -> np.ndarray:
        """(points, algorithms) True where the data rules an algorithm out whatever the
        classifier says: untrusted (wrong data somewhere), failed at every measured
        point, or failed at PPN_FAILURES points of the point's ppn and worked at none."""
        pts = np.asarray(points, dtype=float).reshape(-1, 3)
        out = np.zeros((len(pts), len(self.algorithms)), dtype=bool)
        for a in (self.all_failed | self.untrusted) & set(self.algorithms):
            out[:, self.algorithms.index(a)] = True
        for a, bad in self.failed_ppn.items():
            if a in self.algorithms:
                out[np.isin(pts[:, 1], list(bad)), self.algorithms.index(a)] = True
        return out

    def _candidates(self, points: np.ndarray, mean: np.ndarray) -> np.ndarray:
        """mean with +inf for the algorithms the decision may not pick at a point: those
        predicted to fail (probability of success < 0.5). Where none is predicted to
        work, the fallback is the algorithms only the classifier doubts: one that
        returned wrong data, failed everywhere or failed at its ppn (excluded) stays
        out; all come back only where every algorithm is excluded (the table must
        name one)."""
        works = self.ok_probability(points) >= 0.5
        allowed = ~self.excluded(points)
        fallback = np.where(allowed.any(axis=1, keepdims=True), allowed, True)
        keep = np.where(works.any(axis=1, keepdims=True), works, fallback)
        return np.where(keep, mean, np.inf)

    def variance(self, points: np.ndarray) -> np.ndarray:
        """(points, algorithms) jackknife variance of the forest's prediction."""
        return self._jackknife(self.tree_predictions(points))

    def decision_variance(self, points: np.ndarray) -> np.ndarray:
        """(points,) jackknife variance of the predicted gap between the predicted best
        algorithm and the runner-up (among those predicted to work): how unsure the
        model is about the decision at a point, not about any one algorithm."""
        p = self.tree_predictions(points)
        masked = self._candidates(points, p.mean(axis=0))
        if masked.shape[1] < 2:
            return np.zeros(len(masked))
        first, second = np.argsort(masked, axis=1, kind="stable")[:, :2].T
        idx = np.arange(len(masked))
        var = self._jackknife(p[:, idx, second] - p[:, idx, first])
        # the runner-up is a candidate or there is none: an algorithm the decision may
        # not pick is never the runner-up (one candidate left: nothing to decide)
        return np.where(np.isfinite(masked[idx, second]), var, 0.0)

    def choice(self, points: np.ndarray) -> np.ndarray:
        """Index of the predicted fastest algorithm (among those predicted to work;
        `_candidates`)."""
        return self._candidates(points, self.predict(points)).argmin(axis=1)

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
        return np.where(self.excluded(points), 0.0, prob)

    def best(self, points: np.ndarray) -> list[str]:
        """Predicted fastest algorithm at each point, among those predicted to work
        (where none is: among those not excluded, `_candidates`)."""
        return [self.algorithms[i] for i in self.choice(points)]
