"""Learning on a per-trait store: splits and loaders, the Contrastive Mixup model and its
losses, the baselines, the run harness (config, run context, checkpoints, seed workers,
shared encoders, metrics) and predictions for new people. The genotype side is reached
only through :mod:`cmix.store` (and, for predictions,
:mod:`cmix.readers.sources`)."""
