"""Contrastive Mixup (Darabi et al. 2021) whole: the method class (``method``), the losses
and mixing (``losses``), pre-training (``pretrain``), the paper's pseudo-labels
(``pseudo_labels``, over label propagation: ``labelprop``), the judge between pre-training
with them and without (``judge``) and the predictor stage (``predictor``). The heads and
probes it shares with the other network methods are :mod:`cmix.learn.methods.heads` and
:mod:`cmix.learn.methods.probes`. This ``__init__`` re-exports nothing.
"""
