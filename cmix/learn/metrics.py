"""Classification metrics in numpy, with scikit-learn's arithmetic (unweighted rows).

Each function does the operations of its scikit-learn namesake (1.9) in the same order
and dtypes, so it gives the same float to the last bit (tests hold each against
scikit-learn on random and tied inputs), without importing scikit-learn, which takes
over a second: a network's run otherwise needs none of it.
"""

from __future__ import annotations

import numpy as np


def confusion_matrix(y_true, y_pred) -> np.ndarray:
    """int64 (L, L) counts of (true, predicted) over the sorted labels present in either."""
    y_true, y_pred = np.ravel(y_true), np.ravel(y_pred)
    labels = np.unique(np.concatenate([y_true, y_pred]))
    counts = np.zeros((len(labels), len(labels)), dtype=np.int64)
    np.add.at(counts, (np.searchsorted(labels, y_true), np.searchsorted(labels, y_pred)), 1)
    return counts


def balanced_accuracy_score(y_true, y_pred) -> float:
    """Mean over the true classes of the share of their rows predicted right."""
    counts = confusion_matrix(y_true, y_pred)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_class = np.diagonal(counts) / np.sum(counts, axis=1)
    per_class = per_class[~np.isnan(per_class)]       # predicted classes never true
    return float(np.mean(per_class))


def matthews_corrcoef(y_true, y_pred) -> float:
    """Matthews correlation (multi-class form, Gorodkin's R_K) of the confusion matrix;
    0.0 when undefined."""
    counts = confusion_matrix(y_true, y_pred)
    t_sum = counts.sum(axis=1, dtype=np.float64)
    p_sum = counts.sum(axis=0, dtype=np.float64)
    n_correct = np.trace(counts, dtype=np.float64)
    n_samples = p_sum.sum()
    cov_ytyp = n_correct * n_samples - np.dot(t_sum, p_sum)
    cov_ypyp = n_samples**2 - np.dot(p_sum, p_sum)
    cov_ytyt = n_samples**2 - np.dot(t_sum, t_sum)
    cov_ypyp_ytyt = cov_ypyp * cov_ytyt
    if cov_ypyp_ytyt == 0:
        return 0.0
    return float(cov_ytyp / np.sqrt(cov_ypyp_ytyt))


def _positives_at_thresholds(y_true, y_score) -> tuple[np.ndarray, np.ndarray]:
    """(true positives, false positives), float64, at each distinct score taken as the
    threshold, highest first; y_true: 0/1 or bool (n,), y_score: (n,)."""
    pos = (np.ravel(y_true) == 1).astype(np.int32)
    score = np.ravel(y_score)
    order = np.argsort(score, kind="stable")[::-1]   # within ties the order is immaterial
    score, pos = score[order], pos[order]
    ends = np.concatenate([np.nonzero(np.diff(score))[0], [pos.size - 1]])
    tps = np.cumsum(pos.astype(np.float64) * 1.0, dtype=np.float64)[ends]
    fps = 1 + ends.astype(np.float64) - tps
    return tps, fps


def roc_auc_score(y_true, y_score) -> float:
    """Area under the ROC curve (trapezoids over the distinct thresholds, collinear
    points dropped); y_true 0/1 or bool with both present."""
    tps, fps = _positives_at_thresholds(y_true, y_score)
    if fps.shape[0] > 2:
        corner = np.concatenate([[True], np.logical_or(np.diff(fps, 2), np.diff(tps, 2)),
                                 [True]])
        tps, fps = tps[corner], fps[corner]
    tps = np.concatenate([[0.0], tps])
    fps = np.concatenate([[0.0], fps])
    fpr, tpr = fps / fps[-1], tps / tps[-1]
    width = fpr[1:] - fpr[:-1]
    return float(np.sum(width * (tpr[1:] + tpr[:-1]) / 2.0, dtype=np.float64))


def average_precision_score(y_true, y_score) -> float:
    """Average precision: the precision at each threshold weighted by the recall it
    adds; y_true 0/1 or bool with some positive."""
    tps, fps = _positives_at_thresholds(y_true, y_score)
    ps = tps + fps
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(ps != 0, np.divide(tps, ps), 0.0)
    recall = tps / tps[-1]
    precision = np.concatenate([precision[::-1], [1.0]])
    recall = np.concatenate([recall[::-1], [0.0]])
    return float(max(0.0, -np.sum(np.diff(recall) * precision[:-1])))
