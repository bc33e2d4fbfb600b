"""The random streams of a run, all named here.

Every draw of a run comes from the run's ``seed`` and one key below, so a resumed run
repeats what an uninterrupted one draws, and two stages never share a stream. Keys of
:func:`gen`, :func:`seed_seq` (numpy ``SeedSequence([seed, key, ...])``; per-epoch
streams add the epoch) and :class:`Draws` (the draws inside a training step, on the
device; keyed by the epoch and step):
"""

from __future__ import annotations

import numpy as np

SPLITS = 0x5EED                 # labeled / validation rows: default_rng([seed, SPLITS]) (make_splits)
PRETRAIN_STEPS = 1              # per epoch and step: cmix pre-training's labeled rows, layers,
                                # lambdas, partners
PRETRAIN_BATCHES = 2            # per epoch: cmix pre-training's unlabeled batch order
PREDICTOR_STEPS = 3             # per epoch and step: predictor batch order, latent mixup,
                                # dropout masks
PSEUDO_LABEL_ROWS = 4           # S_U, the unlabeled rows that get pseudo-labels
PSEUDO_LABEL_JUDGE = 5          # the judge fold of the labeled rows (kept from pre-training's labels)
PCA_ROWS = 6                    # training rows the pca_logreg / label_spreading PCA is fit on
SPREADING_ROWS = 7              # unlabeled nodes of label spreading
AE_BATCHES = 11                 # per epoch: autoencoder batch order
VIME_CORRUPTION = 21            # per epoch: VIME's masks in self-supervised training
VIME_BATCHES = 22               # per epoch: VIME self-supervised batch order
VIME_SEMI_STEPS = 23            # per epoch and step: VIME predictor batch order, corruptions,
                                # dropout masks
VIME_UNLABELED_BATCHES = 24     # per epoch: VIME's unlabeled batch order
MANIFOLD_MIXUP_STEPS = 31       # per epoch (and step): manifold mixup's order, layers, lambdas,
                                # dropout masks
MODEL_WEIGHTS = 51              # a network's initial weights: SeedSequence([seed, MODEL_WEIGHTS, part])
JUDGE_FOLD_MODELS = 61          # the streams of a run's fold models (fold_seed): [seed, key, fold]

# the parts of MODEL_WEIGHTS, one generator each (cmix.learn.nn.init_generators)
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
    import torch  # torch: ~1.5 s to import; only where a network or tensor is used

    ss = np.random.SeedSequence(seed_seq(seed, key, *more))
    return torch.Generator().manual_seed(_torch_seed(ss)), np.random.default_rng(ss)


def _torch_seed(ss) -> int:
    """A torch seed (63 bits) drawn from the SeedSequence ``ss``."""
    return int(ss.generate_state(1, dtype=np.uint64)[0] >> 1)


def fold_seed(seed: int, fold: int) -> int:
    """The seed of fold model ``fold`` of a run (a cross-fitted judge): every stream and
    initial weight of that model comes from it as a run's from its seed."""
    return int(np.random.SeedSequence(seed_seq(seed, JUDGE_FOLD_MODELS, fold))
               .generate_state(1)[0])


def weight_generator(seed: int, part: int):
    """A torch CPU generator of the initial weights of one part of a run's network
    (stream MODEL_WEIGHTS): each part of each seed its own stream."""
    import torch  # torch: ~1.5 s to import; only where a network or tensor is used

    return torch.Generator().manual_seed(_torch_seed(np.random.SeedSequence(
        seed_seq(seed, MODEL_WEIGHTS, part))))


