"""The networks of Contrastive Mixup for a group of G models trained together: SNP
embedding, encoder, decoder, projection head, predictor.

Every parameter and buffer carries a leading model axis G, and every layer takes
(G, B, ...) inputs: one matrix product (``baddbmm``) serves all G models, so the work
dispatched per step does not grow with G. A model's own slice of the state dict
(:func:`model_state`) has the keys and shapes of a lone ``torch.nn`` model of the same
layout (``encoder.blocks.0.0.weight`` (H, D), ...). Shapes: G = models, B = batch rows,
M = SNPs (columns), H = hidden width, C = classes.

Input rows are dosages (B, M): int8 0/1/2 copies of the effect allele, -1 missing (float
expected copies for a fractional store). Rows that a model does not use in a step (the
padding of a group whose models hold different numbers of rows) are marked by a boolean
``mask`` (G, B): batch norm leaves them out of its statistics, and the losses weigh them 0.
Each model's initial weights are drawn from its own generator (:func:`init_generators`),
so a model starts the same in any group.
"""

from __future__ import annotations

import contextlib
import math

import torch
from torch import nn

from .streams import HEAD_FEATURES, HEAD_PREDICTOR, weight_generator


def categorical_width(n_levels: int) -> int:
    """Embedding width of a categorical column with n_levels levels (Darabi et al.):
    min(600, round(1.6 * n_levels ** 0.56)); 3 for a SNP's 4 levels."""
    return int(min(600, round(1.6 * n_levels ** 0.56)))


def init_generators(seeds, part: int) -> list:
    """One torch CPU generator per model: the initial weights of network part ``part`` of
    its run's seed (:func:`cmix.learn.streams.weight_generator`: its own stream, so no two
    seeds or parts share numbers). Weights are drawn on the CPU and moved to the device,
    so a model starts the same on every device."""
    return [weight_generator(int(s), int(part)) for s in seeds]


class GroupLinear(nn.Module):
    """G linear layers: weight (G, out, in), bias (G, out); (G, B, in) -> (G, B, out).
    Initialised as ``nn.Linear`` (uniform in +-1/sqrt(in)), each model from its own
    generator."""

    def __init__(self, gens: list, in_dim: int, out_dim: int):
        super().__init__()
        bound = 1.0 / math.sqrt(in_dim) if in_dim else 0.0
        w = torch.stack([torch.empty(out_dim, in_dim).uniform_(-bound, bound, generator=g)
                         for g in gens]) if in_dim else torch.zeros(len(gens), out_dim, 0)
        b = torch.stack([torch.empty(out_dim).uniform_(-bound, bound, generator=g)
                         for g in gens])
        self.weight = nn.Parameter(w)
        self.bias = nn.Parameter(b)

    def forward(self, x: torch.Tensor, mask=None) -> torch.Tensor:
        return torch.baddbmm(self.bias.unsqueeze(1).to(x.dtype), x,
                             self.weight.transpose(1, 2).to(x.dtype))


class GroupBatchNorm(nn.Module):
    """Batch norm of G models over the rows of (G, B, C) inputs that ``mask`` (G, B)
    marks (all rows without a mask), computed in float32. Training: the batch mean and
    biased variance normalise; the running statistics move as torch's (momentum 0.1,
    unbiased variance), only for models with 2 or more rows in the batch. Evaluation:
    the running statistics. The sums over rows run per model and column, in an order that
    depends neither on the number of threads nor on G."""

    def __init__(self, n_models: int, n_features: int, eps: float = 1e-5,
                 momentum: float = 0.1):
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.weight = nn.Parameter(torch.ones(n_models, n_features))
        self.bias = nn.Parameter(torch.zeros(n_models, n_features))
        self.register_buffer("running_mean", torch.zeros(n_models, n_features))
        self.register_buffer("running_var", torch.ones(n_models, n_features))
        self.register_buffer("num_batches_tracked", torch.zeros(n_models, dtype=torch.long))

    def forward(self, x: torch.Tensor, mask=None) -> torch.Tensor:
        x = x.float()
        if not self.training:
            y = (x - self.running_mean[:, None]) * torch.rsqrt(self.running_var[:, None]
                                                                + self.eps)
            return y * self.weight[:, None] + self.bias[:, None]
        if mask is None:
            m = torch.ones(x.shape[:2], device=x.device)
        else:
            m = mask.to(x.dtype)
        n = m.sum(1)                                                   # (G,)
        n_safe = n.clamp_min(1.0)[:, None]
        mean = (x * m[..., None]).sum(1) / n_safe                      # (G, C)
        centred = x - mean[:, None]
        var = (centred * centred * m[..., None]).sum(1) / n_safe       # biased
        with torch.no_grad():
            moves = n >= 2
            self.num_batches_tracked.add_(moves.long())
            f = self.momentum * moves.to(x.dtype)[:, None]
            unbiased = var * (n / (n - 1).clamp_min(1.0))[:, None]
            self.running_mean.mul_(1 - f).add_(f * mean)
            self.running_var.mul_(1 - f).add_(f * unbiased)
        y = centred * torch.rsqrt(var + self.eps)[:, None]
        return y * self.weight[:, None] + self.bias[:, None]


