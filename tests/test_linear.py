"""Logistic regression with unpenalised covariates (cmix.learn.linear)."""

import numpy as np
import pytest

from cmix.learn.linear import _fit_offset, covariate_logits, fit_with_unpenalised_covariates


@pytest.mark.parametrize("n_classes", [2, 3])
def test_zero_offset_equals_scikit_learn(n_classes):
    """With no offset the objective is scikit-learn's L2 multinomial logistic regression
    (intercept unpenalised): the same probabilities."""
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 6))
    y = (x[:, 0] + 0.5 * rng.normal(size=200) > 0).astype(int) if n_classes == 2 else \
        np.digitize(x[:, 0] + 0.5 * rng.normal(size=200), [-0.5, 0.5])
    coef = _fit_offset(x, y, np.zeros((200, n_classes)), n_classes, 0.3)
    from scipy.special import softmax
    ours = softmax(x @ coef[:-1] + coef[-1], axis=1)
    ref = LogisticRegression(C=0.3, max_iter=5000, tol=1e-10).fit(x, y).predict_proba(x)
    np.testing.assert_allclose(ours, ref, atol=2e-4)


def test_offset_enters_unpenalised():
    """A huge penalty (C tiny) leaves exactly the offset model; the offset's own
    coefficients are not shrunk."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(100, 3))
    off = rng.normal(size=(100, 2)) * 3
    y = rng.integers(0, 2, 100)
    coef = _fit_offset(x, y, off, 2, 1e-8)
    assert np.abs(coef[:-1]).max() < 1e-5


def test_covariates_are_not_drowned_by_many_noise_snps():
    """Covariates carry the signal, 400 SNP columns are noise, 120 labeled rows: with the
    covariates unpenalised, logistic regression is at least as good as the covariates
    alone (up to noise); one common penalty on both (the old logreg) is far worse."""
    from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
    from sklearn.model_selection import StratifiedKFold

    rng = np.random.default_rng(2)
    n, n_test = 120, 2000
    cov = rng.normal(size=(n + n_test, 4))
    y = (cov @ np.array([1.5, -1.0, 0.8, 0.5]) + 0.5 * rng.normal(size=n + n_test) > 0).astype(int)
    snps = rng.normal(size=(n + n_test, 400))
    tr, te = np.arange(n), np.arange(n, n + n_test)
    model, c, k, loss = fit_with_unpenalised_covariates(snps[tr], cov[tr], y[tr], 2, 5, 10, 3)
    acc = np.mean(model.predict_proba(np.hstack([snps[te], cov[te]])).argmax(1) == y[te])
    cov_only = LogisticRegressionCV(Cs=np.logspace(-4, 2, 10), cv=StratifiedKFold(5, shuffle=True, random_state=3),
                                    scoring="neg_log_loss", max_iter=5000).fit(cov[tr], y[tr])
    acc_cov = np.mean(cov_only.predict(cov[te]) == y[te])
    joint = LogisticRegressionCV(Cs=np.logspace(-4, 2, 10), cv=StratifiedKFold(5, shuffle=True, random_state=3),
                                 scoring="neg_log_loss", max_iter=5000).fit(
        np.hstack([snps[tr], cov[tr]]), y[tr])
    acc_joint = np.mean(joint.predict(np.hstack([snps[te], cov[te]])) == y[te])
    assert acc >= acc_cov - 0.02, (acc, acc_cov)
    assert acc_joint < acc_cov - 0.03, (acc_joint, acc_cov)     # the old way loses
    # with covariates, the smallest C gives back the covariates model itself
    assert c <= 1e-2


def test_covariate_logits_of_no_model_are_zero():
    assert np.all(covariate_logits(None, np.zeros((3, 0)), 4) == 0)
