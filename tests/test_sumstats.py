"""cmix.genotypes.sumstats and `cmix select`: harmonising, ranking, clumping.

References: an independent harmonisation written here row by row with exact decimal
p-values (Python's Decimal), plink1.9 --clump on the same inputs, the .bim itself.
"""

import gzip
import shutil
import subprocess
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest

from cmix.genotypes import plink
from cmix.genotypes import sumstats as S
from cmix.cli import main
from cmix.io import CmixError

needs_plink19 = pytest.mark.skipif(shutil.which("plink1.9") is None,
                                   reason="plink1.9 not installed")
COMPLEMENT = {"A": "T", "T": "A", "C": "G", "G": "C"}


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def ld_cohort(tmp_path_factory):
    """400 samples x 300 SNPs on 2 chromosomes, strong LD (copied neighbours), 3% missing.

    Returns (prefix, sumstats path, snplist path, keep path). The sumstats cover the
    awkward cases: swapped and complemented alleles, ambiguous SNPs, rows matched only
    by chrom:pos, SNPs absent, duplicates, NA rows, p = 0 and p below 1e-308.
    """
    d = tmp_path_factory.mktemp("ld")
    rng = np.random.default_rng(3)
    n, m = 400, 300
    base = rng.binomial(2, rng.uniform(0.1, 0.5, size=(m, 1)), size=(m, n)).astype(np.int8)
    g = base.copy()
    for j in range(1, m):
        if rng.random() < 0.8:
            mask = rng.random(n) < rng.uniform(0.05, 0.5)
            g[j] = np.where(mask, base[j], g[j - 1])
    g[rng.random((m, n)) < 0.03] = -1
    ids = [str(1000 + i) for i in range(n)]
    fam = pd.DataFrame({"fid": ids, "iid": ids, "father": "0", "mother": "0", "sex": "1",
                        "phenotype": "-9"})
    pairs = [("A", "G"), ("C", "T"), ("G", "A"), ("T", "C"), ("A", "C"), ("G", "T"),
             ("A", "T"), ("C", "G")]
    alleles = [pairs[i] for i in rng.choice(len(pairs), m, p=[.16] * 6 + [.02, .02])]
    bim = pd.DataFrame({"chrom": ["1"] * 150 + ["2"] * 150,
                        "variant_id": [f"rs{j}" for j in range(m)], "cm": 0.0,
                        "pos": np.r_[np.arange(150) * 10000 + 1000,
                                     np.arange(150) * 10000 + 5000],
                        "a1": [a for a, _ in alleles], "a2": [b for _, b in alleles]})
    prefix = d / "c"
    plink.write_bfile(prefix, g, fam, bim)

    rows = []
    for j in range(m):
        if j % 37 == 5:   # absent from the sumstats
            continue
        a1, a2 = alleles[j]
        ea, oa = (a1, a2) if rng.random() < 0.5 else (a2, a1)     # swapped half the time
        if j % 11 == 3 and {a1, a2} not in ({"A", "T"}, {"C", "G"}):
            ea, oa = COMPLEMENT[ea], COMPLEMENT[oa]                # other strand
        snp = f"rs{j}" if j % 13 != 7 else f"{bim.chrom[j]}:{bim.pos[j]}"  # chrom:pos match
        p = f"{10 ** -rng.uniform(0, 12):.2g}"                     # 2 digits: many ties
        rows.append([snp, bim.chrom[j], bim.pos[j], ea, oa, 0.3, 0.99,
                     f"{rng.normal(0, 0.1):.5f}", "0.01", p, p])
    rows[10][9] = rows[10][10] = "0"
    rows[20][9] = rows[20][10] = "1.2E-400"
    rows[30][9] = rows[30][10] = "3e-401"
    rows[40][10] = "NA"
    rows.append(list(rows[50]))                                   # duplicate line
    rows[-1][10] = "0.5"
    rows.append(["rs_not_here", "3", 12345, "A", "G", 0.3, 0.99, "0.1", "0.01", "1e-5",
                 "1e-5"])
    j = next(j for j in range(m) if {*alleles[j]} not in ({"A", "T"}, {"C", "G"}))
    rows.append([f"rs{j}", bim.chrom[j], bim.pos[j], alleles[j][0], COMPLEMENT[alleles[j][1]],
                 0.3, 0.99, "0.1", "0.01", "1e-5", "1e-5"])       # alleles match neither strand
    cols = ["SNP", "CHR", "BP", "ALLELE1", "ALLELE0", "A1FREQ", "INFO", "BETA", "SE",
            "P_BOLT_LMM_INF", "P_BOLT_LMM"]
    ss = d / "ss.txt.gz"
    with gzip.open(ss, "wt") as fh:
        fh.write("\t".join(cols) + "\n")
        for r in rows:
            fh.write("\t".join(str(x) for x in r) + "\n")
    snplist = d / "qc.snplist"
    qc = [f"rs{j}" for j in range(m) if j % 17 != 2]
    snplist.write_text("\n".join(qc) + "\n")
    keep = d / "keep.id"
    keep.write_text("#FID\tIID\n" + "".join(f"{i}\t{i}\n" for i in ids[::3] + ids[1::3]))
    return prefix, ss, snplist, keep