def apply_layer(layer: nn.Module, x, mask=None):
    """``layer(x)``, with the row mask for the layers that take one."""
    return layer(x, mask) if isinstance(layer, (GroupLinear, GroupBatchNorm, Dropout)) \
        else layer(x)


class Layers(nn.Sequential):
    """nn.Sequential that hands the row mask to the layers that take one."""

    def forward(self, x, mask=None):
        for layer in self:
            x = apply_layer(layer, x, mask)
        return x


class Dropout(nn.Module):
    """Dropout whose masks come from the step's :class:`cmix.learn.streams.Draws` (set
    on the module before a training forward, :func:`set_draws`), so that a model drops
    the same units in any group, on any device and after a resume."""

    def __init__(self, p: float):
        super().__init__()
        self.p = float(p)
        self.draws = None

    def forward(self, x, mask=None):
        if not self.training or self.p <= 0:
            return x
        if self.draws is None:
            raise RuntimeError("Dropout in training mode needs the step's draws (set_draws)")
        keep = self.draws.uniform(*x.shape[1:]) >= self.p
        return x * keep.to(x.dtype) / (1.0 - self.p)


def set_draws(module: nn.Module, draws) -> None:
    """Give every :class:`Dropout` of ``module`` the draws of the coming step."""
    for m in module.modules():
        if isinstance(m, Dropout):
            m.draws = draws


def mlp_layers(gens: list, dims: list[int], batchnorm: bool, last_act: bool = True) -> list:
    n = len(gens)
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
        layers.append(GroupLinear(gens, a, b))
        if i < len(dims) - 2 or last_act:
            if batchnorm:
                layers.append(GroupBatchNorm(n, b))
            layers.append(nn.ReLU())
    return layers


class _Table(nn.Module):
    """Holds an embedding table (G, rows, width) as ``weight`` (the key a lone
    nn.Embedding has)."""

    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.weight = nn.Parameter(weight)


class SnpEmbedding(nn.Module):
    """Rows (G, B, M) -> embedded rows (G, B, M * width).

    encoding "categorical": levels 0, 1, 2, missing -> a learned vector of width 3 per
    SNP (one table of M * 4 vectors per model, initialised N(0, 1/width)). encoding
    "dosage": one standardised continuous column per SNP (mean/sd (M,) of the training
    rows, missing -> the mean, i.e. 0).
    """

    N_LEVELS = 4

    def __init__(self, gens: list, n_snps: int, encoding: str = "categorical", mean=None,
                 sd=None):
        super().__init__()
        n = len(gens)
        self.n_snps, self.encoding = n_snps, encoding
        if encoding == "categorical":
            self.width = categorical_width(self.N_LEVELS)
            std = 1.0 / self.width ** 0.5
            self.table = _Table(torch.stack([
                torch.empty(n_snps * self.N_LEVELS, self.width).normal_(0.0, std, generator=g)
                for g in gens]))
            self.register_buffer("offset", torch.arange(n_snps) * self.N_LEVELS,
                                 persistent=False)
        elif encoding == "dosage":
            self.width = 1
            mean = torch.zeros(n_snps) if mean is None else torch.as_tensor(mean)
            sd = torch.ones(n_snps) if sd is None else torch.as_tensor(sd)
            self.register_buffer("mean", mean.float().expand(n, -1).clone())
            self.register_buffer("sd", sd.float().expand(n, -1).clone())
        else:
            raise ValueError(f"encoding must be categorical or dosage, not {encoding!r}")
        self.out_dim = n_snps * self.width

    @staticmethod
    def levels(x: torch.Tensor) -> torch.Tensor:
        """(..., M) int64 level of each call: 0, 1, 2, or 3 = missing (or out of range)."""
        x = x.long()
        return torch.where((x < 0) | (x > 2), torch.full_like(x, 3), x)

    def standardised(self, x: torch.Tensor) -> torch.Tensor:
        """(G, B, M) float: (dosage - mean) / sd, missing -> 0."""
        xf = x.float()
        return torch.where(x < 0, torch.zeros_like(xf),
                           (xf - self.mean[:, None]) / self.sd[:, None])

    def forward(self, x: torch.Tensor, mask=None) -> torch.Tensor:
        if self.encoding == "categorical":
            g, rows = self.table.weight.shape[:2]
            base = (torch.arange(g, device=x.device) * rows).view(g, 1, 1)
            idx = self.levels(x) + self.offset + base                    # (G, B, M)
            return nn.functional.embedding(idx, self.table.weight.view(g * rows, -1)) \
                .flatten(2)
        return self.standardised(x)


