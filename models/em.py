"""EM clustering (GaussianMixture, components chosen by BIC) that maps clusters to labels by the windows they hold."""

from __future__ import annotations

from collections import Counter

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.mixture import GaussianMixture
from sklearn.utils.validation import check_is_fitted

__all__ = ["EMClassifier"]


class EMClassifier(ClassifierMixin, BaseEstimator):
    """Gaussian mixture with BIC-chosen size; each cluster takes the label whose labelled windows it holds the largest share of.

    Clusters that hold no labelled window (or every cluster, when fitted without labels)
    are reported as groups ``cluster-N``.

    Parameters
    ----------
    max_components : int
        Largest mixture tried; BIC picks among 1..max_components.
    covariance_type : str
        GaussianMixture covariance type; "diag" keeps the per-cluster likelihoods explainable.
    bic_sample : int
        At most this many windows are used to choose the size (all are used for the final fit).
    random_state : int or None
    """

    def __init__(self, max_components: int = 12, covariance_type: str = "diag",
                 reg_covar: float = 1e-3, bic_sample: int = 20000, random_state: int | None = 0) -> None:
        self.max_components = max_components
        self.covariance_type = covariance_type
        self.reg_covar = reg_covar
        self.bic_sample = bic_sample
        self.random_state = random_state

    def fit(self, X: np.ndarray, y: np.ndarray | None = None) -> "EMClassifier":
        """Choose the mixture size by BIC, fit it, and map clusters to labels.

        Parameters
        ----------
        X : ndarray of shape (n_windows, n_features)
        y : ndarray of shape (n_windows,) or None
            Labels; None (or None/"" entries) for unlabelled windows.
        """
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or len(X) < 2:
            raise ValueError("EM needs at least two windows")
        rng = np.random.default_rng(self.random_state)
        sample = X if len(X) <= self.bic_sample else X[rng.choice(len(X), self.bic_sample, replace=False)]
        best: GaussianMixture | None = None
        self.bic_: dict[int, float] = {}
        for k in range(1, min(self.max_components, len(sample)) + 1):
            gm = GaussianMixture(k, covariance_type=self.covariance_type, reg_covar=self.reg_covar,
                                 random_state=self.random_state, max_iter=200)
            gm.fit(sample)
            self.bic_[k] = float(gm.bic(sample))
            if best is None or self.bic_[k] < min(v for kk, v in self.bic_.items() if kk != k):
                best = gm
        assert best is not None
        self.mixture_ = GaussianMixture(best.n_components, covariance_type=self.covariance_type,
                                        reg_covar=self.reg_covar, random_state=self.random_state,
                                        max_iter=200).fit(X)
        clusters = self.mixture_.predict(X)
        names: list[str] = []
        self.cluster_counts_: list[dict[str, int]] = []
        labels = np.full(len(clusters), None, dtype=object) if y is None else np.asarray(y, dtype=object)
        totals = Counter(str(v) for v in labels if v)
        for j in range(self.mixture_.n_components):
            counts = dict(Counter(str(v) for v in labels[clusters == j] if v))
            self.cluster_counts_.append(counts)
            # A cluster goes to the label whose windows it holds the largest share of, so a
            # label with fewer windows (html-serving) is not outvoted by sheer numbers.
            share = {v: n / totals[v] for v, n in counts.items()}
            names.append(max(sorted(share), key=share.__getitem__) if share else f"cluster-{j}")
        self.cluster_labels_ = np.array(names, dtype=object)
        self.classes_ = np.array(sorted(set(names)), dtype=object)
        self.assign_ = (self.cluster_labels_[:, None] == self.classes_[None, :]).astype(np.float64)
        self.n_features_in_ = X.shape[1]
        return self

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """Probability of each label: the responsibilities of the clusters mapped to it.

        Returns
        -------
        ndarray of shape (n_windows, n_classes)
        """
        check_is_fitted(self, "mixture_")
        return self.mixture_.predict_proba(np.asarray(X, dtype=np.float64)) @ self.assign_

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Most probable label per window, shape (n_windows,)."""
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]

    def cluster_log_likelihoods(self, X: np.ndarray) -> np.ndarray:
        """Log of weight × density of each window under each cluster, shape (n_windows, n_components)."""
        check_is_fitted(self, "mixture_")
        X = np.asarray(X, dtype=np.float64)
        gm = self.mixture_
        if gm.covariance_type != "diag":
            raise ValueError("cluster likelihoods are only explained for diagonal covariances")
        var = gm.covariances_
        d = X[:, None, :] - gm.means_[None, :, :]
        ll = -0.5 * (np.sum(np.log(2 * np.pi * var), axis=1)[None, :] + np.sum(d * d / var[None], axis=2))
        return ll + np.log(gm.weights_)[None, :]
