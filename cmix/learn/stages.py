"""The stages of a run, named once: a run's checkpoint (:class:`cmix.learn.checkpoints.RunState`)
says which it is at, and each record of its train_log.jsonl which it belongs to.

start -> pretrain (ae, vime, cmix and the ablations with pre-training) -> pretrain_all
(cmix's second arm, :mod:`cmix.learn.methods.cmix.judge`) -> predictor (the
early-stopped head) -> refit (the head refitted on training + validation rows) -> fitted
(the method's state dict checkpointed) -> done (test metrics written). The names are in
checkpoints on disk: they never change.
"""

START, PRETRAIN, PRETRAIN_ALL, PREDICTOR, REFIT, FITTED, DONE = (
    "start", "pretrain", "pretrain_all", "predictor", "refit", "fitted", "done")
#: every stage, in the order a run passes through them
STAGES = (START, PRETRAIN, PRETRAIN_ALL, PREDICTOR, REFIT, FITTED, DONE)
