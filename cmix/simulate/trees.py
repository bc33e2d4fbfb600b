"""Tree sequences of a stdpopsim HomSap demographic model (msprime), and the sites and
haplotypes a coalescent cohort takes from them.

msprime and stdpopsim are the optional ``sim`` extra (``pip install 'cmix[sim]'``): they
are imported on use, in :func:`_stdpopsim`, so the rest of cmix runs without them."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from ..errors import CmixError
from .pedigree import GeneticMap


PIECE_START_BP = 20_000_000      # every piece starts 20 Mb into its chromosome


def _stdpopsim():
    try:
        import stdpopsim   # optional (the sim extra): only coalescent cohorts use it
    except ImportError:
        raise CmixError("--haplotypes coalescent needs msprime and stdpopsim: "
                        "pip install 'cmix[sim]'") from None
    return stdpopsim


def get_model(model_id: str):
    """The stdpopsim HomSap demographic model ``model_id``; CmixError listing the usable
    ids (those with a population sampled at the present day) if it is unknown or has
    none."""
    species = _stdpopsim().get_species("HomSap")
    usable = [m.id for m in species.demographic_models if model_populations(m)]
    if model_id not in usable:
        ancient = model_id in [m.id for m in species.demographic_models]
        raise CmixError(f"--model {model_id!r}: "
                        + ("no population of this model is sampled at the present day, as "
                           "a cohort's people are" if ancient else
                           "not a HomSap demographic model of stdpopsim")
                        + f"; usable models: {', '.join(usable)}")
    return species.get_demographic_model(model_id)


def model_populations(model) -> list[str]:
    """Names of the model's populations that can be sampled at time 0, in model order."""
    return [p.name for p in model.populations
            if getattr(p, "allow_samples", True) and getattr(p, "default_sampling_time", 0) in (0, None)]


def _msprime_seed(ss: np.random.SeedSequence) -> int:
    return int(ss.generate_state(1)[0] % (2**31 - 2)) + 1


def simulate_trees(model_id: str, samples: dict[str, int], n_pieces: int, piece_mb: float,
                   seed: int) -> list[tuple[int, object, float]]:
    """One tree sequence per contig piece: [(chromosome, tskit.TreeSequence, recombination
    rate per bp per generation)]. samples: diploids per model population. Piece c covers
    chromosome c from :data:`PIECE_START_BP` for ``piece_mb`` Mb; same arguments, same trees.
    """
    stdpopsim = _stdpopsim()
    model = get_model(model_id)
    species = stdpopsim.get_species("HomSap")
    engine = stdpopsim.get_engine("msprime")
    if not 1 <= n_pieces <= 22:
        raise CmixError(f"--n-chrom (contig pieces) must be between 1 and 22, got {n_pieces}")
    if not 0.01 <= piece_mb <= 20:
        raise CmixError(f"--piece-mb must be between 0.01 and 20, got {piece_mb}")
    seeds = np.random.SeedSequence([seed, 0xC0A1]).spawn(n_pieces)
    out = []
    for c in range(n_pieces):
        left = PIECE_START_BP
        right = left + int(round(piece_mb * 1e6))
        contig = species.get_contig(f"chr{c + 1}", left=left, right=right,
                                    mutation_rate=model.mutation_rate)
        with warnings.catch_warnings():
            # stdpopsim warns that a contig without a genetic map uses the mean rate: intended
            warnings.simplefilter("ignore", UserWarning)
            ts = engine.simulate(model, contig, dict(samples), seed=_msprime_seed(seeds[c]))
        out.append((c + 1, ts, float(contig.recombination_map.mean_rate)))
    return out


def _individual_nodes(ts) -> tuple[np.ndarray, np.ndarray]:
    """(n_individuals, 2) sample node ids of each sampled diploid and its population id."""
    nodes = np.asarray(ts.individuals_nodes, dtype=np.int64)
    return nodes, ts.tables.nodes.population[nodes[:, 0]]


def select_sites(rng, ts, n_keep: int, maf_floor: float) -> np.ndarray | None:
    """``n_keep`` sites drawn uniformly at random among the biallelic ones (one mutation)
    with MAF > ``maf_floor`` over all sample haplotypes, in position order; None if fewer.

    Candidates are visited in a random order and the first ``n_keep`` eligible ones kept
    (a uniform random subset of the eligible sites); their derived-allele counts are the
    number of samples under the mutation's node in the tree at the site, computed in
    batches sorted by position so the tree only moves forward.
    """
    n = ts.num_samples
    sites = ts.tables.sites
    muts = ts.tables.mutations
    n_mut = np.bincount(muts.site, minlength=ts.num_sites)
    single = np.flatnonzero(n_mut == 1)
    mut_of_site = np.full(ts.num_sites, -1)
    mut_of_site[muts.site] = np.arange(ts.num_mutations)
    order = single[rng.permutation(len(single))]
    positions = sites.position
    mut_node = muts.node
    chosen, start, batch = [], 0, max(4 * n_keep, 256)
    while len(chosen) < n_keep and start < len(order):
        cand = order[start:start + batch]
        start += len(cand)
        count = np.empty(len(cand), dtype=np.int64)
        by_pos = np.argsort(cand)
        tree = ts.first()
        for j in by_pos:
            site = cand[j]
            tree.seek(positions[site])
            count[j] = tree.num_samples(mut_node[mut_of_site[site]])
        maf = np.minimum(count, n - count) / n
        chosen.extend(cand[maf > maf_floor][: n_keep - len(chosen)])
        batch *= 2
    if len(chosen) < n_keep:
        return None
    return np.sort(np.array(chosen, dtype=np.int64))