# ------------------------------------------------------------------ draws on the device
# The draws inside a training step (batch orders, mixup layers, lambdas and partners,
# dropout masks, VIME's corruptions) come from a counter-based generator evaluated on the
# device: each value is a hash of (the model's key, the stream, the epoch, the step, the
# call within the step, the element's index). A group of models thus draws every model's
# values in one operation, a model draws the same values in any group and on any device
# (integer arithmetic is exact), nothing is copied to or from the host, and a resumed
# epoch repeats its draws without any generator state to save. The hash runs in int32
# arithmetic, whose products wrap modulo 2^32 in torch on the CPU and on CUDA (checked
# against Python's integers in tests/test_data.py).

_M32 = 0xFFFFFFFF


def _mix32_int(x: int) -> int:
    """The 32-bit finaliser below, on a Python int (for the host-side counters)."""
    x &= _M32
    x ^= x >> 16
    x = (x * 0x7FEB352D) & _M32
    x ^= x >> 15
    x = (x * 0x846CA68B) & _M32
    return x ^ (x >> 16)


def _signed32(c: int) -> int:
    """The signed 32-bit number with the bits of c (0 <= c < 2^32)."""
    return c - (1 << 32) if c >= 1 << 31 else c


def _mix32(x):
    """A 32-bit integer finaliser (a bijection with full avalanche: Wellons' lowbias32) of
    an int32 tensor (its bits read as unsigned: shifts are logical, products wrap)."""
    x = x ^ ((x >> 16) & 0xFFFF)
    x = x * _signed32(0x7FEB352D)
    x = x ^ ((x >> 15) & 0x1FFFF)
    x = x * _signed32(0x846CA68B)
    return x ^ ((x >> 16) & 0xFFFF)


def model_keys(seeds, key: int, device="cpu"):
    """int32 (G,) keys of stream ``key`` for the models of ``seeds`` (one per model, the
    bits of a 32-bit value), from SeedSequence([seed, key]) as :func:`gen`'s streams."""
    import torch  # torch: ~1.5 s to import; only where a network or tensor is used

    vals = [_signed32(int(np.random.SeedSequence(seed_seq(s, key)).generate_state(1)[0]))
            for s in seeds]
    return torch.tensor(vals, dtype=torch.int32, device=device)


class Draws:
    """The draws of one step of a group of models: ``keys`` (G,) from :func:`model_keys`,
    ``counters`` (epoch, step, ...) host ints. Each call gives fresh values (the call's
    position in the step is part of the hash), shape (G, *shape), the same for a model
    whatever the group around it and the device."""

    def __init__(self, keys, *counters: int):
        self.keys = keys
        h = 0x9E3779B9
        for c in counters:
            h = _mix32_int(h ^ _mix32_int(int(c) + 0x632BE5AB))
        self.base = h
        self.calls = 0

    def _raw(self, shape):
        """int32 (G, *shape) uniform 32-bit values: the finaliser of a Weyl sequence
        (element index times the golden ratio) started at a point drawn from the model's
        key and the call's counters."""
        import torch  # torch: ~1.5 s to import; only where a network or tensor is used

        self.calls += 1
        salt = _signed32(_mix32_int(self.base ^ _mix32_int(self.calls * 0x85EBCA6B)))
        n = int(np.prod(shape)) if shape else 1
        weyl = torch.arange(n, device=self.keys.device, dtype=torch.int32) \
            * _signed32(0x9E3779B9)
        start = _mix32(self.keys[:, None] ^ salt)                   # (G, 1)
        return _mix32(start + weyl[None, :]).view(len(self.keys), *shape)

    def bits(self, *shape: int):
        """int64 (G, *shape) uniform 32-bit values in [0, 2^32) (sort keys)."""
        import torch  # torch: ~1.5 s to import; only where a network or tensor is used

        return self._raw(shape).to(torch.int64) & _M32

    def uniform(self, *shape: int, dtype=None):
        """Float (G, *shape) uniform on [0, 1), 24 random bits each."""
        import torch  # torch: ~1.5 s to import; only where a network or tensor is used

        raw = self._raw(shape)
        return ((raw >> 8) & 0xFFFFFF).to(dtype or torch.float32) * (1.0 / (1 << 24))
