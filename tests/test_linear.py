"""Logistic regression with the covariates out of the SNPs' penalty (cmix.learn.linear),
against scikit-learn and statsmodels fitted on the same rows."""

import numpy as np
import pytest

from cmix.learn.linear import _fit_penalised, fit_with_covariates


@pytest.mark.parametrize("n_classes", [2, 3])
def test_one_penalty_equals_scikit_learn(n_classes):
    """With the same penalty on every column the objective is scikit-learn's L2
    multinomial logistic regression (intercept unpenalised): the same probabilities."""
    from scipy.special import softmax
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 6))
    y = (x[:, 0] + 0.5 * rng.normal(size=200) > 0).astype(int) if n_classes == 2 else \
        np.digitize(x[:, 0] + 0.5 * rng.normal(size=200), [-0.5, 0.5])
    coef = _fit_penalised(x, y, n_classes, np.full(6, 1 / 0.3))
    ours = softmax(x @ coef[:-1] + coef[-1], axis=1)
    ref = LogisticRegression(C=0.3, max_iter=5000, tol=1e-10).fit(x, y).predict_proba(x)
    np.testing.assert_allclose(ours, ref, atol=2e-4)


def test_a_column_without_penalty_is_the_maximum_likelihood_fit():
    """Columns at inv_c 0 are unpenalised: statsmodels' Logit on the same columns, and a
    column beside them at a large penalty is held near 0."""
    import statsmodels.api as sm

    rng = np.random.default_rng(1)
    x, cov = rng.normal(size=(400, 1)), rng.normal(size=(400, 2))
    y = (cov @ [1.0, -0.7] + rng.logistic(size=400) > 0).astype(int)
    ref = sm.Logit(y, sm.add_constant(cov)).fit(disp=0).params
    coef = _fit_penalised(cov, y, 2, np.zeros(2))
    np.testing.assert_allclose(coef[:2, 1], ref[1:], atol=1e-4)
    np.testing.assert_allclose(coef[2, 1], ref[0], atol=1e-4)
    coef = _fit_penalised(np.hstack([x, cov]), y, 2, np.array([1e4, 0.0, 0.0]))
    assert abs(coef[0, 1]) < 2e-3
    np.testing.assert_allclose(coef[1:3, 1], ref[1:], atol=3e-3)


def test_covariates_are_estimated_beside_the_snps():
    """Strong SNP effects and two covariates (one correlated with a SNP, as a PC is): the
    covariates' coefficients are those of statsmodels' unpenalised Logit on SNPs and
    covariates together (the frozen covariates-only offset kept 0.66 for 1.5, the
    attenuated marginal effect), and the probabilities are scikit-learn's for the chosen
    penalties (covariate columns rescaled so that one C gives each its own penalty)."""
    import statsmodels.api as sm
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(4)
    n = 3000
    x = rng.normal(size=(n, 5))
    cov = np.column_stack([rng.normal(size=n), 0.6 * x[:, 0] + 0.8 * rng.normal(size=n)])
    y = (x @ [1.2, -1.0, 0.8, 0.0, 0.5] + cov @ [1.5, -1.0] + rng.logistic(size=n) > 0)
    y = y.astype(int)
    model, c, k, loss = fit_with_covariates(x, cov, y, 2, 5, 8, seed=0)
    ref = sm.Logit(y, sm.add_constant(np.hstack([x, cov]))).fit(disp=0).params
    np.testing.assert_allclose(model.coef[5:7, 1], ref[6:8], atol=0.03)
    scale = np.sqrt(model.covariates_c / c)
    z = np.hstack([x, cov * scale])
    sk = LogisticRegression(C=c, max_iter=10000, tol=1e-10).fit(z, y)
    np.testing.assert_allclose(model.predict_proba(np.hstack([x, cov])), sk.predict_proba(z),
                               atol=2e-4)


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
    model, c, k, loss = fit_with_covariates(snps[tr], cov[tr], y[tr], 2, 5, 10, 3)
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