class WithCovariates(nn.Module):
    """``features`` of the dosage columns, with the covariates beside them.

    Input (G, B, n_snps + K) float: dosages (as :class:`SnpEmbedding` takes them, -1
    missing) then K standardised covariates. Output (G, B, features.out_dim + K).
    """

    def __init__(self, features: nn.Module, n_snps: int, n_covariates: int):
        super().__init__()
        self.features, self.n_snps = features, n_snps
        self.out_dim = features.out_dim + n_covariates

    def forward(self, inputs: torch.Tensor, mask=None) -> torch.Tensor:
        return torch.cat([self.features(inputs[..., :self.n_snps]),
                          inputs[..., self.n_snps:].float()], 2)


class Identity(nn.Module):
    """The features of a head on latent rows: the inputs as they are."""

    def forward(self, x, mask=None):
        return x


class Encoder(nn.Module):
    """T blocks Linear + (BatchNorm) + ReLU; (G, B, D) -> (G, B, H). ``blocks[l]`` is
    block l, so mixup at layer t mixes the output of blocks 0..t-1 (t = 0: the embedded
    rows)."""

    def __init__(self, gens: list, in_dim: int, hidden: int, n_layers: int = 1,
                 batchnorm: bool = False):
        super().__init__()
        dims = [in_dim] + [hidden] * n_layers
        self.blocks = nn.ModuleList(Layers(*mlp_layers(gens, [a, b], batchnorm))
                                    for a, b in zip(dims[:-1], dims[1:]))
        self.n_layers = n_layers
        self.out_dim = hidden

    def forward(self, e: torch.Tensor, mask=None) -> torch.Tensor:
        for block in self.blocks:
            e = block(e, mask)
        return e


class Decoder(nn.Module):
    """The encoder mirrored: (G, B, H) -> categorical logits (G, B, M, 4) or continuous
    (G, B, M)."""

    def __init__(self, gens: list, hidden: int, n_snps: int, encoding: str, n_layers: int = 1,
                 batchnorm: bool = False):
        super().__init__()
        self.encoding, self.n_snps = encoding, n_snps
        body = mlp_layers(gens, [hidden] * n_layers, batchnorm) if n_layers > 1 else []
        self.body = Layers(*body)
        n_out = n_snps * SnpEmbedding.N_LEVELS if encoding == "categorical" else n_snps
        self.head = GroupLinear(gens, hidden, n_out)

    def forward(self, z: torch.Tensor, mask=None) -> torch.Tensor:
        out = self.head(self.body(z, mask))
        if self.encoding == "categorical":
            return out.view(*z.shape[:2], self.n_snps, SnpEmbedding.N_LEVELS)
        return out


class ProjectionHead(nn.Module):
    """L_proj fully connected layers H -> d_proj; the output is L2-normalised."""

    def __init__(self, gens: list, hidden: int, d_proj: int = 128, n_layers: int = 2):
        super().__init__()
        dims = [hidden] * n_layers + [d_proj]
        self.net = Layers(*mlp_layers(gens, dims, batchnorm=False, last_act=False))

    def forward(self, z: torch.Tensor, mask=None) -> torch.Tensor:
        return nn.functional.normalize(self.net(z).float(), dim=-1)


