"""KING-robust in tiles of sample blocks, for jobs spread over a cluster.

The kept samples (sorted .fam positions) are cut into blocks of ``block`` samples, the
last one smaller when ``block`` does not divide them. Tile (i, j), i <= j, holds the
pairs with one sample in block i and the other in block j (i < j), or both in block i
(i == j): every pair lies in exactly one tile. :func:`king_tile` computes one tile and
writes its pairs above the threshold; :func:`unrelated_from_tiles` gathers all tiles
and prunes exactly as the one-process run (:func:`unrelated_from_genotypes`).

An off-diagonal tile runs KING-robust on the union of its two blocks and keeps the
cross pairs, so it costs about twice its own pairs (``(2 block)^2 / 2`` against
``block^2``); its NaN-kinship count is that of the union, from which the gather takes
the two diagonal tiles' counts.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...atomic import atomic_outputs
from ...errors import CmixError
from ...logs import log
from .cutoff import DEFAULT_CUTOFF, REPORT_MIN_KINSHIP, check_cutoff
from .king import king_robust
from .unrelated import king_inputs, write_unrelated

PAIR_COLUMNS = ["idx1", "idx2", "nsnp", "hethet", "ibs0", "het1_hom2", "het2_hom1", "kinship"]
_META = ["block", "i", "j", "n_samples", "undefined", "variants_used", "variants_x_y_mt",
         "first_sample", "last_sample"]


def n_blocks(n_samples: int, block: int) -> int:
    """Blocks of ``block`` samples covering ``n_samples`` (the last may be smaller)."""
    if block < 2:
        raise CmixError(f"KING tiles: the block size must be at least 2 samples, not {block}")
    return -(-n_samples // block)


def tile_list(n_samples: int, block: int) -> list[tuple[int, int]]:
    """Every tile (i, j), i <= j, of ``n_samples`` in blocks of ``block``."""
    nb = n_blocks(n_samples, block)
    return [(i, j) for i in range(nb) for j in range(i, nb)]


def king_tile(genotypes, path, *, block: int, tile: tuple[int, int],
              cutoff: float = DEFAULT_CUTOFF, extract=None, keep=None,
              device: str = "auto") -> int:
    """Compute tile ``tile`` = (i, j) and write it to ``path`` (an .npz, atomically): its pairs with
    kinship > min(cutoff, 0.0442) as the columns of :data:`PAIR_COLUMNS` (.fam positions,
    int64 counts, float64 kinship) and the gather's checks (block size, sample count,
    NaN-kinship pairs of the samples computed). Returns the number of pairs written."""
    cutoff = check_cutoff(cutoff)
    i, j = tile
    bf, sample_idx, variant_idx, n_sex_mt, _ = king_inputs(genotypes, extract=extract, keep=keep)
    nb = n_blocks(len(sample_idx), block)
    if not (0 <= i <= j < nb):
        raise CmixError(f"KING tile ({i}, {j}): {len(sample_idx)} samples in blocks of {block} "
                        f"give tiles (i, j) with 0 <= i <= j < {nb}")
    rows_i = sample_idx[i * block:(i + 1) * block]
    rows_j = sample_idx[j * block:(j + 1) * block]
    subset = rows_i if i == j else np.concatenate([rows_i, rows_j])
    pairs = king_robust(bf, variant_idx, subset, min_kinship=min(cutoff, REPORT_MIN_KINSHIP),
                        device=device)
    if i != j:                          # idx1 is the later sample: in block j
        cross = np.isin(pairs["idx1"].to_numpy(), rows_j) & np.isin(pairs["idx2"].to_numpy(),
                                                                     rows_i)
        pairs = pairs[cross].reset_index(drop=True)
    meta = dict(block=block, i=i, j=j, n_samples=len(sample_idx),
                undefined=pairs.attrs["undefined_kinship_pairs"],
                variants_used=len(variant_idx), variants_x_y_mt=n_sex_mt,
                first_sample=int(sample_idx[0]), last_sample=int(sample_idx[-1]))
    with atomic_outputs(path) as (tmp,):
        with open(tmp, "wb") as fh:    # a file handle: np.savez would append .npz to a name
            np.savez(fh, cutoff=np.float64(cutoff),
                     **{c: pairs[c].to_numpy() for c in PAIR_COLUMNS},
                     **{k: np.int64(v) for k, v in meta.items()})
    log(f"king-tile: tile ({i}, {j}) of {nb} blocks of {block} samples: {len(pairs)} pairs")
    return len(pairs)


def _read_tile(path) -> tuple[dict, pd.DataFrame, float]:
    try:
        with np.load(path) as z:
            meta = {k: int(z[k]) for k in _META}
            pairs = pd.DataFrame({c: z[c] for c in PAIR_COLUMNS})
            cutoff = float(z["cutoff"])
    except (OSError, KeyError, ValueError) as exc:
        raise CmixError(f"{path}: not a KING tile written by cmix king-tile ({exc})") from None
    return meta, pairs, cutoff


def gather_tiles(paths) -> tuple[pd.DataFrame, dict]:
    """All tiles' pairs in the one-process run's .kin0 order (by the later sample, then
    the earlier) and (meta of the set, NaN-kinship pairs in all). Refuses a set whose
    tiles disagree (block size, samples, cutoff), miss a tile or repeat one."""
    if not paths:
        raise CmixError("--king-tiles: no tile files given")
    tiles = [(p, *_read_tile(p)) for p in paths]
    first_path, first, _, first_cut = tiles[0]
    same = ("block", "n_samples", "variants_used", "first_sample", "last_sample")
    seen: dict[tuple[int, int], str] = {}
    for path, meta, _, cut in tiles:
        if any(meta[k] != first[k] for k in same) or cut != first_cut:
            raise CmixError(f"{path}: tile from another run than {first_path} (block size, "
                            "samples, variants or cutoff differ)")
        key = (meta["i"], meta["j"])
        if key in seen:
            raise CmixError(f"{path}: tile {key} given twice (also {seen[key]})")
        seen[key] = str(path)
    missing = sorted(set(tile_list(first["n_samples"], first["block"])) - set(seen))
    if missing:
        raise CmixError(f"--king-tiles: {len(missing)} tiles missing, e.g. tile {missing[0]} "
                        f"of {first['n_samples']} samples in blocks of {first['block']}")
    diag = {m["i"]: m["undefined"] for _, m, _, _ in tiles if m["i"] == m["j"]}
    undefined = sum(m["undefined"] - (0 if m["i"] == m["j"] else diag[m["i"]] + diag[m["j"]])
                    for _, m, _, _ in tiles)
    pairs = pd.concat([t[2] for t in tiles], ignore_index=True)
    pairs = pairs.iloc[np.lexsort((pairs["idx2"].to_numpy(), pairs["idx1"].to_numpy()))]
    info = dict(first, undefined=undefined, cutoff=first_cut)
    return pairs.reset_index(drop=True), info


def unrelated_from_tiles(genotypes, paths, out, *, cutoff: float = DEFAULT_CUTOFF,
                         extract=None, keep=None) -> dict:
    """Gather tiles from :func:`king_tile` and write what :func:`unrelated_from_genotypes`
    writes (same pairs, same kept set); the cutoff must be the tiles' own."""
    cutoff = check_cutoff(cutoff)
    bf, sample_idx, variant_idx, n_sex_mt, _ = king_inputs(genotypes, extract=extract, keep=keep)
    pairs, info = gather_tiles(paths)
    if info["cutoff"] != cutoff:
        raise CmixError(f"--king-tiles: the tiles were computed for cutoff {info['cutoff']:g}, "
                        f"not {cutoff:g}")
    if (info["n_samples"], info["first_sample"], info["last_sample"], info["variants_used"]) != (
            len(sample_idx), int(sample_idx[0]), int(sample_idx[-1]), len(variant_idx)):
        raise CmixError("--king-tiles: the tiles were computed on other samples or variants "
                        "than --keep/--extract give")
    log(f"unrelated: gathered {len(paths)} KING tiles ({len(pairs)} pairs)")
    kin0 = pairs[pairs["kinship"].to_numpy() > REPORT_MIN_KINSHIP].reset_index(drop=True)
    extra = {"variants_used": len(variant_idx), "variants_x_y_mt_excluded": n_sex_mt,
             "undefined_kinship_pairs": info["undefined"]}
    return write_unrelated(out, bf.fam, sample_idx, pairs, cutoff, kin0=kin0, extra_summary=extra)
