"""The random streams of a run, all named here.

Every draw of a run comes from the run's ``seed`` and one key below, so a resumed run
repeats what an uninterrupted one draws, and two stages never share a stream. Keys of
:func:`gen` and :func:`seed_seq` (numpy ``SeedSequence([seed, key, ...])``; per-epoch
streams add the epoch):
"""

from __future__ import annotations

import numpy as np

SPLITS = 0x5EED                 # labeled / validation rows: default_rng([seed, SPLITS]) (make_splits)
PRETRAIN_STEPS = 1              # per epoch: cmix pre-training's layers, lambdas, partners
PRETRAIN_BATCHES = 2            # per epoch: cmix pre-training's unlabeled batch order
PREDICTOR_STEPS = 3             # per epoch: predictor batch order and latent mixup
PSEUDO_LABEL_ROWS = 4           # S_U, the unlabeled rows that get pseudo-labels
PSEUDO_LABEL_JUDGE = 5          # the judge fold of the labeled rows (kept from pre-training's labels)
PCA_ROWS = 6                    # training rows the pca_logreg / label_spreading PCA is fit on
SPREADING_ROWS = 7              # unlabeled nodes of label spreading
AE_BATCHES = 11                 # per epoch: autoencoder batch order
VIME_CORRUPTION = 21            # per epoch: VIME's masks in self-supervised training
VIME_BATCHES = 22               # per epoch: VIME self-supervised batch order
VIME_SEMI_STEPS = 23            # per epoch: VIME predictor batch order and corruptions
VIME_UNLABELED_BATCHES = 24     # per epoch: VIME's unlabeled batch order
MANIFOLD_MIXUP_STEPS = 31       # per epoch: manifold mixup's order, layers, lambdas
HEAD_DROPOUT = 41               # per stage and epoch: a head's dropout masks (seed_dropout)

# torch's global generator is seeded with the run's seed plus one of these offsets
# right before a module is built (its initial weights). Unlike the streams above, these
# overlap across seeds (seed s + HEAD_PREDICTOR is seed s + 2's MODEL_INIT): README,
# "Same seed, same result"
MODEL_INIT = 0                  # the cmix / ae / vime network
HEAD_FEATURES = 1               # a head's SNP embedding
HEAD_PREDICTOR = 2              # a head's predictor
VIME_MASK_ESTIMATOR = 5         # VIME's mask estimator

# scikit-learn's random_state is the run's seed itself: the logistic regressions' CV
# folds (cmix.learn.linear) as given, the randomized PCA (cmix.learn.data.standardised_pcs)
# and the trees' validation rows (gbdt) as its low 31 bits


def seed_seq(seed: int, key: int, *more: int) -> list:
    """The SeedSequence entropy [seed (32 bits), key, *more] of one stream."""
    return [int(seed) & 0xFFFFFFFF, int(key), *(int(m) for m in more)]


def gen(seed: int, key: int, *more: int):
    """A torch CPU generator and a numpy generator of stream ``key`` (and ``more``,
    e.g. the epoch) of the run's ``seed``."""
    import torch

    ss = np.random.SeedSequence(seed_seq(seed, key, *more))
    return torch.Generator().manual_seed(_torch_seed(ss)), np.random.default_rng(ss)


def _torch_seed(ss) -> int:
    """A torch seed (63 bits) drawn from the SeedSequence ``ss``."""
    return int(ss.generate_state(1, dtype=np.uint64)[0] >> 1)


def manual_seed(seed: int, offset: int) -> None:
    """Seed torch's global generator with the run's seed plus ``offset`` (above)."""
    import torch

    torch.manual_seed(int(seed) + offset)


def seed_dropout(seed: int, stage: int, epoch: int, dropout: float) -> None:
    """Seed torch's global generator, which nn.Dropout draws from, for one epoch of a head
    (``stage``: the epoch loop's stream key) when ``dropout`` > 0: a resumed epoch then
    draws the masks an uninterrupted run draws. Without dropout nothing draws from it,
    and it is left alone."""
    import torch

    if dropout > 0:
        torch.manual_seed(_torch_seed(np.random.SeedSequence(
            seed_seq(seed, HEAD_DROPOUT, stage, epoch))))
