"""The networks of Contrastive Mixup: SNP embedding, encoder, decoder, projection head,
predictor. Shapes: B = batch rows, M = SNPs (columns), H = hidden width.

Input rows are int8 dosages (B, M): 0/1/2 copies of the effect allele, -1 missing.
"""

from __future__ import annotations

import torch
from torch import nn


def categorical_width(n_levels: int) -> int:
    """Embedding width of a categorical column with n_levels levels (METHOD.md):
    min(600, round(1.6 * n_levels ** 0.56)); 3 for a SNP's 4 levels."""
    return int(min(600, round(1.6 * n_levels ** 0.56)))


class SnpEmbedding(nn.Module):
    """Rows (B, M) int8 -> embedded rows (B, M * width).

    encoding "categorical": levels 0, 1, 2, missing -> a learned vector of width 3 per
    SNP (one table of M * 4 vectors). encoding "dosage": one standardised continuous
    column per SNP (mean/sd of the training rows, missing -> the mean, i.e. 0).
    """

    N_LEVELS = 4

    def __init__(self, n_snps: int, encoding: str = "categorical", mean=None, sd=None):
        super().__init__()
        self.n_snps = n_snps
        self.encoding = encoding
        if encoding == "categorical":
            self.width = categorical_width(self.N_LEVELS)
            self.table = nn.Embedding(n_snps * self.N_LEVELS, self.width)
            nn.init.normal_(self.table.weight, std=1.0 / self.width ** 0.5)
            self.register_buffer("offset", torch.arange(n_snps) * self.N_LEVELS,
                                 persistent=False)
        elif encoding == "dosage":
            self.width = 1
            mean = torch.zeros(n_snps) if mean is None else torch.as_tensor(mean)
            sd = torch.ones(n_snps) if sd is None else torch.as_tensor(sd)
            self.register_buffer("mean", mean.float())
            self.register_buffer("sd", sd.float())
        else:
            raise ValueError(f"encoding must be categorical or dosage, not {encoding!r}")
        self.out_dim = n_snps * self.width

    def levels(self, x: torch.Tensor) -> torch.Tensor:
        """(B, M) int64 level of each call: 0, 1, 2, or 3 = missing (or out of range)."""
        x = x.long()
        return torch.where((x < 0) | (x > 2), torch.full_like(x, 3), x)

    def standardised(self, x: torch.Tensor) -> torch.Tensor:
        """(B, M) float: (dosage - mean) / sd, missing -> 0."""
        xf = x.float()
        return torch.where(x < 0, torch.zeros_like(xf), (xf - self.mean) / self.sd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.encoding == "categorical":
            return self.table(self.levels(x) + self.offset).flatten(1)
        return self.standardised(x)


class WithCovariates(nn.Module):
    """``features`` of the dosage columns, with the covariates beside them.

    Input (B, n_snps + K) float: dosages (as :class:`SnpEmbedding` takes them, -1
    missing) then K standardised covariates. Output (B, features.out_dim + K).
    """

    def __init__(self, features: nn.Module, n_snps: int, n_covariates: int):
        super().__init__()
        self.features, self.n_snps = features, n_snps
        self.out_dim = features.out_dim + n_covariates

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.features(inputs[:, :self.n_snps]),
                          inputs[:, self.n_snps:].float()], 1)