class Predictor(nn.Module):
    """(FC-BN-ReLU) x 2 with hidden width 100 (dropout after each ReLU when ``dropout`` >
    0), then a linear layer to the class logits.

    With ``n_covariates`` = K > 0 the last K input columns are covariates, and a linear
    term of them is added to the logits: covariates enter as fixed effects (as in a
    regression) besides reaching the network, so a few informative covariates are not
    lost among many genotype features.
    """

    def __init__(self, gens: list, in_dim: int, n_classes: int, hidden: int = 100,
                 n_covariates: int = 0, dropout: float = 0.0):
        super().__init__()
        layers = mlp_layers(gens, [in_dim, hidden, hidden], batchnorm=True)
        if dropout > 0:           # after each ReLU; none at 0, so the layout stays as it was
            layers = [m for layer in layers for m in
                      ([layer, Dropout(dropout)] if isinstance(layer, nn.ReLU) else [layer])]
        self.net = Layers(*layers, GroupLinear(gens, hidden, n_classes))
        self.n_covariates = n_covariates
        self.skip = GroupLinear(gens, n_covariates, n_classes) if n_covariates else None

    def covariate_logits(self, z: torch.Tensor):
        """The linear covariate term (G, B, C) of inputs z (G, B, in_dim), or 0."""
        return self.skip(z[..., -self.n_covariates:]) if self.skip is not None else 0.0

    def forward(self, z: torch.Tensor, mask=None) -> torch.Tensor:
        return self.net(z, mask) + self.covariate_logits(z)


class ContrastiveMixup(nn.Module):
    """Embedding + encoder + decoder + projection head (the pre-trained part) of G models,
    shaped by ``model`` (the config's ``model`` section); gens: one generator per model
    (:func:`init_generators`); mean, sd (M,): the dosage moments of the ``dosage``
    encoding."""

    def __init__(self, gens: list, n_snps: int, model, mean=None, sd=None):
        super().__init__()
        self.n_models = len(gens)
        self.embed = SnpEmbedding(gens, n_snps, model.encoding, mean, sd)
        hidden = model.hidden or self.embed.out_dim
        self.encoder = Encoder(gens, self.embed.out_dim, hidden, model.n_layers, model.batchnorm)
        self.decoder = Decoder(gens, hidden, n_snps, model.encoding, model.n_layers,
                               model.batchnorm)
        self.proj = ProjectionHead(gens, hidden, model.d_proj, model.proj_layers)

    def encode(self, x: torch.Tensor, mask=None) -> torch.Tensor:
        """(G, B, M) dosages -> latent (G, B, H)."""
        return self.encoder(self.embed(x), mask)


def autocast(device):
    """bfloat16 autocast on CUDA; nothing on CPU."""
    if torch.device(device).type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


class Head(nn.Module):
    """What a predictor stage trains and what predicts: ``features`` (identity on frozen
    latent rows, or a trainable SNP embedding with the covariates beside it, on the
    dosages) and ``predictor``, for G models."""

    def __init__(self, features: nn.Module, predictor: Predictor):
        super().__init__()
        self.features = features
        self.predictor = predictor

    def logits(self, inputs: torch.Tensor, mask=None) -> torch.Tensor:
        """float32 (G, B, C) class logits of inputs (G, B, D)."""
        with autocast(inputs.device):
            return self.predictor(self.features(inputs, mask), mask).float()

    def proba(self, inputs: torch.Tensor, batch: int = 4096) -> torch.Tensor:
        """Softmax of :meth:`logits` over ``inputs`` (G, n, D) in batches of rows, eval
        mode: float32 (G, n, C) on the inputs' device."""
        self.train(False)
        with torch.no_grad():
            out = [torch.softmax(self.logits(inputs[:, s:s + batch]), -1)
                   for s in range(0, inputs.shape[1], batch)]
        if not out:
            return torch.zeros(inputs.shape[0], 0, self.n_classes, device=inputs.device)
        return torch.cat(out, 1)

    @property
    def n_classes(self) -> int:
        return int(self.predictor.net[-1].weight.shape[1])


def build_head(seeds, n_snps: int, n_classes: int, n_cov: int, cfg, *,
               latent_dim: int | None = None, moments=(None, None), device="cpu") -> Head:
    """The one head of every network method, for the models of ``seeds`` (cfg: the
    :class:`cmix.learn.config.Config`). latent_dim None: a fresh SNP embedding of the
    dosages (the ``encoding`` of cfg.model, ``moments`` = (mean (M,), sd (M,)) of the
    dosages), the covariates beside it; else identity features on latent rows of width
    latent_dim with the K = n_cov covariates beside them. Then :class:`Predictor`
    (cfg.predictor's pred_hidden and pred_dropout), a covariate term when n_cov > 0. The
    embedding and the predictor draw their weights from generators seeded by each run's
    seed and their streams (:mod:`cmix.learn.streams`)."""
    if latent_dim is None:
        features = SnpEmbedding(init_generators(seeds, HEAD_FEATURES), n_snps,
                                cfg.model.encoding, *moments)
        if n_cov:
            features = WithCovariates(features, n_snps, n_cov)
        in_dim = features.out_dim
    else:
        features, in_dim = Identity(), latent_dim + n_cov
    predictor = Predictor(init_generators(seeds, HEAD_PREDICTOR), in_dim, n_classes,
                          cfg.predictor.pred_hidden, n_cov, cfg.predictor.pred_dropout)
    return Head(features, predictor).to(device)


