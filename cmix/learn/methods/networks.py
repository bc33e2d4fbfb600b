"""The network methods: cmix (with mlp and the ablations), ae, vime, manifold_mixup.

Each is fitted on a group of runs at once (:meth:`NetworkMethod.fit_group`, the G seeds
of one ``cmix train`` call as one set of parameters with a model axis:
:mod:`cmix.learn.group`), and ends in the one head (:func:`cmix.learn.nn.build_head`): a
predictor on frozen latent rows of a pre-trained encoder (cmix, the ablations with
pre-training, ae, vime) or on a trainable SNP embedding of the dosages (mlp,
manifold_mixup), the covariates beside them and, as a linear term, starting as the
covariates-only model (:func:`new_head`). Each run's fitted method holds its own model's
slice: the encoder's and the head's weights, the dosage moments and the shapes;
:meth:`NetworkMethod.predict_proba` is the same code at the end of a run and in ``cmix
predict``.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ..data import LAST
from .base import FittedMethod


class NetworkMethod(FittedMethod):
    """A head, on an encoder's latent rows (``model``) or on the dosages (``model`` None),
    of one run (its model's slice of the group that fitted it). ``encode_autocast``: the
    encoder runs under bfloat16 autocast on CUDA."""

    encode_autocast = False

    def __init__(self, cfg, device="cpu"):
        super().__init__(cfg, device)
        self.model = self.head = self.probe = None

    @classmethod
    def fit_group(cls, group) -> list:
        """Fit the method for every run of ``group``; returns one fitted method per run."""
        raise NotImplementedError

    def fit(self, data):
        """Fit on one run (a group of one)."""
        from ..data import RowSource
        from ..group import Group

        group = Group([data], RowSource(data.root, data.train_rows, data.dev))
        fitted = type(self).fit_group(group)[0]
        self.__dict__.update(fitted.__dict__)
        return self

    # ------------------------------------------------------------ one run's slice
    @classmethod
    def from_group(cls, group, i: int, model, head, validation: dict, pseudo_labels=None,
                   probe=None):
        """Run i's fitted method: its slices of the group's ``model`` (a grouped
        ContrastiveMixup, or None) and ``head``, and its linear probe when the choice of
        head (:func:`choose_heads`) took one."""
        from ..nn import model_state

        ctx = group.ctxs[i]
        m = cls(group.cfg, group.dev)
        m.n_snps, m.n_classes, m.n_cov = ctx.n_snps, ctx.splits.n_classes, ctx.n_cov
        m.mean, m.sd = ctx.mean, ctx.sd
        state = m.state_dict_of(model_state(model, i) if model is not None else None,
                                {"features": model_state(head.features, i),
                                 "predictor": model_state(head.predictor, i)}, probe)
        m.load_state_dict(state)
        m.report = {"validation": validation, "pseudo_labels": pseudo_labels}
        return m

    def state_dict_of(self, encoder, head, probe=None) -> dict:
        return {"class": type(self).__name__, "cfg": self.cfg.flat(), "n_snps": self.n_snps,
                "n_classes": self.n_classes, "n_cov": self.n_cov, "mean": self.mean,
                "sd": self.sd, "encoder": encoder, "head": head, "probe": probe}

    # ------------------------------------------------------------ prediction
    def encode(self, x, batch: int = 4096):
        """float32 latent rows (n, H) of dosages x (n, M) (a tensor on the device)."""
        import contextlib

        import torch

        from ..nn import autocast

        self.model.eval()
        amp = autocast(x.device) if self.encode_autocast else contextlib.nullcontext()
        if not len(x):
            return torch.zeros((0, self.model.encoder.out_dim), device=x.device)
        with torch.no_grad(), amp:
            return torch.cat([self.model.encode(x[None, s:s + batch]).float()[0]
                              for s in range(0, len(x), batch)])

    def inputs(self, x: np.ndarray, covariates: np.ndarray):
        """The head's inputs of dosages x (n, M) and standardised covariates (n, K): the
        latent rows or the dosages, the covariates (float32) beside them."""
        import torch

        out = torch.from_numpy(np.ascontiguousarray(x)).to(self.device)
        if self.model is not None:
            out = self.encode(out)
        if self.n_cov:
            cov = torch.from_numpy(np.asarray(covariates, dtype=np.float32)).to(self.device)
            out = torch.cat([out.float(), cov], 1)
        return out

    def predict_proba(self, x, covariates):
        if self.probe is not None:          # the linear probe on the frozen latent
            return probe_proba(self.probe, self.inputs(x, covariates).cpu().numpy(),
                               self.n_classes)
        return self.head.proba(self.inputs(x, covariates)[None])[0].cpu().numpy()

    def latent(self, x, covariates):
        """The frozen encoder's latent rows (n, H), for the report's t-SNE."""
        import torch

        if self.model is None:
            return None
        return self.encode(torch.from_numpy(np.ascontiguousarray(x)).to(self.device))

    def state_dict(self):
        from ..nn import model_state

        return self.state_dict_of(
            model_state(self.model, 0) if self.model is not None else None,
            {"features": model_state(self.head.features, 0),
             "predictor": model_state(self.head.predictor, 0)}, self.probe)

    def load_state_dict(self, state):
        from ..nn import ContrastiveMixup, build_head, init_generators, load_model_state

        for k in ("n_snps", "n_classes", "n_cov", "mean", "sd"):
            setattr(self, k, state[k])
        self.probe = state.get("probe")             # runs fitted before the probe: none
        self.model = None
        if state["encoder"] is not None:
            self.model = ContrastiveMixup(init_generators([0], 0), self.n_snps, self.cfg.model,
                                          self.mean, self.sd)
            load_model_state(self.model, 0, state["encoder"])
            self.model.to(self.device).eval()
        latent = self.model.encoder.out_dim if self.model is not None else None
        self.head = build_head([0], self.n_snps, self.n_classes, self.n_cov, self.cfg,
                               latent_dim=latent, moments=(self.mean, self.sd),
                               device=self.device)
        load_model_state(self.head.features, 0, state["head"]["features"])
        load_model_state(self.head.predictor, 0, state["head"]["predictor"])
        return self


# ------------------------------------------------------------------ shared by the families
def cmix_model(group):
    """The cmix network (embedding + encoder + decoder + projection) of every model of the
    group, each model's weights drawn from its run's seed."""
    from ..nn import ContrastiveMixup, init_generators
    from ..streams import MODEL_INIT

    c0 = group.ctxs[0]
    return ContrastiveMixup(init_generators(group.seeds, MODEL_INIT), group.n_snps,
                            group.cfg.model, c0.mean, c0.sd).to(group.dev)


def covariates_start(ctx, all_labeled: bool, cache: dict):
    """(weight (C, K), bias (C,)) of a run's covariates baseline's model
    (:func:`cmix.learn.linear.fit_logreg_cv`: L2, C by cross-validation) fitted on its
    training labeled rows, or with ``all_labeled`` on every labeled row (training and
    validation, as the refit and the covariates baseline use them); fitted once per run
    for each (``cache``: (seed, all_labeled) -> result)."""
    from ..linear import fit_logreg_cv

    key = (ctx.seed, all_labeled)
    if key not in cache:
        s, cfg = ctx.splits, ctx.cfg.logreg
        rows = s.labeled if all_labeled else s.train_labeled
        y = s.label[rows]
        c = s.n_classes
        w, b = np.zeros((c, ctx.n_cov)), np.zeros(c)
        if len(np.unique(y)) > 1:
            lr = fit_logreg_cv(ctx.cov[rows].astype(np.float64), y, c, cfg.logreg_folds,
                               cfg.logreg_n_c, ctx.seed)[0]
            if len(lr.classes_) == 2:
                w[lr.classes_[1]], b[lr.classes_[1]] = lr.coef_[0], lr.intercept_[0]
            else:
                w[lr.classes_], b[lr.classes_] = lr.coef_, lr.intercept_
        cache[key] = (w, b)
    return cache[key]


def new_head(group, latent_dim, cache: dict, all_labeled: bool = False):
    """Fresh heads of every model (on latent rows of width ``latent_dim``, or on the
    dosages when None) and their Adam, seeded the same way at every call. With
    covariates each model's covariate term starts as its covariates-only model
    (:func:`covariates_start`) and its network's last layer at zero: the head starts as
    exactly that model and learns what the genotypes add; early stopping keeps the start
    as a candidate. ``all_labeled``: the start fitted on every labeled row, for the refit
    on training plus validation rows."""
    import torch

    from ..nn import GroupAdam, build_head

    cfg, c0 = group.cfg, group.ctxs[0]
    head = build_head(group.seeds, group.n_snps, group.n_classes, group.n_cov, cfg,
                      latent_dim=latent_dim, moments=(c0.mean, c0.sd), device=group.dev)
    if head.predictor.skip is not None:
        starts = [covariates_start(ctx, all_labeled, cache) for ctx in group.ctxs]
        with torch.no_grad():
            head.predictor.skip.weight.copy_(torch.from_numpy(np.stack([w for w, _ in starts])))
            head.predictor.skip.bias.copy_(torch.from_numpy(np.stack([b for _, b in starts])))
            head.predictor.net[-1].weight.zero_()
            head.predictor.net[-1].bias.zero_()
    return head, GroupAdam(head.parameters(), group.n_models, cfg.predictor.pred_lr,
                           cfg.predictor.pred_weight_decay)


def head_inputs(group, model=None):
    """rows -> the predictor's inputs (G, n, D) of each model's store rows (G arrays of
    one length): frozen latent rows of ``model`` (a grouped encoder), or the dosages when
    None (the head embeds them itself); the covariates beside them, if any."""
    from ..train import latent_rows

    def inputs(rows):
        rs = group.row_set(rows)
        x = group.source.gather(rs.pos_index)
        if model is not None:
            x = latent_rows(model, x)
        return group.with_cov(x, rs.pos)
    return inputs


def freeze(model) -> dict:
    """Freeze an encoder (eval mode, no gradients); returns a copy of its state, to check
    that it stays frozen."""
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def probe_features(probe: dict, inputs: np.ndarray):
    """The linear probe's features of a head's inputs (n, H + K) (latent, then the
    covariates): the latent standardised with the probe's moments, and the covariates
    (split off when the probe fits them out of the penalty)."""
    n_cov = probe["n_cov"]
    z = inputs[:, :inputs.shape[1] - n_cov].astype(np.float64)
    z = (z - probe["mu"]) / probe["sd"]
    return np.hstack([z, inputs[:, inputs.shape[1] - n_cov:].astype(np.float64)]) \
        if n_cov else z


def probe_proba(probe: dict, inputs: np.ndarray, n_classes: int) -> np.ndarray:
    """(n, C) probabilities of the linear probe for head inputs (n, H + K)."""
    from .base import full_proba

    return full_proba(probe["model"], probe_features(probe, inputs), n_classes)


def probe_cs(ctx) -> np.ndarray:
    """The linear probe's C grid: ``logreg_n_c`` values in 1e-4..1e2, the logreg
    baseline's."""
    return np.logspace(-4, 2, ctx.cfg.logreg.logreg_n_c)


def fit_probe(ctx, inputs: np.ndarray, y: np.ndarray, c: float,
              n_classes: int | None = None, cov_c: float | None = None) -> dict:
    """The linear probe of a run at C = ``c`` on head inputs (n, H + K) (frozen latent,
    covariates) of labeled rows of classes y (0..n_classes - 1, default the run's
    classes): L2 logistic regression on the latent standardised with these rows'
    moments (:func:`cmix.learn.linear.logreg_at`), the covariates beside it out of its
    penalty at the C their own model chooses (:func:`covariates_c`), as the logreg
    baseline fits them. C is chosen by the caller on rows the encoder never saw labeled
    (:func:`probe_path`): a cross-validation over the rows the encoder was pre-trained
    with would read their memorised classes. ``cov_c``: the covariates' C when the
    caller has it. Returns the probe (a dict: model, moments, n_cov, C)."""
    from ..linear import logreg_at

    n_cov = ctx.n_cov
    z = inputs[:, :inputs.shape[1] - n_cov].astype(np.float64)
    probe = {"mu": z.mean(0), "sd": z.std(0) + 1e-9, "n_cov": n_cov}
    x = probe_features(probe, inputs)
    n_classes = ctx.splits.n_classes if n_classes is None else n_classes
    cov = None
    if n_cov:
        x, cov = x[:, :-n_cov], x[:, -n_cov:]
        if cov_c is None:
            cov_c = covariates_c(ctx, cov, y, n_classes)
    probe.update(model=logreg_at(x, cov, y, n_classes, float(c), cov_c), C=float(c))
    return probe


def probe_path(ctx, x_fit: np.ndarray, y_fit: np.ndarray, x_eval: np.ndarray,
               n_classes: int | None = None) -> np.ndarray:
    """(n_c, n_eval, n_classes) probabilities of head inputs ``x_eval`` under the linear
    probe (:func:`fit_probe`) fitted on ``x_fit``, ``y_fit`` at each C of
    :func:`probe_cs`, smallest first."""
    n_classes = ctx.splits.n_classes if n_classes is None else n_classes
    n_cov = ctx.n_cov
    cov_c = (covariates_c(ctx, x_fit[:, x_fit.shape[1] - n_cov:].astype(np.float64), y_fit,
                          n_classes) if n_cov else None)
    return np.stack([probe_proba(fit_probe(ctx, x_fit, y_fit, c, n_classes, cov_c), x_eval,
                                 n_classes) for c in probe_cs(ctx)])


def covariates_c(ctx, cov: np.ndarray, y: np.ndarray, n_classes: int) -> float:
    """The C the covariates (n, K) of labeled rows y choose for their own model by
    cross-validation (:func:`cmix.learn.linear.fit_logreg_cv`): their penalty beside a
    probe. The covariates are inputs, not the encoder's output: a cross-validation over
    them reads no memorised class."""
    from ..linear import fit_logreg_cv

    cfg = ctx.cfg.logreg
    return fit_logreg_cv(cov, y, n_classes, cfg.logreg_folds, cfg.logreg_n_c, ctx.seed)[1]


def run_inputs(group, model, rows: list) -> list:
    """Each run's head inputs (n_i, H + K) numpy of its store rows ``rows[i]``, computed
    for the whole group at once (:func:`head_inputs`, the rows padded to one length)."""
    n = max(max(len(r) for r in rows), 1)
    padded = [np.concatenate([r, np.repeat(r[:1] if len(r) else np.zeros(1, np.int64),
                                           n - len(r))]) for r in rows]
    x = head_inputs(group, model)(padded).float().cpu().numpy()
    return [x[i, :len(r)] for i, r in enumerate(rows)]


def masked_epoch(src, sched, ok, active: list, opt, step_loss) -> list:
    """One self-supervised epoch of a group of G models over the batches of ``sched``
    (rows read by ``src``; ``ok`` (G, steps, B) which rows are real, ``active`` (G,) bool
    which models are still training): step_loss(s, x, m) gives the (G,) losses of step s's
    batch x with row mask m (G, B); every model with rows in the step takes an optimiser
    step. Returns each active model's {"loss": mean over its steps}, None for the others;
    the losses are read from the device once, at the end."""
    import torch

    act = torch.tensor(active, device=ok.device)
    tot = torch.zeros(len(active), dtype=torch.float64, device=ok.device)
    n = torch.zeros(len(active), dtype=torch.float64, device=ok.device)
    for s, x in enumerate(src.steps(sched)):
        m = ok[:, s] & act[:, None]
        loss = step_loss(s, x, m)
        opt.zero_grad()
        loss.sum().backward()
        step = m.any(1)
        opt.step(step)
        tot += loss.detach().double() * step
        n += step
    losses = (tot / n.clamp_min(1)).cpu().numpy()
    return [{"loss": float(v)} if a else None for v, a in zip(losses, active)]


def choose_heads(group, model, summaries: list) -> list:
    """For each run, the head its labels favour: the MLP predictor already fitted, or a
    linear probe on the frozen latent of ``model``, whichever has the lower log-loss on
    the run's validation rows. The MLP's: its early-stopped head's; the probe's: fitted
    on the training labeled rows at each C of :func:`probe_cs`, C the one with the
    lowest validation log-loss (the validation rows are the labeled rows whose labels
    pre-training never used: on the training labeled rows the latent holds the classes
    it was trained with, and a cross-validation there reads them). No test row is read.
    A chosen probe is fitted again at its C on every labeled row (training and
    validation), as the MLP is refitted. Records the choice, the probe's C and both
    losses in each run's validation summary; returns the probes (None where the MLP
    stays)."""
    from ...errors import CmixError
    from ..linear import require_two_per_class

    splits = [c.splits for c in group.ctxs]
    x_tr = run_inputs(group, model, [s.train_labeled for s in splits])
    x_val = run_inputs(group, model, [s.validation for s in splits])
    probes, chosen = [None] * group.n_models, {}
    for i, (ctx, s) in enumerate(zip(group.ctxs, splits)):
        mlp_loss = summaries[i].get("best_loss")
        choice = {"head": "mlp", "head_val_log_loss": {"mlp": mlp_loss, "linear": None},
                  "probe_C": None}
        y_tr, y_val = s.label[s.train_labeled], s.label[s.validation]
        try:
            require_two_per_class(y_tr, s.n_classes, "the linear probe's fit")
        except CmixError:              # too few labeled rows of a class: the MLP stays
            summaries[i].update(choice)
            continue
        if len(y_val) and mlp_loss is not None:
            path = probe_path(ctx, x_tr[i], y_tr, x_val[i])
            losses = -np.mean(np.log(np.clip(path[:, np.arange(len(y_val)), y_val], 1e-12,
                                             None)), axis=1)
            best = int(np.argmin(losses))
            choice["head_val_log_loss"]["linear"] = float(losses[best])
            choice["probe_C"] = float(probe_cs(ctx)[best])
            if losses[best] < mlp_loss:
                choice["head"] = "linear"
                chosen[i] = choice["probe_C"]
        summaries[i].update(choice)
    if chosen:
        x_lab = run_inputs(group, model, [s.labeled for s in splits])
        for i, c in chosen.items():
            s = splits[i]
            probes[i] = fit_probe(group.ctxs[i], x_lab[i], s.label[s.labeled], c)
    return probes


def supervised_heads(group, model, cache: dict):
    """The early-stopped, refitted heads (plain cross-entropy) of every model on the
    frozen latent of ``model`` (or on the dosages when None), on its training labeled
    rows, validated on its validation rows: (head, G validation summaries)."""
    import torch

    from .. import train as tr
    from ..group import Labeled, fit_heads
    from ..streams import PREDICTOR_STEPS

    inputs_of = head_inputs(group, model)
    rows = [c.splits.train_labeled for c in group.ctxs]
    counts = [len(r) for r in rows]
    n = max(counts)
    x = inputs_of([np.concatenate([r, np.repeat(r[:1], n - len(r))]) for r in rows])
    eye = np.eye(group.n_classes, dtype=np.float32)
    tgt = np.zeros((group.n_models, n, group.n_classes), np.float32)
    wt = np.zeros((group.n_models, n), np.float32)
    for i, (c, r) in enumerate(zip(group.ctxs, rows)):
        tgt[i, :len(r)] = eye[c.splits.label[r]]
        wt[i, :len(r)] = 1.0
    dev = group.dev
    train = Labeled(x=x, target=torch.from_numpy(tgt).to(dev), weight=torch.from_numpy(wt).to(dev),
                    count=torch.tensor(counts, device=dev))
    keys = group.keys(PREDICTOR_STEPS)
    off = torch.zeros(group.n_models, dtype=torch.bool, device=dev)
    latent = model.encoder.out_dim if model is not None else None

    def epoch_fn(head, opt, data, epoch, active):
        return tr.predictor_epoch(head, opt, data, epoch, active, keys,
                                  group.cfg.predictor.pred_batch_size, off)

    return fit_heads(group, partial(new_head, group, latent, cache), epoch_fn, train,
                     tr.validation_rows(group, inputs_of))


# ------------------------------------------------------------------ cmix, mlp, ablations
class ContrastiveMixupMethod(NetworkMethod):
    """cmix, mlp and the ablations (the registry's switches select the stages of
    :mod:`cmix.learn.train`): pre-training with the paper's pseudo-labels and without,
    the run's the arm its cross-fitted judge prefers (cmix, :func:`judged_pretraining`),
    or with them as propagated (cmix_paper), or without (cmix_selfsl); then the predictor
    on the frozen encoder (or, without pre-training, on the embedded dosages)."""

    family = "trainer"
    encode_autocast = True

    @classmethod
    def fit_group(cls, group) -> list:
        from .. import train as tr

        cfg, ctxs = group.cfg, group.ctxs
        sw = cfg.switches
        model = cmix_model(group)
        if sw.pretrain and sw.pseudo_labels and sw.judge:
            judged_pretraining(group, model)
        elif sw.pretrain and sw.pseudo_labels:
            shared_stage(group, "pretrain", "unjudged", lambda: tr.pretrain_stage(
                group, model, pretrain_rows(group), tr.paper_look(group, model)))
        elif sw.pretrain:
            shared_stage(group, "pretrain", None,
                         lambda: tr.pretrain_stage(group, model, pretrain_rows(group)))
        frozen = freeze(model)
        encoder = model if sw.pretrain else None
        cache: dict = {}
        latent = model.encoder.out_dim if sw.pretrain else None
        head, summaries = tr.predictor_stage(group, head_inputs(group, encoder),
                                             [tr.pseudo_label_rows(c) for c in ctxs],
                                             partial(new_head, group, latent, cache))
        tr.check_frozen(model, frozen)
        probes = choose_heads(group, encoder, summaries) if encoder is not None \
            else [None] * group.n_models
        keys = ("accuracy", "coverage", "n_rows", "missing_classes", "used", "graph",
                "mean_weight", "n_judge", "paper_brier", "selfsl_brier",
                "paper_accuracy", "selfsl_accuracy", "p_value")
        out = []
        for i, ctx in enumerate(ctxs):
            lp = ctx.parts.get("lp_info") or []
            pl = ({**{k: lp[-1].get(k) for k in keys}, "epochs": [r["epoch"] for r in lp]}
                  if lp else None)
            out.append(cls.from_group(group, i, encoder, head, summaries[i], pl, probes[i]))
        return out


def pretrain_rows(group, folds: dict | None = None):
    """The pre-training rows of every model of the group: each run's training labeled
    rows (a fold model f: those outside fold f of ``folds``, run id -> (n_L,) folds) and
    its unlabeled rows."""
    from .. import train as tr

    labeled = []
    for c, role in zip(group.ctxs, group.roles):
        rows = c.splits.train_labeled
        labeled.append(rows if role == 0 else rows[folds[id(c)] != role - 1])
    rows = tr.PretrainRows(labeled=group.row_set(labeled), y=None,
                           unlabeled=group.row_set([c.splits.unlabeled for c in group.ctxs]))
    rows.y = group.label[rows.labeled.pos]
    return rows


def judged_pretraining(group, model) -> None:
    """cmix's pre-training, into ``model`` (the group's runs' models): the paper's
    (pseudo-labels as propagated) or cmix_selfsl's (none), whichever the run's
    cross-fitted judge (:func:`judge_arms`) finds better. Each run trains 2 (K + 1)
    models, K = lp_judge_folds: the paper arm, its own model and K fold models (stage
    "pretrain", :func:`cmix.learn.train.paper_look` at every look), then the selfsl arm,
    the same K + 1 without pseudo-labels (stage "pretrain_all"). Fold model f of either
    arm never sees fold f's labels (not in its label-aware terms, not as a propagation
    seed) and has the initial weights and draws of the other arm's fold model f, so the
    two differ only by the pseudo-labels. The chosen arm's own model becomes the run's:
    its pre-training is exactly cmix_paper's or exactly cmix_selfsl's; refused, the
    run's pseudo-labels weigh nothing, so its predictor is cmix_selfsl's too."""
    from ...logs import log
    from .. import train as tr
    from ..nn import load_model_state, model_state

    k = group.cfg.pseudo_labels.lp_judge_folds
    folds = {id(c): tr.judge_folds(c) for c in group.ctxs}
    arms = group.with_folds(k)
    rows = pretrain_rows(arms, folds)
    paper, selfsl = cmix_model(arms), cmix_model(arms)
    for r in range(group.n_models):            # a run's own model: as the group's
        for m in (paper, selfsl):
            load_model_state(m, r * (k + 1), model_state(model, r))
    tr.pretrain_stage(arms, paper, rows, tr.paper_look(arms, paper, folds))
    for c in group.ctxs:
        if c.state.stage == "pretrain":
            c.state.stage, c.state.epoch = "pretrain_all", 0
    tr.pretrain_stage(arms, selfsl, rows, stage="pretrain_all")      # no look: no pseudo-labels
    for r, (ctx, verdict) in enumerate(zip(group.ctxs, judge_arms(arms, paper, selfsl, folds))):
        load_model_state(model, r, model_state(paper if verdict["used"] else selfsl,
                                               r * (k + 1)))
        ctx.parts["lp_info"][-1].update(verdict)
        if not verdict["used"]:
            ctx.parts["lp_info"][-1]["mean_weight"] = 0.0
            pseudo = ctx.parts["pseudo"]
            ctx.parts["pseudo"] = {"label": pseudo["label"],
                                   "weight": np.zeros_like(pseudo["weight"])}
        if not verdict["n_judge"]:
            log(f"seed {ctx.seed}: the judge could not score every labeled row (a fold "
                "leaves fewer than 2 classes of 2 rows outside it): pseudo-labels not used "
                "(the run is cmix_selfsl's)")
            continue
        log(f"seed {ctx.seed}: judge on {verdict['n_judge']} held-out labeled rows: held-out "
            f"Brier score {verdict['paper_brier']:.4f} with the paper's pseudo-labels vs "
            f"{verdict['selfsl_brier']:.4f} without (accuracy "
            f"{verdict['paper_accuracy']:.3f} vs {verdict['selfsl_accuracy']:.3f}, one-sided "
            f"paired t-test p = {verdict['p_value']:.3g}): "
            + ("pseudo-labels used (the run is cmix_paper's)" if verdict["used"] else
               "pseudo-labels not used (the run is cmix_selfsl's)"))


#: the judge's level: the chance of taking the paper's pseudo-labels in a run where
#: they predict held-out labeled rows no better than cmix_selfsl's training does
JUDGE_LEVEL = 0.05


def judge_arms(group, paper, selfsl, folds: dict) -> list:
    """The cross-fitted judge of each run of ``group`` (runs with their fold models,
    :meth:`cmix.learn.group.Group.with_folds`; ``paper``, ``selfsl``: both arms' grouped
    models; ``folds``: run id -> (n_L,) fold of each training labeled row). Every
    training labeled row, of fold f, is scored by the linear probe (:func:`fit_probe`)
    on fold model f's latent, fitted on the rows outside fold f, in either arm: n_L
    held-out Brier scores (sum over classes of (p - 1[class])^2, 0 to 2) per arm, from
    encoders and probes that never saw the row's label. The Brier score is bounded, so a
    few confidently wrong rows cannot decide the test as they can a log-loss.
    The probe's C is chosen on rows fold model f never saw labeled: fold f's rows are
    split in two halves (alternate rows), and each half is scored at the C of
    :func:`probe_cs` with the lowest mean Brier score on the other half (the rows
    outside the fold are no guide: the fold model holds their memorised classes, and a
    cross-validation on them takes the largest C); a fold of one row is scored at the C
    best on itself.
    A probe is fitted on the classes with 2 or more rows outside the fold; a held-out
    row of another class gets probability 0 for its class in both arms.
    The paper arm is used when it is shown better: the one-sided paired t-test of the
    per-row differences (selfsl's Brier score minus the paper's) has p <= :data:`JUDGE_LEVEL`.
    A run whose rows cannot all be judged (a fold leaving fewer than 2 classes of 2 rows
    for the probe) does not use them. Returns
    per run (in order) {"used", "n_judge", "paper_brier", "selfsl_brier",
    "paper_accuracy", "selfsl_accuracy", "p_value"}."""
    from scipy.stats import ttest_1samp

    rows = [c.splits.train_labeled for c in group.ctxs]
    inputs = {"paper": run_inputs(group, paper, rows), "selfsl": run_inputs(group, selfsl, rows)}
    out = []
    for ctx in group.runs():
        s = ctx.splits
        y, fold = s.label[s.train_labeled], folds[id(ctx)]
        loss = {a: np.full(len(y), np.nan) for a in inputs}
        right = {a: np.zeros(len(y), bool) for a in inputs}
        for j in (j for j in range(group.n_models)
                  if group.ctxs[j] is ctx and group.roles[j] > 0):
            held = fold == group.roles[j] - 1
            if not held.any():
                continue
            classes = np.flatnonzero(np.bincount(y[~held], minlength=s.n_classes) >= 2)
            if len(classes) < 2:
                continue
            fit = ~held & np.isin(y, classes)
            idx = np.flatnonzero(held)
            truth = np.eye(s.n_classes)[y[idx]]
            half = np.arange(len(idx)) % 2
            for a, x in inputs.items():
                p = np.zeros((len(probe_cs(ctx)), len(idx), s.n_classes))
                p[:, :, classes] = probe_path(ctx, x[j][fit], np.searchsorted(classes, y[fit]),
                                              x[j][idx], len(classes))
                brier = ((p - truth) ** 2).sum(2)                     # (n_c, n_held)
                for h in (0, 1):
                    rows, other = half == h, half != h
                    c = int(np.argmin(brier[:, other if other.any() else rows].mean(1)))
                    loss[a][idx[rows]] = brier[c, rows]
                    right[a][idx[rows]] = p[c, rows].argmax(1) == y[idx[rows]]
        d = loss["selfsl"] - loss["paper"]
        judged = len(d) > 0 and not np.isnan(d).any()
        if judged and np.std(d) > 0:
            p_value = float(ttest_1samp(d, 0.0, alternative="greater").pvalue)
        else:
            p_value = 0.0 if judged and d.mean() > 0 else 1.0
        out.append({"used": bool(judged and p_value <= JUDGE_LEVEL),
                    "n_judge": int(len(d)) if judged else 0,
                    **{f"{a}_brier": float(np.mean(loss[a])) if judged else None
                       for a in inputs},
                    **{f"{a}_accuracy": float(np.mean(right[a])) if judged else None
                       for a in inputs},
                    "p_value": float(f"{p_value:.3g}")})
    return out


def shared_stage(group, stage: str, pseudo, run) -> None:
    """Run pre-training stage ``stage`` (``run()``) for the runs that cannot take it from
    the shared-encoder folder (:func:`cmix.learn.shared.take_shared_stage`; ``pseudo``:
    "unjudged" or None), and leave it there for the others' later use
    (:func:`cmix.learn.shared.share_stage`). A run that took it is inactive in the
    group's loop (its state is past the stage)."""
    runs = group.runs()
    taken = [c.take_shared(stage, pseudo) for c in runs]
    run()
    for c, was_taken in zip(runs, taken):
        if not was_taken:
            c.share(stage, pseudo)


# ------------------------------------------------------------------ ae
class Autoencoder(NetworkMethod):
    """Autoencoder pre-training (the cmix network, reconstruction loss only) on all
    training-split rows, then the predictor on the frozen encoder."""

    family = "ae"

    @classmethod
    def fit_group(cls, group) -> list:
        from ..group import group_epochs
        from ..losses import reconstruction_loss
        from ..nn import GroupAdam
        from ..streams import AE_BATCHES, Draws

        cfg, src = group.cfg.pretrain, group.source
        model = cmix_model(group)
        opt = GroupAdam(model.parameters(), group.n_models, cfg.lr, cfg.weight_decay)
        train = group.row_set([c.train_rows for c in group.ctxs])
        keys = group.keys(AE_BATCHES, src.index_device)

        def epoch_fn(epoch, active):
            sched, ok = batch_schedule(group, train, Draws(keys, epoch), cfg.batch_size)
            model.train()
            return masked_epoch(src, sched, ok, active, opt, lambda s, x, m: reconstruction_loss(
                model.decoder(model.encode(x, m), m), x, model.embed, m))

        group_epochs(group, "pretrain", cfg.epochs, {"model": model, "opt": opt}, epoch_fn,
                     "ae pre-training")
        freeze(model)
        head, summaries = supervised_heads(group, model, {})
        probes = choose_heads(group, model, summaries)
        return [cls.from_group(group, i, model, head, summaries[i], probe=probes[i])
                for i in range(group.n_models)]


def batch_schedule(group, rows, draws, batch_size: int):
    """One epoch's batches of each model's rows (a RowSet), in a chunk-aware shuffled
    order: (source positions (G, S, B) on the source's index device, row mask (G, S, B)
    on the device)."""
    import torch

    from ..data import chunk_aware_order

    src = group.source
    idev = src.index_device
    store = src.rows_index[rows.pos_index]
    order = chunk_aware_order(draws, store, rows.count_index, src.chunk_rows, src.n_chunks,
                              group.cfg.data.buffer_chunks)
    g, n = order.shape
    n_steps = max(1, -(-n // batch_size))
    pad = n_steps * batch_size - n
    order = torch.nn.functional.pad(order, (0, pad)).view(g, n_steps, batch_size)
    ok = (torch.arange(n_steps * batch_size, device=idev).view(1, n_steps, batch_size)
          < rows.count_index.view(-1, 1, 1))
    pos = torch.gather(rows.pos_index, 1, order.view(g, -1)).view(order.shape)
    return pos, ok.to(group.dev)


# ------------------------------------------------------------------ vime
class Vime(NetworkMethod):
    """VIME self- and semi-supervised learning (Yoon et al. 2020): self-supervised
    pre-training of the encoder (:func:`vime_pretrain`), then a predictor on the frozen
    encoder with VIME's consistency loss on the unlabeled rows (:func:`vime_heads`)."""

    family = "vime"

    @classmethod
    def fit_group(cls, group) -> list:
        model = vime_pretrain(group)
        freeze(model)
        head, summaries = vime_heads(group, model)
        probes = choose_heads(group, model, summaries)
        return [cls.from_group(group, i, model, head, summaries[i], probe=probes[i])
                for i in range(group.n_models)]


def vime_pretrain(group):
    """VIME's self-supervised stage (resumable per epoch): corrupt each training row
    (mask probability vime_p_m, masked values drawn from the column's marginal in the
    batch), then estimate the mask and reconstruct the row from the encoding. Returns the
    grouped model."""
    from ..baselines import vime_corrupt, vime_self_loss
    from ..group import group_epochs
    from ..nn import GroupAdam, Layers, init_generators, mlp_layers
    from ..streams import VIME_BATCHES, VIME_CORRUPTION, VIME_MASK_ESTIMATOR, Draws

    cfg, vime, dev, src = group.cfg.pretrain, group.cfg.vime, group.dev, group.source
    model = cmix_model(group)
    dims = [model.encoder.out_dim] * group.cfg.model.proj_layers + [group.n_snps]
    mask_est = Layers(*mlp_layers(init_generators(group.seeds, VIME_MASK_ESTIMATOR), dims,
                                  batchnorm=False, last_act=False)).to(dev)
    params = list(model.embed.parameters()) + list(model.encoder.parameters()) \
        + list(model.decoder.parameters()) + list(mask_est.parameters())
    opt = GroupAdam(params, group.n_models, cfg.lr, cfg.weight_decay)
    train = group.row_set([c.train_rows for c in group.ctxs])
    keys_b = group.keys(VIME_BATCHES, src.index_device)
    keys_c = group.keys(VIME_CORRUPTION)

    def epoch_fn(epoch, active):
        sched, ok = batch_schedule(group, train, Draws(keys_b, epoch), cfg.batch_size)
        model.train()
        mask_est.train()

        def step_loss(s, x, m):
            x_tilde, mask = vime_corrupt(x, vime.vime_p_m, Draws(keys_c, epoch, s + 1), m.sum(1))
            z = model.encode(x_tilde, m)
            return vime_self_loss(mask_est(z, m), mask, model.decoder(z, m), x, model.embed,
                                  vime.vime_alpha, m)[0]

        return masked_epoch(src, sched, ok, active, opt, step_loss)

    group_epochs(group, "pretrain", cfg.epochs,
                 {"model": model, "mask_estimator": mask_est, "opt": opt}, epoch_fn,
                 "vime self-supervised")
    return model


def vime_heads(group, model):
    """VIME's semi-supervised predictors on the frozen encoder (:func:`vime_semi_epoch`),
    early-stopped and refitted: (head, G validation summaries)."""
    import torch

    from .. import train as tr
    from ..group import Labeled, fit_heads

    dev = group.dev
    inputs_of = head_inputs(group, model)
    rows = [c.splits.train_labeled for c in group.ctxs]
    counts = [len(r) for r in rows]
    n = max(counts)
    x = inputs_of([np.concatenate([r, np.repeat(r[:1], n - len(r))]) for r in rows])
    y = np.zeros((group.n_models, n), np.int64)
    for i, (c, r) in enumerate(zip(group.ctxs, rows)):
        y[i, :len(r)] = c.splits.label[r]
    y_t = torch.from_numpy(y).to(dev)
    count = torch.tensor(counts, device=dev)
    train = Labeled(x=x, target=torch.nn.functional.one_hot(y_t, group.n_classes).float(),
                    weight=(torch.arange(n, device=dev)[None, :] < count[:, None]).float(),
                    count=count)
    epoch_fn = vime_semi_epoch(group, model,
                               group.row_set([c.splits.unlabeled for c in group.ctxs]))
    return fit_heads(group, partial(new_head, group, model.encoder.out_dim, {}), epoch_fn,
                     train, tr.validation_rows(group, inputs_of))


def vime_semi_epoch(group, model, unl):
    """The epoch function (for :func:`cmix.learn.group.fit_heads`) of VIME's
    semi-supervised predictors: each step, cross-entropy on a batch of each model's
    labeled latents plus vime_beta x the variance of the logits over vime_k corruptions of
    each row of a batch of its unlabeled rows ``unl`` (a RowSet; chunk-aware order, one
    batch a step until they run out). The epoch function returns the summed losses (G,)."""
    import torch
    import torch.nn.functional as F

    from .. import train as tr
    from ..baselines import vime_consistency_loss, vime_corrupt
    from ..streams import VIME_SEMI_STEPS, VIME_UNLABELED_BATCHES, Draws

    vime, dev, src = group.cfg.vime, group.dev, group.source
    keys_s = group.keys(VIME_SEMI_STEPS)
    keys_u = group.keys(VIME_UNLABELED_BATCHES, src.index_device)
    bs, k, ub = group.cfg.predictor.pred_batch_size, vime.vime_k, group.cfg.pretrain.batch_size

    def epoch_fn(head, opt, data, epoch, active):
        g = data.weight.shape[0]
        labels = data.target.argmax(-1)
        u_sched, u_ok = (batch_schedule(group, unl, Draws(keys_u, epoch), ub)
                         if max(unl.counts) else (None, None))
        n_u_steps = u_sched.shape[1] if u_sched is not None else 0
        tot = torch.zeros(g, dtype=torch.float64, device=dev)
        for st in tr.head_steps(head, data, epoch, active, keys_s, bs):
            j, ok, step_ok, draws = st.j, st.ok, st.active, st.draws
            ce = F.cross_entropy(head.predictor(tr.rows_at(data.x, st.idx), ok).float()
                                 .transpose(1, 2), tr.rows_at(labels, st.idx), reduction="none")
            loss = (ce * ok).sum(1) / ok.sum(1).clamp_min(1)
            if j < n_u_steps and vime.vime_beta > 0:
                uo = u_ok[:, j] & step_ok[:, None]
                xu = src.gather(u_sched[:, j])                               # (G, Bu, M)
                with torch.no_grad():
                    n_u = u_ok[:, j].sum(1)
                    zk = torch.stack([model.encode(vime_corrupt(xu, vime.vime_p_m, draws,
                                                                n_u)[0])
                                      for _ in range(k)], 1)               # (G, K, Bu, H)
                    if group.n_cov:
                        cov_u = group.cov[u_sched[:, j].to(dev)]                 # (G, Bu, K)
                        zk = torch.cat([zk, cov_u[:, None].expand(g, k, *cov_u.shape[1:])], 3)
                mk = uo[:, None].expand(g, k, uo.shape[1]).reshape(g, -1)
                logits_k = head.predictor(zk.flatten(1, 2), mk).view(g, k, -1, group.n_classes)
                loss = loss + vime.vime_beta * vime_consistency_loss(logits_k, uo) \
                    * (uo.sum(1) >= 2)
            opt.zero_grad()
            (loss * step_ok).sum().backward()
            opt.step(step_ok)
            tot += loss.detach().double() * step_ok
        return tot

    return epoch_fn


# ------------------------------------------------------------------ manifold mixup
class ManifoldMixup(NetworkMethod):
    """Supervised predictor on the embedded SNPs (as mlp) with mixup at a layer drawn
    uniformly from {input, hidden 1, hidden 2} (Verma et al. 2019), lambda ~
    Beta(mixup_alpha, mixup_alpha)."""

    family = "manifold_mixup"

    @classmethod
    def fit_group(cls, group) -> list:
        import torch

        from .. import train as tr
        from ..baselines import manifold_mixup_step
        from ..group import Labeled, fit_heads
        from ..losses import soft_cross_entropy
        from ..streams import MANIFOLD_MIXUP_STEPS, gen

        dev, bs = group.dev, group.cfg.predictor.pred_batch_size
        inputs_of = head_inputs(group, None)
        rows = [c.splits.train_labeled for c in group.ctxs]
        counts = [len(r) for r in rows]
        n = max(counts)
        x = inputs_of([np.concatenate([r, np.repeat(r[:1], n - len(r))]) for r in rows])
        eye = np.eye(group.n_classes, dtype=np.float32)
        tgt = np.zeros((group.n_models, n, group.n_classes), np.float32)
        for i, (c, r) in enumerate(zip(group.ctxs, rows)):
            tgt[i, :len(r)] = eye[c.splits.label[r]]
        count_t = torch.tensor(counts, device=dev)
        train = Labeled(x=x, target=torch.from_numpy(tgt).to(dev),
                        weight=(torch.arange(n, device=dev)[None, :] < count_t[:, None]).float(),
                        count=count_t)
        a = float(group.cfg.manifold_mixup.mixup_alpha)
        keys = group.keys(MANIFOLD_MIXUP_STEPS)

        def epoch_fn(head, opt, data, epoch, active):
            g, n_rows = data.weight.shape
            n_steps = -(-n_rows // bs)
            # lambda ~ Beta(a, a) for every step's rows: drawn on the host for the whole
            # epoch from each run's stream (torch has no Beta inverse CDF), sent once
            lam_host = np.ones((g, n_steps, bs), np.float32)
            if a > 0:
                for i, seed in enumerate(group.seeds):
                    _, rng = gen(seed, MANIFOLD_MIXUP_STEPS, epoch)
                    lam_host[i] = rng.beta(a, a, (n_steps, bs))
            lam_all = torch.from_numpy(lam_host).to(dev)
            tot = torch.zeros(g, dtype=torch.float64, device=dev)
            for st in tr.head_steps(head, data, epoch, active, keys, bs):
                ok, b = st.ok, st.idx.shape[1]
                layer = (st.draws.uniform() * 3).long().clamp_max(2)
                perm = torch.argsort(torch.where(ok, st.draws.bits(b), LAST), dim=1,
                                     stable=True)
                logits, tgt_mix = manifold_mixup_step(
                    head.predictor, head.features(tr.rows_at(data.x, st.idx), ok),
                    tr.rows_at(data.target, st.idx), layer, lam_all[:, st.j, :b], perm, ok)
                loss = soft_cross_entropy(logits, tgt_mix, ok.float())
                opt.zero_grad()
                (loss * st.active).sum().backward()
                opt.step(st.active)
                tot += loss.detach().double() * st.active
            return tot

        head, summaries = fit_heads(group, partial(new_head, group, None, {}), epoch_fn, train,
                                    tr.validation_rows(group, inputs_of))
        return [cls.from_group(group, i, None, head, summaries[i])
                for i in range(group.n_models)]