def reference_harmonise(ss_path, bim, qc, keep_ambiguous=False):
    """Independent harmonisation, one row at a time, p as exact Decimals."""
    by_id = {v: i for i, v in enumerate(bim.variant_id)}
    by_pos = {(str(c), int(p)): i for i, (c, p) in enumerate(zip(bim.chrom, bim.pos))}
    ss = pd.read_csv(ss_path, sep="\t", dtype=str, keep_default_na=False)
    best = {}
    for line, r in enumerate(ss.itertuples(index=False), start=2):
        if r.P_BOLT_LMM == "NA" or r.BETA == "NA":
            continue
        i = by_id.get(r.SNP, by_pos.get((r.CHR, int(r.BP))))
        if i is None:
            continue
        a1, a2 = bim.a1[i], bim.a2[i]
        ambiguous = {a1, a2} in ({"A", "T"}, {"C", "G"})
        ea, oa = r.ALLELE1, r.ALLELE0
        if {ea, oa} != {a1, a2}:
            if ambiguous or {COMPLEMENT[ea], COMPLEMENT[oa]} != {a1, a2}:
                continue
            ea, oa = COMPLEMENT[ea], COMPLEMENT[oa]
        if ambiguous and not keep_ambiguous:
            continue
        if bim.variant_id[i] not in qc:
            continue
        beta = float(r.BETA) * (1 if ea == a1 else -1)
        p = Decimal(r.P_BOLT_LMM)
        if i not in best or p < best[i][0]:
            best[i] = (p, beta, line)
    out = pd.DataFrame([(bim.variant_id[i], int(bim.chrom[i]), bim.pos[i], p, beta, i)
                        for i, (p, beta, _) in best.items()],
                       columns=["variant_id", "chrom", "pos", "p", "beta", "bim_index"])
    return out.sort_values(["p", "chrom", "pos"], kind="stable").reset_index(drop=True)


# ------------------------------------------------------------------------------ tests
def test_parse_log10_p_against_decimal():
    text = ["0.5", "1", "1e-10", "3.2E-308", "1.2E-400", "1.19E-400", "0", "7e-5", ".25",
            "NA", "0.125"]
    got = S.parse_log10_p(text)
    for t, v in zip(text, got):
        if t == "NA":
            assert np.isnan(v)
        elif t == "0":
            assert v == -np.inf
        else:
            assert v == pytest.approx(float(Decimal(t).log10()), abs=1e-12)
    order = np.argsort(got[[2, 3, 4, 5]])
    assert list(order) == [3, 2, 1, 0]   # 1.19e-400 < 1.2e-400 < 3.2e-308 < 1e-10
    with pytest.raises(CmixError, match="line 3, column P: expected a p-value"):
        S.parse_log10_p(["0.1", "abc"], column="P", lines=[2, 3])
    with pytest.raises(CmixError, match="above 1"):
        S.parse_log10_p(["1.5"])


@pytest.mark.parametrize("keep_ambiguous", [False, True])
def test_selection_is_top_k_of_independent_sort(ld_cohort, keep_ambiguous):
    prefix, ss, snplist, _ = ld_cohort
    bf = plink.open_bfile(prefix)
    qc = set(snplist.read_text().split())
    ref = reference_harmonise(ss, bf.bim, qc, keep_ambiguous)
    table, steps = S.harmonise(S.read_sumstats(ss), bf.bim, qc, keep_ambiguous)
    assert len(table) == len(ref)
    for top in (1, 25, 100, len(ref) + 5):
        sel = S.select_top(table, top)
        assert list(sel.variant_id) == list(ref.variant_id[:top])
        np.testing.assert_allclose(sel.beta, ref.beta[:top])
        assert list(sel.bim_index) == list(ref.bim_index[:top])
        # effect allele is the .bim A1, other the A2
        assert list(sel.effect_allele) == list(bf.bim.a1.iloc[sel.bim_index])
        assert list(sel.other_allele) == list(bf.bim.a2.iloc[sel.bim_index])
    assert steps.n_remaining.iloc[-1] == len(ref)
    assert steps.n_remaining.iloc[0] == len(pd.read_csv(ss, sep="\t"))
    if not keep_ambiguous:
        assert not any({a, b} in ({"A", "T"}, {"C", "G"})
                       for a, b in zip(table.effect_allele, table.other_allele))