def sample_sites(rng, trees, n_variants: int, maf_floor: float, piece_mb: float,
                 mutation_rate: float, seed: int):
    """Draw an equal share of ``n_variants`` sites from each piece (:func:`select_sites`)
    and read their alleles for every sampled haplotype.

    trees: :func:`simulate_trees`'s list. Returns (hap bool (n_variants, 2 x
    n_individuals), columns individual 0 haplotype 0, individual 0 haplotype 1, ...;
    variants: the .bim columns with random rsIDs plus ``piece``; their GeneticMap;
    ind_pop (n_individuals,) each individual's population id; the per-piece truth
    records).
    """
    n_pieces = len(trees)
    per_piece = np.full(n_pieces, n_variants // n_pieces)
    per_piece[: n_variants % n_pieces] += 1
    haps, piece_rows, pieces_truth = [], [], []
    ind_nodes, ind_pop = _individual_nodes(trees[0][1])
    for k, ((chrom, ts, rate), n_keep) in enumerate(zip(trees, per_piece)):
        sites = select_sites(rng, ts, int(n_keep), maf_floor)
        if sites is None:
            raise CmixError(f"chromosome {chrom} piece: fewer than the {n_keep} biallelic sites "
                            f"with MAF > {maf_floor} needed; raise --piece-mb or --n-chrom, or "
                            f"lower --n-variants")
        nodes_k, pop_k = _individual_nodes(ts)
        if not (np.array_equal(nodes_k, ind_nodes) and np.array_equal(pop_k, ind_pop)):
            raise RuntimeError("msprime sampled individuals differently across pieces")
        hap_k, pos, der, anc = _piece_genotypes(ts, sites, ind_nodes)
        haps.append(hap_k)
        piece_rows.append(pd.DataFrame({"chrom": str(chrom), "pos": pos + 1, "a1": der, "a2": anc,
                                        "cm": (pos + 1) * rate * 100, "piece": k}))
        pieces_truth.append({"chrom": chrom, "left_bp": PIECE_START_BP,
                             "right_bp": PIECE_START_BP + int(round(piece_mb * 1e6)),
                             "recombination_rate": rate, "mutation_rate": mutation_rate,
                             "n_sites": int(ts.num_sites),
                             "n_kept": int(n_keep), "msprime_seed_from": [seed, 0xC0A1, k]})
    hap = np.concatenate(haps)                       # (n_variants, 2 x n_individuals)
    variants = pd.concat(piece_rows, ignore_index=True)
    rs = rng.permutation(max(10 * n_variants, 1000))[:n_variants] + 10_000
    variants.insert(1, "variant_id", [f"rs{r}" for r in rs])
    gmap = GeneticMap(variants.pos.to_numpy(), variants.piece.to_numpy(),
                      [(PIECE_START_BP, PIECE_START_BP + piece_mb * 1e6)] * n_pieces,
                      [t[2] for t in trees])
    return hap, variants, gmap, ind_pop, pieces_truth


def _piece_genotypes(ts, sites: np.ndarray, ind_nodes: np.ndarray):
    """The kept ``sites`` of one tree sequence: bool (n_sites, 2 x n_individuals), derived
    allele = True, columns in ``ind_nodes`` order (n_individuals, 2); the sites' 0-based
    positions int64 (n_sites,), derived and ancestral alleles (lists of n_sites)."""
    drop = np.setdiff1d(np.arange(ts.num_sites), sites)
    sub = ts.delete_sites(drop)
    g = sub.genotype_matrix()                    # (n_keep, n_sample_nodes), derived = 1
    col = np.full(ts.num_nodes, -1)
    col[sub.samples()] = np.arange(sub.num_samples)
    hap = g[:, col[ind_nodes.ravel()]].astype(bool)   # columns: ind0 h0, ind0 h1, ...
    anc = [s.ancestral_state for s in sub.sites()]
    der = [s.mutations[0].derived_state for s in sub.sites()]
    pos = sub.tables.sites.position.astype(np.int64)
    return hap, pos, der, anc
