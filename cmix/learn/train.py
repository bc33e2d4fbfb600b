"""Contrastive Mixup training: the stages of cmix, mlp and the ablations (METHOD.md).

Stages: splits -> pre-training (within-class mixup at a random encoder layer, SupCon +
reconstruction, label propagation after ``warmup_epochs`` and every ``lp_every`` epochs)
-> predictor on the frozen encoder (latent mixup, soft targets, pseudo-labeled rows
weighted by their certainty, early stopping on the labeled validation rows, best
checkpoint reloaded) -> test metrics.

The method class that runs these stages is
:class:`cmix.learn.methods.networks.ContrastiveMixupMethod`; the run folder, checkpoint,
resumable loops and resume come from :mod:`cmix.learn.harness` through the run (``ctx``)
they are handed. Randomness (:mod:`cmix.learn.streams`): the model initialisation comes
from ``seed``; every epoch draws its batches, layers, lambdas and partners from
generators seeded by (seed, stage, epoch), so a resumed run repeats
exactly what an uninterrupted one does (bit-for-bit on CPU). Runs use torch's
deterministic kernels (:func:`cmix.learn.harness.deterministic_algorithms`), and the reductions
that torch or the BLAS split among threads (batch norm statistics, loss averages, label
propagation's dot products) are summed in an order that does not depend on the thread
count; README says what is and is not the same across thread counts.

Methods (:mod:`cmix.learn.methods`): ``cmix`` (the full method), ``mlp`` (supervised predictor
on the embedded inputs, same labels, no pre-training) and the ablations, all one code
path with switches (``pretrain``, ``pseudo_labels``, ``predictor_mixup``, ``mix``).
"""

from __future__ import annotations

import time

import numpy as np

from . import streams
from ..io import CmixError, log


# ------------------------------------------------------------------ small helpers
def _amp(device):
    from .nn import autocast

    return autocast(device)


def embed_rows(model, loader, device, batch_size: int | None = None):
    """Latent rows (len(loader), H) float32 on ``device`` in position order, eval mode."""
    import torch

    model.eval()
    out = torch.empty((len(loader), model.encoder.out_dim), device=device)
    with torch.no_grad(), _amp(device):
        for pos, x in loader.batches(shuffle=False):
            out[torch.as_tensor(pos, device=device)] = model.encode(x.to(device)).float()
    return out


# ------------------------------------------------------------------ pre-training
def contrastive_mixup_loss(model, x, labels, weights, contrastive, gen, n_classes, device):
    """The pre-training loss of one batch: (total, contrastive, reconstruction) tensors.

    x: (B, M) dosages; labels: (B,) int64 class or -1 (no label); weights: (B,) certainty;
    contrastive: the config's ``contrastive`` section (alpha, tau, beta, mix).
    Partners (drawn in proportion to certainty) and lambda ~ U(0, alpha) come from
    :func:`cmix.learn.losses.draw_mixup` (within the class with mix ==
    "within_class"); rows are mixed in the hidden
    layer t, drawn uniformly from 0..n_layers of the encoder. The weighted supervised
    contrastive loss (temperature tau) runs over the labeled rows and the mixed rows
    with their soft class targets (:func:`cmix.learn.losses.contrastive_targets`); the
    reconstruction loss is of every row. total = contrastive + beta * reconstruction.
    """
    import torch

    from .losses import (contrastive_targets, draw_mixup, mix_rows, reconstruction_loss,
                         supcon_loss)

    t = int(torch.randint(0, model.encoder.n_layers + 1, (1,), generator=gen))
    partner, lam = draw_mixup(labels, contrastive.alpha, gen,
                              contrastive.mix == "within_class", weights)
    with _amp(device):
        h = model.encoder.forward_to(model.embed(x), t)
        mixed, _ = mix_rows(h, partner, lam)
        # originals and mixed rows finish the encoder as ONE batch: with batch norm, the
        # statistics are of that batch and the running statistics move once per step
        out = model.encoder.forward_from(torch.cat([h, mixed]), t)
        z, zm = out[:len(h)], out[len(h):]
        recon = reconstruction_loss(model.decoder(z), x, model.embed)
        orig, mrows, q, w = contrastive_targets(labels, weights, partner, lam, n_classes)
        if len(orig):
            p = model.proj(torch.cat([z[orig], zm]))
            con = supcon_loss(p, q, w, contrastive.tau)
        else:
            con = recon * 0.0
        return con + contrastive.beta * recon, con, recon