def test_swapped_alleles_flip_beta(ld_cohort):
    prefix, ss, snplist, _ = ld_cohort
    bf = plink.open_bfile(prefix)
    raw = pd.read_csv(ss, sep="\t", dtype=str, keep_default_na=False).drop_duplicates("SNP").set_index("SNP")
    table, _ = S.harmonise(S.read_sumstats(ss), bf.bim)
    n_swapped = 0
    for r in table.itertuples():
        src = raw.loc[r.variant_id] if r.variant_id in raw.index else \
            raw.loc[f"{r.chrom}:{r.pos}"]
        ea = src.ALLELE1 if {src.ALLELE1, src.ALLELE0} == {r.effect_allele, r.other_allele} \
            else COMPLEMENT[src.ALLELE1]
        swapped = ea != r.effect_allele
        n_swapped += swapped
        assert r.beta == pytest.approx(-float(src.BETA) if swapped else float(src.BETA))
    assert n_swapped > 50


def test_chrom_pos_match_and_other_strand(ld_cohort):
    prefix, ss, _, _ = ld_cohort
    bf = plink.open_bfile(prefix)
    table, steps = S.harmonise(S.read_sumstats(ss), bf.bim, keep_ambiguous=True)
    ids = set(table.variant_id)
    # rows listed as chrom:pos (j % 13 == 7) matched to their .bim ID
    assert {"rs7", "rs20", "rs33"} <= ids
    assert "rs5" not in ids and "rs_not_here" not in ids
    text = " ".join(steps.step)
    assert "by chrom:pos" in text and "complemented" in text


def test_clump_matches_plink19(ld_cohort, tmp_path):
    if shutil.which("plink1.9") is None:
        pytest.skip("plink1.9 not installed")
    prefix, ss, snplist, keep = ld_cohort
    bf = plink.open_bfile(prefix)
    table, _ = S.harmonise(S.read_sumstats(ss), bf.bim, S.read_snplist(snplist))
    ranked = S.rank(table)
    ranked = ranked[ranked.log10_p > -300].reset_index(drop=True)  # plink reads doubles
    clump_in = tmp_path / "in.txt"
    pd.DataFrame({"SNP": ranked.variant_id, "P": ranked.p}).to_csv(clump_in, sep="\t",
                                                                     index=False)
    sample_idx, _ = plink.match_samples(plink.read_sample_ids(keep), bf.fam)
    for r2, kb, p1, p2 in [(0.5, 250, 1, 1), (0.2, 50, 1e-3, 0.05), (0.8, 500, 1, 1)]:
        subprocess.run(["plink1.9", "--bfile", str(prefix), "--keep", str(keep), "--clump",
                        str(clump_in), "--clump-r2", str(r2), "--clump-kb", str(kb),
                        "--clump-p1", str(p1), "--clump-p2", str(p2),
                        "--out", str(tmp_path / "pl")], check=True, capture_output=True)
        theirs = set(pd.read_csv(tmp_path / "pl.clumped", sep=r"\s+").SNP)
        rows = S.clump(ranked, bf, sample_idx, r2=r2, kb=kb, p1=p1, p2=p2)
        ours = list(ranked.variant_id.iloc[rows])
        assert set(ours) == theirs, (r2, kb, p1, p2)
        assert len(ours) < len(ranked[ranked.log10_p <= np.log10(p1)])  # something clumped
        # max_index stops after the best k index SNPs
        first = S.clump(ranked, bf, sample_idx, r2=r2, kb=kb, p1=p1, p2=p2, max_index=10)
        assert list(ranked.variant_id.iloc[first]) == ours[:10]


