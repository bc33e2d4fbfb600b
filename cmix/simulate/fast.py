"""LD-free genotypes for benchmark-sized cohorts (50,000 x 200,000 and up): a compiled
kernel writes the packed .bed bytes directly (:func:`simulate_genotypes_fast`)."""

from __future__ import annotations

from pathlib import Path

import numba
import numpy as np
import pandas as pd

from ..errors import CmixError
from ..logs import log, progress
from ..outputs import staged_folder
from ..readers import plink
from .variants import simulate_variants


def _fast_kernel():
    @numba.njit(parallel=True, cache=True, nogil=True)
    def fill(seed, v0, p_a1, miss, n_samples, out):
        n_bytes = out.shape[1]
        for j in numba.prange(out.shape[0]):
            state = np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(v0 + j + 1)
            p = p_a1[j]
            t_miss = miss
            t_hom1 = miss + (1 - miss) * p * p
            t_het = t_hom1 + (1 - miss) * 2 * p * (1 - p)
            for b in range(n_bytes):
                byte = 0
                for k in range(4):
                    i = b * 4 + k
                    if i >= n_samples:
                        break
                    # splitmix64
                    state += np.uint64(0x9E3779B97F4A7C15)
                    x = state
                    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
                    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
                    x = x ^ (x >> np.uint64(31))
                    u = (x >> np.uint64(11)) * (1.0 / 9007199254740992.0)
                    if u < t_miss:
                        code = 1
                    elif u < t_hom1:
                        code = 0
                    elif u < t_het:
                        code = 2
                    else:
                        code = 3
                    byte |= code << (2 * k)
                out[j, b] = byte

    return fill


def simulate_genotypes_fast(out_dir, n_samples: int, n_variants: int, seed: int = 1,
                            missing_rate: float = 0.002, block_size: int = 4096) -> Path:
    """LD-free genotypes for benchmarks: writes ``out_dir/genotypes.bed/.bim/.fam``.

    Frequencies follow the same spectrum as :func:`simulate_cohort`; calls are missing
    at ``missing_rate``. A compiled kernel writes packed bytes directly (about
    1e9 genotypes per second on 2 cores). Returns the prefix. The files are written as
    :func:`simulate_cohort`'s are (:func:`cmix.outputs.staged_folder`).
    """
    if n_samples < 1 or n_variants < 1:
        raise CmixError("--n-samples and --n-variants must be positive")
    rng = np.random.default_rng(seed)
    variants = simulate_variants(rng, n_variants, int(np.clip(n_variants // 200, 1, 22)))
    p_a1 = variants.p_a1.to_numpy()
    bim = variants[plink.BIM_COLUMNS]
    ids = (np.arange(n_samples) + 1_000_001).astype(str)
    fam = pd.DataFrame({"fid": ids, "iid": ids, "father": "0", "mother": "0",
                        "sex": rng.choice(["1", "2"], size=n_samples), "phenotype": "-9"})
    fill = _fast_kernel()
    with staged_folder(out_dir) as out:       # a failure leaves out_dir as it was
        with plink.BedWriter(out / "genotypes", fam, bim) as writer:
            buf = np.empty((block_size, (n_samples + 3) // 4), dtype=np.uint8)
            for v0, v1 in progress(list(plink.variant_blocks(n_variants, block_size)),
                                   desc="simulate --fast", unit="block"):
                fill(seed, v0, p_a1[v0:v1], missing_rate, n_samples, buf[: v1 - v0])
                writer.write_packed(buf[: v1 - v0])
    prefix = Path(out_dir) / "genotypes"
    log(f"wrote {prefix}.bed ({n_samples} samples x {n_variants} variants, no LD)")
    return prefix