def pretrain_epoch(model, opt, labeled, unlabeled, cfg, n_classes, seed, epoch):
    """One pre-training epoch. labeled: (x_lab int8 (n_L, M) labeled rows on the device
    the epoch runs on, y_lab (n_L,) int64); unlabeled: (the unlabeled rows' loader, pseudo:
    None or (label (n_U,), weight (n_U,)) tensors over the loader's positions, -1 = no
    pseudo-label); cfg: the :class:`cmix.learn.config.Config` (its ``pretrain`` and
    ``contrastive`` sections). Returns mean losses."""
    import torch

    (x_lab, y_lab), (u_loader, pseudo) = labeled, unlabeled
    device = x_lab.device
    gen, rng = streams.gen(seed, streams.PRETRAIN_STEPS, epoch)
    model.train()
    n_l = len(x_lab)
    lab_order = torch.from_numpy(rng.permutation(n_l)).to(device)
    lab_ptr = 0
    sums = {"loss": 0.0, "contrastive": 0.0, "reconstruction": 0.0}
    n_steps = 0
    if len(u_loader):
        batches = u_loader.batches(seed_seq=streams.seed_seq(seed, streams.PRETRAIN_BATCHES,
                                                             epoch), drop_last=False)
    else:
        n_steps_labeled = max(1, -(-n_l // cfg.pretrain.labeled_batch_size))
        batches = ((None, None) for _ in range(n_steps_labeled))
    take = labeled_rows_per_step(n_l, -(-len(u_loader) // cfg.pretrain.batch_size), n_classes,
                                 cfg.pretrain)
    for pos, xu in batches:
        if lab_ptr + take > n_l:
            lab_order = torch.from_numpy(rng.permutation(n_l)).to(device)
            lab_ptr = 0
        li = lab_order[lab_ptr:lab_ptr + take]
        lab_ptr += take
        xl, yl = x_lab[li], y_lab[li]
        wl = torch.ones(len(li), device=device)
        if xu is None:
            x, labels, weights = xl, yl, wl
        else:
            xu = xu.to(device, non_blocking=True)
            if pseudo is not None:
                pidx = torch.as_tensor(pos, device=device)
                yu, wu = pseudo[0][pidx], pseudo[1][pidx] * cfg.contrastive.gamma
                yu = torch.where(wu > 0, yu, torch.full_like(yu, -1))
            else:
                yu = torch.full((len(xu),), -1, dtype=torch.long, device=device)
                wu = torch.zeros(len(xu), device=device)
            x = torch.cat([xl, xu])
            labels, weights = torch.cat([yl, yu]), torch.cat([wl, wu])
        labels = torch.where(weights > 0, labels, torch.full_like(labels, -1))
        loss, con, recon = contrastive_mixup_loss(model, x, labels, weights, cfg.contrastive,
                                                  gen, n_classes, device)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sums["loss"] += float(loss.detach())
        sums["contrastive"] += float(con.detach())
        sums["reconstruction"] += float(recon.detach())
        n_steps += 1
    return {k: v / max(n_steps, 1) for k, v in sums.items()}


def labeled_rows_per_step(n_labeled: int, n_steps: int, n_classes: int, pretrain) -> int:
    """Labeled rows in each pre-training step: labeled_batch_size, but at most what
    shows each labeled row ``labeled_passes`` times an epoch over ``n_steps`` steps (and
    at least 2 per class, so the contrastive term has positives). Drawing the whole
    labeled set at every step of a pass over the unlabeled rows shows each labeled row
    hundreds of times an epoch and lets the encoder memorise D_L. 0 = no cap. pretrain:
    the config's ``pretrain`` section."""
    take = min(pretrain.labeled_batch_size, n_labeled)
    if pretrain.labeled_passes > 0 and n_steps > 0:
        cap = int(np.ceil(pretrain.labeled_passes * n_labeled / n_steps))
        take = min(take, max(cap, 2 * n_classes))
    return max(1, min(take, n_labeled))


def node_latent(model, x_lab, su_loader, device) -> np.ndarray:
    """Latent rows (n_L + n_SU, H) float32 of the labeled rows then the S_U rows."""
    import torch

    model.eval()
    with torch.no_grad(), _amp(device):
        z_l = torch.cat([model.encode(x_lab[s:s + 4096]).float()
                         for s in range(0, len(x_lab), 4096)])
    return torch.cat([z_l, embed_rows(model, su_loader, device)]).cpu().numpy()


# ------------------------------------------------------------------ predictor
def predictor_epoch(head, opt, inputs, targets, weights, cfg, seed, epoch):
    """One epoch of the predictor: inputs (N, ...) on the device the epoch runs on, targets
    (N, C) soft, weights (N,); cfg: the :class:`cmix.learn.config.Config`
    (``pred_batch_size``, ``predictor_mixup``). Latent mixup (lambda ~ U(0, 1), partner =
    a random row of the batch) when ``predictor_mixup``, each parent's target weighted by
    lambda times its own certainty (:func:`losses.mixup_cross_entropy`). Returns the mean
    loss."""
    import torch

    from .losses import mixup_cross_entropy, soft_cross_entropy

    device = inputs.device
    gen, rng = streams.gen(seed, streams.PREDICTOR_STEPS, epoch)
    streams.seed_dropout(seed, streams.PREDICTOR_STEPS, epoch, cfg.predictor.pred_dropout)
    head.train()
    n = len(inputs)
    order = torch.from_numpy(rng.permutation(n)).to(device)
    bs = cfg.predictor.pred_batch_size
    total, steps = 0.0, 0
    for s in range(0, n, bs):
        idx = order[s:s + bs]
        if len(idx) < 2:          # BatchNorm needs 2 rows
            continue
        with _amp(device):
            f = head.features(inputs[idx])
        t, w = targets[idx], weights[idx]
        if cfg.switches.predictor_mixup:
            lam = torch.rand(len(idx), generator=gen).to(device)
            perm = torch.from_numpy(rng.permutation(len(idx))).to(device)
            lf = lam.view(-1, 1).to(f.dtype)
            f = lf * f + (1 - lf) * f[perm]
            with _amp(device):
                logits = head.predictor(f).float()
            loss = mixup_cross_entropy(logits, t, t[perm], w, w[perm], lam)
        else:
            with _amp(device):
                logits = head.predictor(f).float()
            loss = soft_cross_entropy(logits, t, w)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        total += float(loss.detach())
        steps += 1
    return total / max(steps, 1)


# ------------------------------------------------------------------ the stages
def pseudo_label_rows(ctx) -> np.ndarray:
    """S_U: positions (sorted) into the unlabeled rows that get pseudo-labels, at most
    lp_max_unlabeled of them, drawn with the run's seed."""
    _, rng = streams.gen(ctx.seed, streams.PSEUDO_LABEL_ROWS)
    n_u = len(ctx.splits.unlabeled)
    return np.sort(rng.permutation(n_u)[:ctx.cfg.pseudo_labels.lp_max_unlabeled])


def _loader(ctx, rows, batch_size):
    from .data import RowLoader, choose_mode

    mode = choose_mode(len(ctx.splits.unlabeled), ctx.n_snps, ctx.cfg.data.loader,
                       int(ctx.cfg.data.memory_limit_mb) << 20)
    return RowLoader(ctx.root, rows, batch_size=batch_size, mode=mode, device=ctx.dev,
                     buffer_chunks=ctx.cfg.data.buffer_chunks)


def judge_fold(ctx, y_lab: np.ndarray) -> np.ndarray:
    """(n_L,) bool: the judge fold of the training labeled rows (classes y_lab (n_L,)),
    ``lp_judge_fraction`` of them drawn with the run's seed
    (:func:`cmix.learn.labelprop.judge_rows`)."""
    from .labelprop import judge_rows

    _, rng = streams.gen(ctx.seed, streams.PSEUDO_LABEL_JUDGE)
    return judge_rows(y_lab, ctx.cfg.pseudo_labels.lp_judge_fraction, rng)


def pretrain_stage(ctx, model, labeled, su_pos, judge=None, stage="pretrain") -> None:
    """Contrastive mixup pre-training as checkpoint stage ``stage``. labeled: (x_lab int8
    (n_L, M), y_lab (n_L,) int64) tensors of the training labeled rows. judge: None
    (pre-training without pseudo-labels, every labeled row in the label-aware terms) or
    (n_L,) bool, the judge fold (:func:`judge_fold`): those rows' labels stay out of
    pre-training, and label propagation, judged on them, runs after ``warmup_epochs``
    epochs, then every ``lp_every`` epochs and after the last (pseudo-labels in the run's
    checkpoint parts). Pseudo-labels are used only if every look uses them: the first
    look that does not ends the stage, and the run is then pre-trained again as
    cmix_selfsl (:func:`pretrain_without_pseudo_labels`). With a shared-encoder folder
    the stage is taken from it when another run made the same one, and left there
    otherwise (:func:`cmix.learn.harness.take_shared_stage`)."""
    import torch

    cfg, s, lp = ctx.cfg, ctx.splits, ctx.cfg.pseudo_labels
    x_lab, y_lab = labeled
    seen = x_lab, y_lab
    if judge is not None:
        keep = torch.from_numpy(np.flatnonzero(~judge)).to(x_lab.device)
        seen = x_lab[keep], y_lab[keep]
    opt = torch.optim.Adam(model.parameters(), lr=cfg.pretrain.lr,
                           weight_decay=cfg.pretrain.weight_decay)
    loaders = {}

    def epoch_fn(epoch):
        if not loaders:
            loaders["u"] = _loader(ctx, s.unlabeled, cfg.pretrain.batch_size)
            loaders["su"] = _loader(ctx, s.unlabeled[su_pos], 4096)
        pseudo = ctx.parts.get("pseudo") if judge is not None else None
        pseudo_t = (_pseudo_tensors(pseudo, su_pos, len(s.unlabeled), ctx.dev)
                    if pseudo is not None else None)
        rec = pretrain_epoch(model, opt, seen, (loaders["u"], pseudo_t), cfg,
                             s.n_classes, ctx.seed, epoch)
        done = epoch + 1
        due = judge is not None and len(su_pos) > 0 and (
            (done >= lp.warmup_epochs and (done - lp.warmup_epochs) % lp.lp_every == 0)
            or done == cfg.pretrain.epochs)
        if due:
            if "pcs_neighbours" not in loaders:     # fixed inputs: searched once
                from .labelprop import knn_neighbours

                t0 = time.perf_counter()
                pcs = input_pcs(ctx, x_lab, su_pos)
                loaders["pcs_neighbours"] = None if pcs is None else knn_neighbours(
                    pcs, max(graph_ks(lp)), lp.lp_block)
                ctx.add_time("label_propagation", t0)
            info = pseudo_label_step(ctx, model, (x_lab, y_lab, judge), loaders["su"],
                                     su_pos, done, loaders["pcs_neighbours"])
            rec.update(pseudo_label_accuracy=info["accuracy"],
                       pseudo_label_coverage=info["coverage"])
            if not info["used"] and done < cfg.pretrain.epochs:
                # refused: no later look is taken, the run is cmix_selfsl's
                log(f"pseudo-labels refused at epoch {done}: the judged pre-training stops "
                    "here")
                rec["end_stage"] = True
        return rec

    taken = ctx.take_shared(stage, judge is not None)
    ctx.epochs(stage, cfg.pretrain.epochs, {"model": model, "opt": opt}, epoch_fn,
               "pre-training")
    if not taken:
        ctx.share(stage, judge is not None)


def pseudo_labels_weigh(ctx) -> bool:
    """Whether some pseudo-label in the run's checkpoint parts carries weight."""
    pseudo = ctx.parts.get("pseudo")
    return pseudo is not None and bool(((pseudo["label"] >= 0) & (pseudo["weight"] > 0)).any())


def pretrain_without_pseudo_labels(ctx, new_model, labeled, su_pos):
    """The encoder pre-trained as cmix_selfsl's is (a fresh model from new_model(), every
    training labeled row in the label-aware terms, no pseudo-labels), as checkpoint stage
    "pretrain_all" after the judged stage. Used when the judged pseudo-labels end with no
    weight, so that the run is then exactly cmix_selfsl's and the judge fold's labels are
    not lost to the encoder. Returns the model."""
    state = ctx.state
    if state.stage == "pretrain":
        state.stage, state.epoch = "pretrain_all", 0
    log("pseudo-labels carry no weight after the judged pre-training: pre-training again "
        "with every labeled row and no pseudo-labels (the run is then cmix_selfsl's)")
    model = new_model()
    pretrain_stage(ctx, model, labeled, su_pos, None, stage="pretrain_all")
    return model


def graph_ks(lp) -> tuple:
    """The kNN graph's k tried by the judge: lp_k and 10."""
    return tuple(sorted({lp.lp_k, 10}))


def pseudo_label_step(ctx, model, labeled, su_loader, su_pos, epoch,
                      pcs_neighbours=None) -> dict:
    """Label propagation judged on the judge fold of the labeled rows
    (:func:`cmix.learn.labelprop.judged_label_propagation`). labeled: (x_lab, y_lab, judge
    (n_L,) bool). The graph is built in the current latent or in the input PCs (their
    neighbours ``pcs_neighbours``, :func:`cmix.learn.labelprop.knn_neighbours` of the
    (n_L + n_SU, p) PCs, or None), with k from :func:`graph_ks` and propagation's alpha
    from {lp_alpha, 0.9}, whichever gives the judge rows the most accurate pseudo-labels
    when only the other labeled rows seed it;
    the pseudo-labels carry weight only where they are shown to be right more often than
    the supervised head on the latent can be on the judge rows. Stores the pseudo-labels
    and weights of the S_U rows in the run's checkpoint parts ("pseudo") and a summary in
    parts["lp_info"]. Only training labeled rows are used: validation rows are not nodes."""
    from .labelprop import candidate_name, judged_label_propagation

    s, lp, parts = ctx.splits, ctx.cfg.pseudo_labels, ctx.parts
    t0 = time.perf_counter()
    x_lab, y_lab, judge = labeled
    n_l = len(x_lab)
    y_l = y_lab.cpu().numpy()
    z = node_latent(model, x_lab, su_loader, ctx.dev)
    spaces = {"latent": z} if pcs_neighbours is None else {"latent": z, "pcs": pcs_neighbours}
    res = judged_label_propagation(spaces, y_l, judge, s.n_classes, z[:n_l], lp,
                                   ks=graph_ks(lp),
                                   alphas=tuple(dict.fromkeys((lp.lp_alpha, 0.9))))
    parts["pseudo"] = {"label": res.label[n_l:], "weight": res.weight[n_l:].astype(np.float32)}
    info = _pseudo_stats(parts["pseudo"], s.label[s.unlabeled[su_pos]])
    info.update(epoch=epoch, missing_classes=[s.class_names[c] for c in res.missing_classes],
                graph=candidate_name(res.space, res.k, res.alpha),
                heldout_accuracy=res.heldout_accuracy,
                head_accuracy=res.head_accuracy, head_bound=round(res.head_bound, 4),
                used=res.used, n_judge=int(judge.sum()),
                heldout={k: round(v, 4) for k, v in res.heldout.items()},
                mean_weight=float(res.weight[n_l:].mean()) if len(su_pos) else 0.0,
                seconds=round(time.perf_counter() - t0, 3))
    if info["n_judge"] == 0:     # lp_judge_fraction 0: nothing can show them better
        log(f"pseudo-labels (epoch {epoch}): no judge rows (lp_judge_fraction "
            f"{ctx.cfg.pseudo_labels.lp_judge_fraction}): not used (weight 0)")
    else:
        log(f"pseudo-labels (epoch {epoch}): graph {info['graph']}, accuracy on the "
            f"{info['n_judge']} judge rows {res.heldout_accuracy:.3f} vs the head's "
            f"{res.head_accuracy:.3f} (upper bound {res.head_bound:.3f}): "
            + (f"used, mean weight {info['mean_weight']:.3f}" if res.used else
               "not used (weight 0)"))
    if res.missing_classes:
        log(f"label propagation: no labeled row of class(es) {info['missing_classes']}; "
            "they get no pseudo-labels")
    parts.setdefault("lp_info", []).append(info)
    ctx.add_time("label_propagation", t0)
    return info


def input_pcs(ctx, x_lab, su_pos) -> np.ndarray | None:
    """(n_L + n_SU, p) principal components of the standardised dosages of the labeled
    rows then the S_U rows (fitted on those rows; p = lp_pcs), or None when lp_pcs is 0."""
    from .data import standardised_pcs

    n_pcs = ctx.cfg.pseudo_labels.lp_pcs
    if not n_pcs:
        return None
    x = np.concatenate([x_lab.cpu().numpy(), ctx.rows(ctx.splits.unlabeled[su_pos]).cpu().numpy()])
    return standardised_pcs(x, ctx.mean, ctx.sd, n_pcs, ctx.seed)[0]


def trainer_inputs(ctx, model):
    """rows -> the predictor's inputs: frozen latent rows after pre-training, else the
    int8 dosages (the MLP embeds them itself); the covariates beside them, if any."""
    from .data import RowLoader

    def inputs(rows):
        if not ctx.cfg.switches.pretrain:
            return ctx.with_cov(ctx.rows(rows), rows)
        loader = RowLoader(ctx.root, rows, batch_size=4096, mode="memory", device=ctx.dev)
        return ctx.with_cov(embed_rows(model, loader, ctx.dev), rows)
    return inputs


def predictor_stage(ctx, inputs_of, su_pos, new_head):
    """The predictor on the labeled rows and the certainty-weighted pseudo-labeled rows
    (latent mixup per the config, and only when some pseudo-label carries weight: with
    none, the predictor is trained exactly as cmix_selfsl's), early-stopped and refitted
    by the run's ``early_stopped`` loop (:func:`cmix.learn.harness.fit_head`).
    new_head(all_labeled=False) -> (head, optimiser), the same start at every call
    (:meth:`cmix.learn.methods.networks.NetworkMethod.new_head`)."""
    import torch

    cfg, s, dev = ctx.cfg, ctx.splits, ctx.dev
    eye = np.eye(s.n_classes, dtype=np.float32)
    rows, ys, ws = [s.train_labeled], [s.label[s.train_labeled]], \
        [np.ones(len(s.train_labeled), np.float32)]
    pseudo = ctx.parts.get("pseudo")
    keep = np.zeros(0, dtype=bool)
    if cfg.switches.pseudo_labels and pseudo is not None:
        keep = (pseudo["label"] >= 0) & (pseudo["weight"] > 0)
        rows.append(s.unlabeled[su_pos][keep])
        ys.append(pseudo["label"][keep])
        ws.append(pseudo["weight"][keep])
    if cfg.switches.predictor_mixup and not keep.any():
        # no pseudo-label earned weight: the predictor is trained as cmix_selfsl's is
        cfg = cfg.with_keys(predictor_mixup=False)
    rows = np.concatenate(rows)
    order = np.argsort(rows, kind="stable")
    inputs = inputs_of(rows[order])[torch.from_numpy(np.argsort(order)).to(dev)]
    train = (inputs, torch.from_numpy(eye[np.concatenate(ys)]).to(dev),
             torch.from_numpy(np.concatenate(ws).astype(np.float32)).to(dev))
    val = (inputs_of(s.validation), s.label[s.validation])

    def epoch_fn(head, opt, x, t, w, epoch):
        return predictor_epoch(head, opt, x, t, w, cfg, ctx.seed, epoch)

    return ctx.early_stopped(new_head, epoch_fn, train, val)


def check_frozen(model, before: dict) -> None:
    """Raise CmixError if any tensor of ``model`` differs from ``before`` (a copy of its
    state taken before the predictor stage): the encoder must stay frozen."""
    import torch

    moved = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    if moved:
        raise CmixError(f"the pre-trained encoder changed during the predictor stage "
                        f"({len(moved)} tensors, e.g. {moved[0]}); this is a bug in cmix")


def _pseudo_tensors(pseudo: dict, su_pos: np.ndarray, n_unlabeled: int, device):
    """Pseudo-label / weight tensors over all unlabeled positions (-1 / 0 outside S_U)."""
    import torch

    label = np.full(n_unlabeled, -1, dtype=np.int64)
    weight = np.zeros(n_unlabeled, dtype=np.float32)
    label[su_pos] = pseudo["label"]
    weight[su_pos] = pseudo["weight"]
    return torch.from_numpy(label).to(device), torch.from_numpy(weight).to(device)


def _pseudo_stats(pseudo: dict, truth: np.ndarray) -> dict:
    """Accuracy of the pseudo-labels on the rows they cover, and the share covered."""
    covered = pseudo["label"] >= 0
    acc = float(np.mean(pseudo["label"][covered] == truth[covered])) if covered.any() else None
    return {"accuracy": acc, "coverage": float(np.mean(covered)) if len(covered) else 0.0,
            "n_rows": int(len(covered))}
