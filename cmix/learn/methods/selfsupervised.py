"""The self-supervised epochs of ae and vime over a group of G models: chunk-aware
batches of each model's rows (:func:`batch_schedule`) and one masked epoch
(:func:`masked_epoch`).
"""

from __future__ import annotations

import torch

from ..data import chunk_aware_order


def masked_epoch(src, sched, ok, active: list, opt, step_loss) -> list:
    """One self-supervised epoch of a group of G models over the batches of ``sched``
    (rows read by ``src``; ``ok`` (G, steps, B) which rows are real, ``active`` (G,) bool
    which models are still training): step_loss(s, x, m) gives the (G,) losses of step s's
    batch x with row mask m (G, B); every model with rows in the step takes an optimiser
    step. Returns each active model's {"loss": mean over its steps}, None for the others;
    the losses are read from the device once, at the end."""
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


def batch_schedule(group, rows, draws, batch_size: int):
    """One epoch's batches of each model's rows (a RowSet), in a chunk-aware shuffled
    order: (source positions (G, S, B) on the source's index device, row mask (G, S, B)
    on the device)."""
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