# ------------------------------------------------------------------ one model's slice
def model_state(module: nn.Module, i: int) -> dict:
    """Model i's state dict (CPU copies): every entry of ``module``'s state dict at index
    i of its model axis, with the keys and shapes of a lone model."""
    return {k: v[i].detach().cpu().clone() for k, v in module.state_dict().items()}


def load_model_state(module: nn.Module, i: int, state: dict) -> None:
    """Put a lone model's state dict (:func:`model_state`) at index i of ``module``."""
    with torch.no_grad():
        for k, v in module.state_dict().items():
            v[i].copy_(torch.as_tensor(state[k]))


def select_models(module: nn.Module, idx) -> None:
    """Keep only the models ``idx`` (a list of indices) of ``module``, in that order: every
    parameter and buffer is cut along its model axis (in place; optimiser state of the
    old parameters no longer applies)."""
    index = torch.as_tensor(list(idx), dtype=torch.long)
    for m in module.modules():
        for name, p in list(m._parameters.items()):
            if p is not None:
                m._parameters[name] = nn.Parameter(p.detach()[index.to(p.device)].clone(),
                                                   requires_grad=p.requires_grad)
        for name, b in list(m._buffers.items()):
            if b is not None and name not in m._non_persistent_buffers_set:
                m._buffers[name] = b[index.to(b.device)].clone()
    if hasattr(module, "n_models"):
        module.n_models = len(index)


def stacked_states(states: list) -> dict:
    """One state dict with a model axis from lone models' state dicts (same keys)."""
    return {k: torch.stack([torch.as_tensor(s[k]) for s in states]) for k in states[0]}


# ------------------------------------------------------------------ the optimiser
class GroupAdam:
    """Adam (torch.optim.Adam's update, L2 weight decay added to the gradient) over
    parameters with a model axis, where each model takes a step only when ``active``
    (G,) bool says so: an inactive model's parameters, moments and step count stay as they
    are, so a model that has no rows in a step, or has stopped, is not moved. The update
    is a fixed set of tensor operations per parameter, whatever G."""

    def __init__(self, params, n_models: int, lr: float, weight_decay: float = 0.0,
                 betas=(0.9, 0.999), eps: float = 1e-8):
        self.params = [p for p in params if p.requires_grad]
        self.lr, self.wd, (self.b1, self.b2), self.eps = lr, weight_decay, betas, eps
        dev = self.params[0].device if self.params else "cpu"
        self.step_count = torch.zeros(n_models, dtype=torch.float32, device=dev)
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self, active=None) -> None:
        g_models = len(self.step_count)
        act = (torch.ones(g_models, dtype=torch.bool, device=self.step_count.device)
               if active is None else active)
        self.step_count.add_(act.float())
        t = self.step_count.clamp_min(1.0)
        bc1 = 1 - self.b1 ** t                                             # (G,)
        bc2_sqrt = torch.sqrt(1 - self.b2 ** t)
        for p, m, v in zip(self.params, self.exp_avg, self.exp_avg_sq):
            if p.grad is None:
                continue
            shape = (g_models,) + (1,) * (p.dim() - 1)
            a = act.view(shape)
            grad = p.grad if not self.wd else p.grad + self.wd * p
            m.copy_(torch.where(a, torch.lerp(m, grad, 1 - self.b1), m))
            v.copy_(torch.where(a, v * self.b2 + (1 - self.b2) * grad * grad, v))
            denom = v.sqrt() / bc2_sqrt.view(shape) + self.eps
            p.copy_(torch.where(a, p - (self.lr / bc1).view(shape) * m / denom, p))

    def model_state(self, i: int) -> dict:
        """Model i's moments and step count (CPU copies)."""
        return {"step": float(self.step_count[i]),
                "exp_avg": [m[i].detach().cpu().clone() for m in self.exp_avg],
                "exp_avg_sq": [v[i].detach().cpu().clone() for v in self.exp_avg_sq]}

    def load_model_state(self, i: int, state: dict) -> None:
        with torch.no_grad():
            self.step_count[i] = float(state["step"])
            for m, s in zip(self.exp_avg, state["exp_avg"]):
                m[i].copy_(s)
            for v, s in zip(self.exp_avg_sq, state["exp_avg_sq"]):
                v[i].copy_(s)