def test_haplotype_r2_matches_plink19_ld(ld_cohort, tmp_path):
    """plink1.9 --clump-verbose prints the r2 of every clumped pair (3 decimals)."""
    if shutil.which("plink1.9") is None:
        pytest.skip("plink1.9 not installed")
    prefix, _, _, _ = ld_cohort
    bf = plink.open_bfile(prefix)
    g = plink.read_genotypes(bf)
    p = pd.DataFrame({"SNP": bf.bim.variant_id, "P": 10.0 ** -np.linspace(10, 1, bf.n_variants)})
    p.to_csv(tmp_path / "p.txt", sep="\t", index=False)
    subprocess.run(["plink1.9", "--bfile", str(prefix), "--clump", str(tmp_path / "p.txt"),
                    "--clump-p1", "1", "--clump-p2", "1", "--clump-r2", "0.0",
                    "--clump-kb", "30", "--clump-verbose", "--out", str(tmp_path / "v")],
                   check=True, capture_output=True)
    idx = {v: i for i, v in enumerate(bf.bim.variant_id)}
    pairs, index = [], None
    for line in open(tmp_path / "v.clumped"):
        f = line.split()
        if len(f) >= 2 and f[0] == "(INDEX)":
            index = f[1]
        elif index and len(f) >= 3 and f[0] in idx:
            pairs.append((idx[index], idx[f[0]], float(f[2])))
        elif line.startswith("---"):
            index = None
    assert len(pairs) > 100
    ours = np.array([S.haplotype_r2(g[i], g[j][None])[0] for i, j, _ in pairs])
    np.testing.assert_allclose(ours, [r for _, _, r in pairs], atol=6e-4)


def test_cli_select_writes_table_and_steps(ld_cohort, tmp_path):
    prefix, ss, snplist, keep = ld_cohort
    out = tmp_path / "t.snps.tsv"
    assert main(["select", "--sumstats", str(ss), "--bfile", str(prefix), "--extract",
                 str(snplist), "--top", "20", "--out", str(out)]) == 0
    got = pd.read_csv(out, sep="\t", dtype={"p": str})
    assert list(got.columns) == S.OUTPUT_COLUMNS
    ref = reference_harmonise(ss, plink.open_bfile(prefix).bim, set(snplist.read_text().split()))
    assert list(got.variant_id) == list(ref.variant_id[:20])
    assert Decimal(got.p.iloc[0]) == ref.p.iloc[0]
    steps = pd.read_csv(tmp_path / "t.snps.tsv.steps.tsv", sep="\t")
    assert steps.n_remaining.iloc[-1] == 20
    # clumped run, renamed columns through flags
    renamed = tmp_path / "renamed.txt"
    raw = pd.read_csv(ss, sep="\t", dtype=str, keep_default_na=False).rename(columns={"SNP": "rsid", "P_BOLT_LMM": "pval"})
    raw.drop(columns=["P_BOLT_LMM_INF"]).to_csv(renamed, sep=" ", index=False)
    out2 = tmp_path / "c.snps.tsv"
    assert main(["select", "--sumstats", str(renamed), "--bfile", str(prefix), "--extract",
                 str(snplist), "--top", "15", "--col-id", "rsid", "--col-p", "pval",
                 "--clump", "--clump-r2", "0.5", "--clump-kb", "250", "--keep", str(keep),
                 "--out", str(out2)]) == 0
    assert len(pd.read_csv(out2, sep="\t")) == 15


@pytest.mark.parametrize("case", ["missing_column", "text_p", "no_overlap", "exists_ok"])
def test_cli_select_bad_inputs(ld_cohort, tmp_path, capsys, case):
    prefix, ss, snplist, _ = ld_cohort
    raw = pd.read_csv(ss, sep="\t", dtype=str, keep_default_na=False)
    bad = tmp_path / "bad.txt"
    if case == "missing_column":
        raw.drop(columns=["BETA"]).to_csv(bad, sep="\t", index=False)
        expect = "no column for beta"
    elif case == "text_p":
        raw.loc[4, "P_BOLT_LMM"] = "significant"
        raw.to_csv(bad, sep="\t", index=False)
        expect = "line 6, column P_BOLT_LMM: expected a p-value"
    elif case == "no_overlap":
        raw["SNP"] = "x" + raw["SNP"]
        raw["BP"] = "1"
        raw.to_csv(bad, sep="\t", index=False)
        expect = "no SNP left after harmonising"
    else:
        bad = ss
        expect = None
    out = tmp_path / "o.tsv"
    rc = main(["select", "--sumstats", str(bad), "--bfile", str(prefix), "--extract",
               str(snplist), "--out", str(out)])
    err = capsys.readouterr().err
    if expect is None:
        assert rc == 0
        return
    assert rc == 1
    assert expect in err and "Traceback" not in err
    assert not out.exists() and not (tmp_path / "o.tsv.steps.tsv").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["bad.txt"]