class BatchNorm1d(nn.BatchNorm1d):
    """nn.BatchNorm1d whose training-mode statistics on CPU do not depend on the number of
    torch threads. Input (B, C) float.

    torch's CPU kernel sums each channel over the batch in per-thread partial sums, so the
    mean and variance (and with them every later step) change in the last bits when the
    thread count changes. Here the batch mean and biased variance are column means
    (``x.mean(0)``), which torch splits among threads by column: each column is summed by
    one thread in the same order whatever the thread count. The running statistics are
    updated as torch does (momentum, or the cumulative average when momentum is None;
    unbiased variance). Evaluation mode (no batch reduction) and GPU tensors (no CPU
    threads) use torch's kernel. Parameters and buffers are those of nn.BatchNorm1d.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or x.device.type != "cpu" or x.dim() != 2:
            return super().forward(x)
        n = x.shape[0]
        if n < 2:
            raise ValueError(f"Expected more than 1 value per channel when training, got "
                             f"input size {tuple(x.shape)}")
        mean = x.mean(0)
        centred = x - mean
        var = (centred * centred).mean(0)                     # biased: for normalising
        if self.track_running_stats:
            with torch.no_grad():
                self.num_batches_tracked.add_(1)
                f = (1.0 / float(self.num_batches_tracked) if self.momentum is None
                     else self.momentum)
                self.running_mean.mul_(1 - f).add_(mean, alpha=f)
                self.running_var.mul_(1 - f).add_(var * (n / (n - 1)), alpha=f)
        y = centred * torch.rsqrt(var + self.eps)
        if self.affine:
            y = y * self.weight + self.bias
        return y


def mlp_layers(dims: list[int], batchnorm: bool, last_act: bool = True) -> list[nn.Module]:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(dims) - 2 or last_act:
            if batchnorm:
                layers.append(BatchNorm1d(b))
            layers.append(nn.ReLU())
    return layers


class Encoder(nn.Module):
    """T blocks Linear + (BatchNorm) + ReLU; run in pieces for mixup at layer t.

    ``forward_to(e, t)`` runs blocks 0..t-1 on embedded rows e (B, D) (t = 0 returns e);
    ``forward_from(h, t)`` runs blocks t..T-1; the output is (B, H).
    """

    def __init__(self, in_dim: int, hidden: int, n_layers: int = 1, batchnorm: bool = False):
        super().__init__()
        dims = [in_dim] + [hidden] * n_layers
        self.blocks = nn.ModuleList(nn.Sequential(*mlp_layers([a, b], batchnorm))
                                    for a, b in zip(dims[:-1], dims[1:]))
        self.n_layers = n_layers
        self.out_dim = hidden

    def forward_to(self, h: torch.Tensor, t: int) -> torch.Tensor:
        for block in self.blocks[:t]:
            h = block(h)
        return h

    def forward_from(self, h: torch.Tensor, t: int) -> torch.Tensor:
        for block in self.blocks[t:]:
            h = block(h)
        return h

    def forward(self, e: torch.Tensor) -> torch.Tensor:
        return self.forward_from(e, 0)


class Decoder(nn.Module):
    """The encoder mirrored: (B, H) -> categorical logits (B, M, 4) or continuous (B, M)."""

    def __init__(self, hidden: int, n_snps: int, encoding: str, n_layers: int = 1,
                 batchnorm: bool = False):
        super().__init__()
        self.encoding = encoding
        self.n_snps = n_snps
        body = mlp_layers([hidden] * n_layers, batchnorm) if n_layers > 1 else []
        self.body = nn.Sequential(*body)
        n_out = n_snps * SnpEmbedding.N_LEVELS if encoding == "categorical" else n_snps
        self.head = nn.Linear(hidden, n_out)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        out = self.head(self.body(z))
        if self.encoding == "categorical":
            return out.view(len(z), self.n_snps, SnpEmbedding.N_LEVELS)
        return out


class ProjectionHead(nn.Module):
    """L_proj fully connected layers H -> d_proj; the output is L2-normalised."""

    def __init__(self, hidden: int, d_proj: int = 128, n_layers: int = 2):
        super().__init__()
        dims = [hidden] * n_layers + [d_proj]
        self.net = nn.Sequential(*mlp_layers(dims, batchnorm=False, last_act=False))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return nn.functional.normalize(self.net(z), dim=1)


class Predictor(nn.Module):
    """(FC-BN-ReLU) x 2 with hidden width 100 (dropout after each ReLU when ``dropout`` >
    0), then a linear layer to the class logits.

    With ``n_covariates`` = K > 0 the last K input columns are covariates, and a linear
    term of them is added to the logits: covariates enter as fixed effects (as in a
    regression) besides reaching the network, so a few informative covariates are not
    lost among many genotype features.
    """

    def __init__(self, in_dim: int, n_classes: int, hidden: int = 100, n_covariates: int = 0,
                 dropout: float = 0.0):
        super().__init__()
        layers = mlp_layers([in_dim, hidden, hidden], batchnorm=True)
        if dropout > 0:           # after each ReLU; none at 0, so the layout stays as it was
            layers = [m for layer in layers for m in
                      ([layer, nn.Dropout(dropout)] if isinstance(layer, nn.ReLU) else [layer])]
        self.net = nn.Sequential(*layers, nn.Linear(hidden, n_classes))
        self.n_covariates = n_covariates
        self.skip = nn.Linear(n_covariates, n_classes) if n_covariates else None

    def covariate_logits(self, z: torch.Tensor):
        """The linear covariate term (B, C) of inputs z (B, in_dim), or 0 without."""
        return self.skip(z[:, -self.n_covariates:]) if self.skip is not None else 0.0

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(z) + self.covariate_logits(z)


class ContrastiveMixup(nn.Module):
    """Embedding + encoder + decoder + projection head (the pre-trained part), shaped by
    ``model`` (the config's ``model`` section); mean, sd (M,): the dosage moments of the
    ``dosage`` encoding."""

    def __init__(self, n_snps: int, model, mean=None, sd=None):
        super().__init__()
        self.embed = SnpEmbedding(n_snps, model.encoding, mean, sd)
        hidden = model.hidden or self.embed.out_dim
        self.encoder = Encoder(self.embed.out_dim, hidden, model.n_layers, model.batchnorm)
        self.decoder = Decoder(hidden, n_snps, model.encoding, model.n_layers, model.batchnorm)
        self.proj = ProjectionHead(hidden, model.d_proj, model.proj_layers)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """(B, M) int8 -> latent (B, H)."""
        return self.encoder(self.embed(x))


def autocast(device):
    """bfloat16 autocast on CUDA; nothing on CPU."""
    import contextlib

    if torch.device(device).type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


class Head:
    """What a predictor stage trains and what predicts: ``features`` (a module applied to
    the inputs: identity on frozen latent rows, or a trainable SNP embedding, with the
    covariates beside it, on the dosages) and ``predictor``."""

    def __init__(self, features, predictor):
        self.features = features
        self.predictor = predictor

    def modules(self):
        return [self.features, self.predictor]

    def parameters(self):
        return [p for m in self.modules() for p in m.parameters() if p.requires_grad]

    def train(self, on=True):
        for m in self.modules():
            m.train(on)

    def logits(self, inputs: torch.Tensor) -> torch.Tensor:
        """float32 (B, C) class logits of inputs (B, D)."""
        with autocast(inputs.device):
            return self.predictor(self.features(inputs)).float()

    def proba(self, inputs: torch.Tensor, batch: int = 4096):
        """Softmax of :meth:`logits` over ``inputs`` (n, D) in batches, eval mode: float32
        numpy (n, C)."""
        import numpy as np

        self.train(False)
        with torch.no_grad():
            out = [torch.softmax(self.logits(inputs[s:s + batch]), 1)
                   for s in range(0, len(inputs), batch)]
        return torch.cat(out).cpu().numpy() if out else np.zeros((0, 0))

    def state_dict(self):
        return {"features": self.features.state_dict(), "predictor": self.predictor.state_dict()}

    def load_state_dict(self, state):
        self.features.load_state_dict(state["features"])
        self.predictor.load_state_dict(state["predictor"])


def build_head(n_snps: int, n_classes: int, n_cov: int, cfg, seed: int, *,
               latent_dim: int | None = None, moments=(None, None), device="cpu") -> Head:
    """The one head of every network method (cfg: the :class:`cmix.learn.config.Config`).
    latent_dim None: a fresh SNP embedding of the int8 dosages (the ``encoding`` of
    cfg.model, ``moments`` = (mean (M,), sd (M,)) of the dosages), the covariates beside
    it; else identity features on latent rows of width latent_dim with the K = n_cov
    covariates beside them. Then :class:`Predictor` (cfg.predictor's pred_hidden and
    pred_dropout), a covariate term when n_cov > 0. The embedding and the predictor draw
    their weights from torch's global generator seeded by the run's ``seed`` and their streams
    (:mod:`cmix.learn.streams`)."""
    from .streams import HEAD_FEATURES, HEAD_PREDICTOR, manual_seed

    manual_seed(seed, HEAD_FEATURES)
    if latent_dim is None:
        features = SnpEmbedding(n_snps, cfg.model.encoding, *moments).to(device)
        if n_cov:
            features = WithCovariates(features, n_snps, n_cov)
        in_dim = features.out_dim
    else:
        features, in_dim = nn.Identity(), latent_dim + n_cov
    manual_seed(seed, HEAD_PREDICTOR)
    return Head(features, Predictor(in_dim, n_classes, cfg.predictor.pred_hidden, n_cov,
                                    cfg.predictor.pred_dropout).to(device))
