"""cmix.genotypes.sumstats and `cmix select`: harmonising, ranking, clumping.

References: an independent harmonisation written here row by row with exact decimal
p-values (Python's Decimal), plink1.9 --clump on the same inputs, the .bim itself.
"""

import gzip
import shutil
import subprocess
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cmix.readers import plink
from cmix.genotypes import selection
from cmix.genotypes.sumstats import read as sumstats_read
from cmix.genotypes.sumstats.clump import clump, haplotype_r2
from cmix.genotypes.sumstats.harmonise import chrom_sort_key, harmonise, rank
from cmix.genotypes.sumstats.info import sumstats_info
from cmix.genotypes.sumstats.layouts import resolve_columns
from cmix.genotypes.sumstats.read import parse_log10_p, read_sumstats
from cmix.genotypes.sumstats.select import select_top
from cmix.genotypes.sumstats.selection_files import OUTPUT_COLUMNS
from cmix.cli import main
from cmix.errors import CmixError

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
    """Independent harmonisation, one row at a time, p as exact Decimals. Only SNPs (one
    base each allele) may be given on the other strand; indels match as given."""
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
            if (ambiguous or len(ea) != 1 or len(oa) != 1
                    or {COMPLEMENT[ea], COMPLEMENT[oa]} != {a1, a2}):
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
    got = parse_log10_p(text)
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
        parse_log10_p(["0.1", "abc"], column="P", lines=[2, 3])
    with pytest.raises(CmixError, match="above 1"):
        parse_log10_p(["1.5"])


@pytest.mark.parametrize("keep_ambiguous", [False, True])
def test_selection_is_top_k_of_independent_sort(ld_cohort, keep_ambiguous):
    prefix, ss, snplist, _ = ld_cohort
    bf = plink.open_bfile(prefix)
    qc = set(snplist.read_text().split())
    ref = reference_harmonise(ss, bf.bim, qc, keep_ambiguous)
    table, steps = harmonise(read_sumstats(ss), bf.bim, qc, keep_ambiguous)
    assert len(table) == len(ref)
    for top in (1, 25, 100, len(ref) + 5):
        sel = select_top(table, top)
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
    table, _ = harmonise(read_sumstats(ss), bf.bim)
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
    table, steps = harmonise(read_sumstats(ss), bf.bim, keep_ambiguous=True)
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
    table, _ = harmonise(read_sumstats(ss), bf.bim, set(selection.read_variant_ids(snplist)))
    ranked = rank(table)
    ranked = ranked[ranked.log10_p > -300].reset_index(drop=True)  # plink reads doubles
    clump_in = tmp_path / "in.txt"
    pd.DataFrame({"SNP": ranked.variant_id, "P": ranked.p}).to_csv(clump_in, sep="\t",
                                                                     index=False)
    sample_idx, _ = selection.match_samples(selection.read_sample_ids(keep), bf.fam)
    for r2, kb, p1, p2 in [(0.5, 250, 1, 1), (0.2, 50, 1e-3, 0.05), (0.8, 500, 1, 1)]:
        subprocess.run(["plink1.9", "--bfile", str(prefix), "--keep", str(keep), "--clump",
                        str(clump_in), "--clump-r2", str(r2), "--clump-kb", str(kb),
                        "--clump-p1", str(p1), "--clump-p2", str(p2),
                        "--out", str(tmp_path / "pl")], check=True, capture_output=True)
        theirs = set(pd.read_csv(tmp_path / "pl.clumped", sep=r"\s+").SNP)
        rows = clump(ranked, bf, sample_idx, r2=r2, kb=kb, p1=p1, p2=p2)
        ours = list(ranked.variant_id.iloc[rows])
        assert set(ours) == theirs, (r2, kb, p1, p2)
        assert len(ours) < len(ranked[ranked.log10_p <= np.log10(p1)])  # something clumped
        # max_index stops after the best k index SNPs
        first = clump(ranked, bf, sample_idx, r2=r2, kb=kb, p1=p1, p2=p2, max_index=10)
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
    ours = np.array([haplotype_r2(g[i], g[j][None])[0] for i, j, _ in pairs])
    np.testing.assert_allclose(ours, [r for _, _, r in pairs], atol=6e-4)


def test_cli_select_writes_table_and_steps(ld_cohort, tmp_path):
    prefix, ss, snplist, keep = ld_cohort
    out = tmp_path / "t.snps.tsv"
    assert main(["select", "--sumstats", str(ss), "--bfile", str(prefix), "--extract",
                 str(snplist), "--top", "20", "--out", str(out)]) == 0
    got = pd.read_csv(out, sep="\t", dtype={"p": str})
    assert list(got.columns) == OUTPUT_COLUMNS
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


@pytest.mark.parametrize("case", ["missing_column", "text_p", "no_overlap", "ambiguous",
                                  "exists_ok"])
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
    elif case == "ambiguous":         # no known layout, two p-value columns
        raw = raw.rename(columns={"SNP": "rsid", "P_BOLT_LMM_INF": "P", "P_BOLT_LMM": "PVAL"})
        raw.to_csv(bad, sep="\t", index=False)
        expect = "ambiguous header: columns 'P' and 'PVAL' could both be the p column"
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


# ------------------------------------------------------------- the field's GWAS layouts
requires_plink2 = pytest.mark.skipif(shutil.which("plink2") is None,
                                     reason="plink2 not installed")


def _neg_log10(p_text: str) -> str:
    """-log10 of a p-value text, exactly (Decimal), 15 digits: "inf" for p = 0."""
    if p_text.upper() == "NA":
        return "NA"
    p = Decimal(p_text)
    return "inf" if p == 0 else format(-p.log10(), ".15g")


def _write(path, header, rows, sep="\t"):
    with open(path, "w") as fh:
        fh.write(sep.join(header) + "\n")
        for r in rows:
            fh.write(sep.join(str(x) for x in r) + "\n")
    return path


def relayout(src, layout, out, rng):
    """Rewrite a BOLT-LMM file (columns SNP CHR BP ALLELE1 ALLELE0 ... BETA ... P_BOLT_LMM)
    in another tool's documented layout, same numbers: -log10 p and odds ratios computed
    exactly from the text, alleles of some rows given the other way round."""
    ss = pd.read_csv(src, sep="\t", dtype=str, keep_default_na=False)
    rows = []
    for r in ss.itertuples(index=False):
        ea, oa, beta, p = r.ALLELE1, r.ALLELE0, r.BETA, r.P_BOLT_LMM
        if layout == "plink2":            # REF/ALT either way round, A1 the effect allele
            ref, alt = (oa, ea) if rng.random() < 0.5 else (ea, oa)
            rows.append([r.CHR, r.BP, r.SNP, ref, alt, ea, "ADD", 400, beta, "0.01",
                         _neg_log10(p), "."])
            rows.append([r.CHR, r.BP, r.SNP, ref, alt, ea, "age", 400, "9.9", "0.01",
                         "300", "."])     # covariate rows: must be left out
        elif layout == "regenie":
            rows.append([r.CHR, r.BP, r.SNP, oa, ea, "0.3", "0.99", 400, "ADD", beta, "0.01",
                         "4", _neg_log10(p), "NA"])
        elif layout == "ssf_or":          # GWAS-SSF writes missing values as #NA
            odds = "#NA" if beta == "NA" else f"{np.exp(float(beta)):.15g}"
            rows.append([r.CHR, r.BP, ea, oa, odds, "0.01", "0.3",
                         _neg_log10(p).replace("NA", "#NA"), r.SNP])
        elif layout == "ssf_beta":
            rows.append([r.CHR, r.BP, ea, oa, beta, "0.01", "0.3", p, f"{r.CHR}_{r.BP}", r.SNP])
        elif layout == "saige":           # BETA is for Allele2
            rows.append([r.CHR, r.BP, r.SNP, oa, ea, 100, "0.3", 0, beta, "0.01", "1.0",
                         "1.0", p, p, "TRUE"])
        elif layout == "metal":           # lower-case alleles, no positions
            if r.SNP.startswith("rs"):
                rows.append([r.SNP, ea.lower(), oa.lower(), beta, "0.01", p, "++"])
    header = {
        "plink2": ["#CHROM", "POS", "ID", "REF", "ALT", "A1", "TEST", "OBS_CT", "BETA", "SE",
                   "LOG10_P", "ERRCODE"],
        "regenie": ["CHROM", "GENPOS", "ID", "ALLELE0", "ALLELE1", "A1FREQ", "INFO", "N",
                    "TEST", "BETA", "SE", "CHISQ", "LOG10P", "EXTRA"],
        "ssf_or": ["chromosome", "base_pair_location", "effect_allele", "other_allele",
                   "odds_ratio", "standard_error", "effect_allele_frequency",
                   "neg_log_10_p_value", "rsid"],
        "ssf_beta": ["chromosome", "base_pair_location", "effect_allele", "other_allele",
                     "beta", "standard_error", "effect_allele_frequency", "p_value",
                     "variant_id", "rsid"],
        "saige": ["CHR", "POS", "MarkerID", "Allele1", "Allele2", "AC_Allele2", "AF_Allele2",
                  "MissingRate", "BETA", "SE", "Tstat", "var", "p.value", "p.value.NA",
                  "Is.SPA"],
        "metal": ["MarkerName", "Allele1", "Allele2", "Effect", "StdErr", "P-value",
                  "Direction"],
    }[layout]
    return _write(out, header, rows, sep=" " if layout == "regenie" else "\t")


@pytest.mark.parametrize("layout, name", [
    ("plink2", "plink2 --glm"), ("regenie", "regenie"), ("ssf_or", "GWAS-SSF"),
    ("ssf_beta", "GWAS-SSF"), ("saige", "SAIGE"), ("metal", "METAL")])
def test_each_layout_selects_as_the_independent_reference(ld_cohort, tmp_path, layout, name):
    """Hand-written files in each tool's documented layout, built from the BOLT-LMM test
    file: recognised by header alone, and the same SNPs and oriented betas as the
    independent row-by-row harmonisation of the BOLT file (exact p-values)."""
    prefix, ss, snplist, _ = ld_cohort
    bf = plink.open_bfile(prefix)
    qc = set(snplist.read_text().split())
    src = tmp_path / "bolt.txt"
    raw = pd.read_csv(ss, sep="\t", dtype=str, keep_default_na=False)
    if layout == "metal":              # matched by ID only: the rows that have an rsID
        raw = raw[raw.SNP.str.startswith("rs")]
    raw.to_csv(src, sep="\t", index=False)
    ref = reference_harmonise(src, bf.bim, qc)
    path = relayout(src, layout, tmp_path / f"{layout}.txt", np.random.default_rng(5))
    got = read_sumstats(path)
    assert got.attrs["layout"] == name
    table, _ = harmonise(got, bf.bim, qc)
    sel = select_top(table, len(ref) + 5)
    assert list(sel.variant_id) == list(ref.variant_id)
    np.testing.assert_allclose(sel.beta, ref.beta, rtol=1e-9, atol=1e-12)
    # the smallest p-values (0, 1.2e-400, 3e-401) rank first, in order, with no underflow
    assert list(sel.log10_p[:3]) == pytest.approx([-np.inf, float(Decimal("3e-401").log10()),
                                                   float(Decimal("1.2e-400").log10())])


def test_log10p_ranks_without_underflow(tmp_path):
    """regenie LOG10P 400 (p = 1e-400) ranks above LOG10P 300, and both above 1e-10."""
    path = _write(tmp_path / "r.regenie",
                  ["CHROM", "GENPOS", "ID", "ALLELE0", "ALLELE1", "A1FREQ", "INFO", "N",
                   "TEST", "BETA", "SE", "CHISQ", "LOG10P", "EXTRA"],
                  [[1, 100, "rs1", "A", "G", .3, 1, 9, "ADD", .1, .01, 9, 10, "NA"],
                   [1, 200, "rs2", "A", "G", .3, 1, 9, "ADD", .1, .01, 9, 300, "NA"],
                   [1, 300, "rs3", "A", "G", .3, 1, 9, "ADD", .1, .01, 9, 400, "NA"],
                   [1, 400, "rs4", "A", "G", .3, 1, 9, "ADD", .1, .01, 9, "NA", "TEST_FAIL"]],
                  sep=" ")
    got = read_sumstats(path)
    assert list(got.log10_p[:3]) == [-10, -300, -400] and np.isnan(got.log10_p[3])
    assert list(sumstats_read._p_text(got.log10_p[:3])) == ["1e-10", "1e-300", "1e-400"]
    bim = pd.DataFrame({"chrom": ["1"] * 4, "variant_id": ["rs1", "rs2", "rs3", "rs4"],
                        "cm": 0.0, "pos": [100, 200, 300, 400], "a1": "G", "a2": "A"})
    table, _ = harmonise(got, bim)
    top = select_top(table, 3)
    assert list(top.variant_id) == ["rs3", "rs2", "rs1"]
    assert list(top.p) == ["1e-400", "1e-300", "1e-10"]
    bad = _write(tmp_path / "b.txt", ["ID", "CHROM", "GENPOS", "ALLELE0", "ALLELE1", "BETA",
                                      "LOG10P"], [["rs1", 1, 100, "A", "G", .1, "-2"]])
    with pytest.raises(CmixError, match="line 2, column LOG10P: -log10 p '-2' is below 0"):
        read_sumstats(bad)


@pytest.mark.parametrize("header, named", [
    (["SNP", "CHR", "BP", "A1", "A2", "BETA", "P", "PVAL"], ("'P'", "'PVAL'")),
    (["SNP", "CHR", "BP", "A1", "EA", "A2", "BETA", "P"], ("'A1'", "'EA'")),
    (["SNP", "CHR", "BP", "A1", "A2", "BETA", "OR", "P"], ("'BETA'", "'OR'")),
    (["SNP", "CHR", "BP", "A1", "A2", "BETA", "P", "LOG10P"], ("'P'", "'LOG10P'")),
    (["SNP", "CHR", "BP", "ALLELE1", "ALLELE0", "BETA", "P_BOLT_LMM", "CHROM", "GENPOS",
      "ID"], ("BOLT-LMM", "regenie")),
])
def test_ambiguous_header_is_one_error_naming_both(tmp_path, capsys, header, named):
    path = _write(tmp_path / "amb.txt", header, [["x"] * len(header)])
    with pytest.raises(CmixError, match="ambiguous header") as err:
        read_sumstats(path)
    assert all(n in str(err.value) for n in named), err.value
    # naming the column resolves it
    field = {"'P'": "p", "'A1'": "effect_allele", "'BETA'": "beta"}.get(named[0])
    if field:
        _, cols = resolve_columns(header, {field: named[0].strip("'")}, path)
        assert cols[field] == named[0].strip("'")


def test_byte_order_mark_and_detection_log(ld_cohort, tmp_path, capsys):
    """A UTF-8 BOM before a BOLT-LMM header (plain and gzipped) changes nothing; the log
    names the layout and the columns used."""
    prefix, ss, snplist, _ = ld_cohort
    text = gzip.open(ss, "rt").read()
    plain = tmp_path / "bom.txt"
    plain.write_bytes(b"\xef\xbb\xbf" + text.encode())
    gz = tmp_path / "bom.txt.gz"
    with gzip.open(gz, "wb") as fh:
        fh.write(b"\xef\xbb\xbf" + text.encode())
    want = read_sumstats(ss)
    for path in (plain, gz):
        got = read_sumstats(path)
        assert got.attrs["layout"] == "BOLT-LMM"
        pd.testing.assert_frame_equal(got, want)
        assert main(["select", "--sumstats", str(path), "--bfile", str(prefix), "--extract",
                     str(snplist), "--top", "10", "--out", str(tmp_path / "o.tsv")]) == 0
        err = capsys.readouterr().err
        assert ("BOLT-LMM layout: id=SNP, chrom=CHR, pos=BP, effect_allele=ALLELE1, "
                "other_allele=ALLELE0, beta=BETA, p=P_BOLT_LMM") in err


# ------------------------------------------- plink2 --glm on a simulated cohort
@pytest.fixture(scope="module")
def glm(tmp_path_factory):
    """plink2 --glm with age and sex as covariates (one TEST row per covariate) on a
    simulated cohort: linear on mean platelet volume, logistic on ever-smoked; the
    logistic run twice, odds ratios with p (the default) and betas with -log10 p."""
    from cmix.simulate.balding_nichols import simulate_cohort

    if shutil.which("plink2") is None:
        pytest.skip("plink2 not installed")
    d = tmp_path_factory.mktemp("glm")
    simulate_cohort(d / "c", n_samples=400, n_variants=1000, n_discovery=500, seed=3)
    ph = pd.read_csv(d / "c/phenotypes.tsv", sep="\t")
    ids = {"#FID": ph.eid, "IID": ph.eid}
    pd.DataFrame({**ids, "mpv": ph["f.30100.0.0"],
                  "smoked": np.where(ph["f.20116.0.0"].isna(), np.nan,
                                     (ph["f.20116.0.0"] > 0) + 1.0)}).to_csv(
        d / "pheno.txt", sep="\t", index=False, na_rep="NA")
    pd.DataFrame({**ids, "age": ph["f.21022.0.0"], "sex": ph["f.31.0.0"]}).to_csv(
        d / "covar.txt", sep="\t", index=False, na_rep="NA")
    base = ["plink2", "--bfile", str(d / "c/genotypes"), "--pheno", str(d / "pheno.txt"),
            "--covar", str(d / "covar.txt"), "--threads", "1"]
    subprocess.run(base + ["--glm", "--out", str(d / "g")], check=True, capture_output=True)
    subprocess.run(base + ["--pheno-name", "smoked", "--glm", "log10", "cols=+beta",
                           "--out", str(d / "b")], check=True, capture_output=True)
    return d


def _add_rows(path):
    raw = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    return raw[raw.TEST == "ADD"].reset_index(drop=True)


def test_plink2_linear_beta_is_the_a1_effect(glm):
    """The linear output's betas, oriented to the .bim A1, equal an independent least
    squares fit (numpy) of the phenotype on A1 count + age + sex per SNP: the ADD row is
    read, not a covariate's."""
    bf = plink.open_bfile(glm / "c/genotypes")
    got = read_sumstats(glm / "g.mpv.glm.linear")
    assert got.attrs["layout"] == "plink2 --glm" and len(got) == bf.n_variants
    table, _ = harmonise(got, bf.bim)
    pheno = pd.read_csv(glm / "pheno.txt", sep="\t").set_index("IID")
    covar = pd.read_csv(glm / "covar.txt", sep="\t").set_index("IID")
    iid = bf.fam.iid.astype(int).to_numpy()
    y = pheno.loc[iid, "mpv"].to_numpy()
    x_cov = covar.loc[iid, ["age", "sex"]].to_numpy(dtype=float)
    rows = select_top(table, 20)
    g = plink.read_genotypes(bf, rows.bim_index.to_numpy())
    for k, r in enumerate(rows.itertuples()):
        ok = (g[k] >= 0) & np.isfinite(y) & np.isfinite(x_cov).all(1)
        x = np.column_stack([np.ones(ok.sum()), g[k][ok], x_cov[ok]])
        coef = np.linalg.lstsq(x, y[ok], rcond=None)[0]
        assert r.beta == pytest.approx(coef[1], rel=1e-4, abs=1e-6), r.variant_id


def test_plink2_logistic_and_regenie_select_as_bolt(glm, tmp_path):
    """One GWAS (plink2 --glm logistic with covariates) in three layouts: plink2's own
    output (odds ratios, P; A1 is REF on some rows), a regenie file and a BOLT-LMM file
    re-laid out from the same run's numbers (plink2's BETA, -log10 of its P), alleles
    swapped on different rows. All three select the same SNPs, in the order of an
    independent sort of plink2's p-values, with the same betas oriented to the .bim A1
    (up to ln OR and plink2's 6 printed digits)."""
    bf = plink.open_bfile(glm / "c/genotypes")
    orr = _add_rows(glm / "g.smoked.glm.logistic.hybrid")
    beta = _add_rows(glm / "b.smoked.glm.logistic.hybrid")
    assert list(orr.ID) == list(beta.ID)
    rng = np.random.default_rng(11)
    bolt_rows, regenie_rows = [], []
    for o, b in zip(orr.itertuples(index=False), beta.itertuples(index=False)):
        ea, oa, bt = b.A1, (b.REF if b.A1 == b.ALT else b.ALT), b.BETA
        neg = "NA" if bt == "NA" else str(-float(bt))
        swap = rng.random() < 0.4
        bolt_rows.append([b.ID, b._0, b.POS, oa, ea, "0.3", "0.99", neg, "0.1", o.P, o.P]
                         if swap else
                         [b.ID, b._0, b.POS, ea, oa, "0.3", "0.99", bt, "0.1", o.P, o.P])
        swap = rng.random() < 0.4
        log10p = "NA" if o.P == "NA" else _neg_log10(o.P)
        regenie_rows.append([b._0, b.POS, b.ID] + ([ea, oa, "0.7"] if swap else [oa, ea, "0.3"])
                            + [1, 400, "ADD", neg if swap else bt, 0.1, 1, log10p, "NA"])
    bolt = _write(tmp_path / "bolt.txt", ["SNP", "CHR", "BP", "ALLELE1", "ALLELE0", "A1FREQ",
                                          "INFO", "BETA", "SE", "P_BOLT_LMM_INF",
                                          "P_BOLT_LMM"], bolt_rows)
    regenie = _write(tmp_path / "r.regenie", ["CHROM", "GENPOS", "ID", "ALLELE0", "ALLELE1",
                                              "A1FREQ", "INFO", "N", "TEST", "BETA", "SE",
                                              "CHISQ", "LOG10P", "EXTRA"], regenie_rows, " ")
    top = 60
    sel = {}
    for name, path in (("plink2", glm / "g.smoked.glm.logistic.hybrid"), ("regenie", regenie),
                       ("bolt", bolt)):
        got = read_sumstats(path)
        sel[name] = select_top(harmonise(got, bf.bim)[0], top)
    assert read_sumstats(regenie).attrs["layout"] == "regenie"
    assert read_sumstats(bolt).attrs["layout"] == "BOLT-LMM"
    # independent: plink2's ADD rows by exact p, ties by position, strand-ambiguous SNPs
    # (A/T, C/G) left out as harmonise leaves them out
    ambiguous = orr.REF.map(COMPLEMENT) == orr.ALT
    ok = orr[(orr.P != "NA") & ~ambiguous]
    ok = ok.assign(p=ok.P.map(Decimal), chrom=ok["#CHROM"].astype(int),
                   pos=ok.POS.astype(int))
    want = ok.sort_values(["p", "chrom", "pos"], kind="stable").ID.head(top).tolist()
    for name in ("plink2", "regenie", "bolt"):
        assert list(sel[name].variant_id) == want, name
    # plink2's A1 is REF on some rows (here 172) and ALT on others: the oriented beta is
    # its BETA where A1 is the .bim A1 (column 5), minus it where A1 is the .bim A2
    assert (beta.A1 == beta.REF).sum() > 20
    by_id = beta.set_index("ID").loc[want]
    a1 = bf.bim.set_index("variant_id").loc[want, "a1"].to_numpy()
    sign = np.where(by_id.A1.to_numpy() == a1, 1.0, -1.0)
    assert (sign < 0).any()
    np.testing.assert_allclose(sel["bolt"].beta, sign * by_id.BETA.astype(float))
    for name in ("plink2", "regenie"):
        np.testing.assert_allclose(sel[name].beta, sel["bolt"].beta, rtol=1e-4, atol=1e-5)
    assert np.abs(sel["bolt"].beta).min() > 1e-3      # not all zero: the check bites


def test_plink2_other_allele_from_ref_alt(tmp_path):
    """Without OMITTED/AX the other allele is whichever of REF/ALT is not A1; an A1 that
    is neither is one error naming the line; a row with an ERRCODE has no beta."""
    h = ["#CHROM", "POS", "ID", "REF", "ALT", "A1", "OBS_CT", "OR", "LOG(OR)_SE", "P",
         "ERRCODE"]
    path = _write(tmp_path / "x.glm.logistic", h,
                  [[1, 10, "rs1", "A", "G", "G", 9, "2", ".1", ".01", "."],
                   [1, 20, "rs2", "A", "G", "A", 9, "0.5", ".1", ".01", "."],
                   [1, 30, "rs3", "A", "G,T", "T", 9, "1", ".1", ".5", "."],
                   [1, 40, "rs4", "A", "G", "G", 9, "3", ".1", ".5", "FIRTH_CONVERGE_FAIL"]])
    got = read_sumstats(path)
    assert list(got.other_allele) == ["A", "G", "A", "A"]
    np.testing.assert_allclose(got.beta, [np.log(2), np.log(0.5), 0, np.nan])
    bad = _write(tmp_path / "y.glm.logistic", h, [[1, 10, "rs1", "A", "G", "C", 9, "2", ".1",
                                                   ".01", "."]])
    with pytest.raises(CmixError, match="line 2, column A1: A1 allele 'C' is neither REF"):
        read_sumstats(bad)
    zero = _write(tmp_path / "z.glm.logistic", h, [[1, 10, "rs1", "A", "G", "G", 9, "0", ".1",
                                                    ".01", "."]])
    with pytest.raises(CmixError, match="line 2, column OR: expected a finite odds ratio > 0"):
        read_sumstats(zero)


@pytest.mark.parametrize("tool", ["plink2", "plink1.9"])
def test_generic_header_keeps_only_add_rows(glm, tmp_path, tool):
    """Real association output with covariate rows, in a header of no known layout:
    plink2 --glm with columns chosen (no REF, so not plink2's layout; its non-A1 allele
    AX named with the column map) and plink 1.9 --linear (CHR SNP BP A1 TEST NMISS BETA
    STAT P, with A2 added from the .bim as is usual). Only the TEST = ADD rows are read:
    the selection is an independent pandas sort of the ADD rows by exact p, betas
    oriented to the .bim A1, and the covariate rows (which have smaller p-values
    here: the trait is mean platelet volume plus 2 x sex) change nothing."""
    bf = plink.open_bfile(glm / "c/genotypes")
    pheno = pd.read_csv(glm / "pheno.txt", sep="\t")
    sex = pd.read_csv(glm / "covar.txt", sep="\t").set_index("IID").loc[pheno.IID, "sex"]
    pheno["y"] = pheno.mpv + 2 * sex.to_numpy()
    pheno.to_csv(tmp_path / "pheno.txt", sep="\t", index=False, na_rep="NA")
    pheno_args = ["--pheno", str(tmp_path / "pheno.txt"), "--pheno-name", "y"]
    covar = ["--covar", str(glm / "covar.txt")]
    if tool == "plink2":
        subprocess.run(["plink2", "--bfile", str(glm / "c/genotypes"), *pheno_args, *covar,
                        "--threads", "1", "--glm", "cols=chrom,pos,ax,test,nobs,beta,se,tz,p",
                        "--out", str(tmp_path / "g")], check=True, capture_output=True)
        path, column_map = tmp_path / "g.y.glm.linear", {"other_allele": "AX"}
        raw = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
        raw = raw.rename(columns={"#CHROM": "CHR", "POS": "BP", "ID": "SNP"})
    else:
        if shutil.which("plink1.9") is None:
            pytest.skip("plink1.9 not installed")
        subprocess.run(["plink1.9", "--bfile", str(glm / "c/genotypes"), *pheno_args, *covar,
                        "--covar-name", "age", "sex", "--linear", "--allow-no-sex",
                        "--out", str(tmp_path / "p19")], check=True, capture_output=True)
        raw = pd.read_csv(tmp_path / "p19.assoc.linear", sep=r"\s+", dtype=str,
                          keep_default_na=False)
        alleles = bf.bim.set_index("variant_id").loc[raw.SNP, ["a1", "a2"]].to_numpy()
        raw.insert(4, "A2", np.where(raw.A1 == alleles[:, 0], alleles[:, 1], alleles[:, 0]))
        path, column_map = tmp_path / "p19.txt", None
        raw.to_csv(path, sep=" ", index=False)
    got = read_sumstats(path, column_map)
    assert got.attrs["layout"] == "generic" and len(got) == bf.n_variants
    assert set(raw.TEST) > {"ADD"}
    sel = select_top(harmonise(got, bf.bim)[0], 20)
    # independent: the ADD rows by exact p, ties by position, strand-ambiguous SNPs out
    bim = bf.bim.set_index("variant_id")
    add = raw[(raw.TEST == "ADD") & (raw.P != "NA")]
    a1, a2 = bim.loc[add.SNP, "a1"].to_numpy(), bim.loc[add.SNP, "a2"].to_numpy()
    add = add.assign(p=add.P.map(Decimal), chrom=add.CHR.astype(int), pos=add.BP.astype(int),
                     beta=np.where(add.A1 == a1, 1.0, -1.0) * add.BETA.astype(float))
    add = add[pd.Series(a1).map(COMPLEMENT).to_numpy() != a2]
    want = add.sort_values(["p", "chrom", "pos"], kind="stable").head(20)
    assert list(sel.variant_id) == list(want.SNP)
    np.testing.assert_allclose(sel.beta, want.beta)
    # the covariate rows would rank first if read as SNP results: the check bites
    covariate = raw[(raw.TEST != "ADD") & (raw.P != "NA")].P.map(Decimal)
    assert (covariate < want.p.min()).any()


def test_workflow_sumstats_columns_reach_select(glm, tmp_path):
    """A per-trait `inputs.sumstats_columns` mapping in the workflow config reads a header
    of no known layout (odds ratios and -log10 p under other names): the rule's selection
    equals `cmix select` on the same GWAS in BOLT-LMM layout, and its log names the
    columns used."""
    import sys

    import yaml

    repo = Path(__file__).resolve().parent.parent
    c = glm / "c"
    trait = "mean_platelet_volume"
    bolt = pd.read_csv(c / f"sumstats/{trait}.txt.gz", sep="\t", dtype=str)
    odd = pd.DataFrame({"marker": bolt.SNP, "chr_name": bolt.CHR, "bp37": bolt.BP,
                        "tested": bolt.ALLELE1, "nontested": bolt.ALLELE0,
                        "OddsR": np.exp(bolt.BETA.astype(float)).map(lambda v: f"{v:.12g}"),
                        "mlp": bolt.P_BOLT_LMM.map(_neg_log10)})
    odd.to_csv(tmp_path / "odd.tsv", sep="\t", index=False)
    cfg = yaml.safe_load((repo / "config/ukb.yaml").read_text())
    cfg["run_name"] = "cols"
    cfg["traits"] = [trait]
    cfg["discovery"]["traits"] = []          # SNPs from the mapped external file
    cfg["budgets"], cfg["seeds"] = [50], [1]
    cfg["variant_qc"].update(chromosomes=[1, 2, 3, 4, 5], split_by_chrom=False)
    cfg["inputs"] = {
        "bfile": str(c / "genotypes"), "sample_qc": str(c / "sample_qc.tsv"),
        "withdrawn": str(c / "withdrawn.txt"), "kinship": str(c / "kinship.dat"),
        "phenotypes": str(c / "phenotypes.tsv"), "sumstats": {trait: str(tmp_path / "odd.tsv")},
        "sumstats_columns": {trait: {"id": "marker", "chrom": "chr_name", "pos": "bp37",
                                     "effect_allele": "tested", "other_allele": "nontested",
                                     "or": "OddsR", "log10p": "mlp"}}}
    path = tmp_path / "cols.yaml"
    # a field name the schema does not know stops the run before any job
    bad = {**cfg, "inputs": {**cfg["inputs"], "sumstats_columns": {trait: {"pvalue": "mlp"}}}}
    path.write_text(yaml.safe_dump(bad))
    res = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1",
                          "--configfile", str(path), "--directory", str(tmp_path)], cwd=repo,
                         capture_output=True, text=True)
    assert res.returncode != 0 and "'pvalue' was unexpected" in res.stdout + res.stderr
    path.write_text(yaml.safe_dump(cfg))
    target = f"results/cols/traits/{trait}.snps.tsv"
    res = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--configfile",
                          str(path), "--directory", str(tmp_path), target], cwd=repo,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    log = (tmp_path / f"results/cols/logs/select_snps/{trait}.log").read_text()
    assert ("generic column names: id=marker, chrom=chr_name, pos=bp37, "
            "effect_allele=tested, other_allele=nontested, beta=ln(OddsR), p=10^-mlp") in log
    top = cfg["selection"]["top"]
    assert main(["select", "--sumstats", str(c / f"sumstats/{trait}.txt.gz"), "--bfile",
                 str(c / "genotypes"), "--extract",
                 str(tmp_path / "results/cols/qc/variants.snplist"), "--top", str(top),
                 "--out", str(tmp_path / "bolt.snps.tsv")]) == 0
    got = pd.read_csv(tmp_path / target, sep="\t")
    want = pd.read_csv(tmp_path / "bolt.snps.tsv", sep="\t")
    assert len(got) > 100 and list(got.variant_id) == list(want.variant_id)
    np.testing.assert_allclose(got.beta, want.beta, rtol=1e-9, atol=1e-10)  # 12-digit ORs
    np.testing.assert_allclose(got.log10_p, want.log10_p, rtol=1e-9)
    np.testing.assert_allclose([float(Decimal(p).log10()) for p in got.p], want.log10_p,
                               rtol=1e-5)                  # p text written from -log10 p


def test_a_used_column_named_twice_is_refused(tmp_path):
    header = ["SNP", "CHR", "BP", "ALLELE1", "ALLELE0", "SE", "SE", "BETA", "P_BOLT_LMM"]
    assert resolve_columns(header, None, "f")[1]["beta"] == "BETA"     # unused: fine
    header[5:7] = ["BETA", "SE"]
    with pytest.raises(CmixError, match="names the column 'BETA' \\(beta\\) twice"):
        resolve_columns(header, None, "f")


def test_chromosome_codes_match_the_bim_however_written(tmp_path):
    """Summary statistics that write chromosomes as chr01, 01, CHR2 or plink's 23 match a
    .bim that writes 1, 2 and X by position (their IDs match nothing), as
    :func:`cmix.readers.chroms.chrom_code` reads both; the sort key puts X after 22."""
    rows = [["a1", "chr01", 100, "A", "G", .1, "5"], ["a2", "01", 200, "A", "G", .1, "4"],
            ["a3", "CHR2", 300, "A", "G", .1, "3"], ["a4", "23", 400, "A", "G", .1, "2"]]
    path = _write(tmp_path / "codes.txt", ["ID", "CHROM", "GENPOS", "ALLELE0", "ALLELE1",
                                           "BETA", "LOG10P"], rows)
    got = read_sumstats(path)
    assert list(got.chrom) == ["1", "1", "2", "X"]
    bim = pd.DataFrame({"chrom": ["1", "1", "2", "X"], "variant_id": ["rs1", "rs2", "rs3", "rs4"],
                        "cm": 0.0, "pos": [100, 200, 300, 400], "a1": "G", "a2": "A"})
    table, _ = harmonise(got, bim)
    assert sorted(table.variant_id) == ["rs1", "rs2", "rs3", "rs4"]
    assert list(chrom_sort_key(["X", "22", "chr1", "MT", "01"])) == [23, 22, 1, 26, 1]


def test_gwas_ssf_chromosome_25_is_mt(tmp_path):
    """GWAS-SSF numbers chromosomes 1-25 with X=23, Y=24, MT=25 (gwas-ssf v1.1), plink
    23-26 with 25 = XY: an SSF row on 25 matches the .bim's MT variant, not the XY one
    at the same position, while 25 in another layout (plink's numbering) is XY."""
    ssf_codes = {"23": "X", "24": "Y", "25": "MT"}        # the spec's table
    bim = pd.DataFrame({"chrom": ["X", "Y", "XY", "MT"], "variant_id": ["x", "y", "xy", "mt"],
                        "cm": 0.0, "pos": 100, "a1": "G", "a2": "A"})
    ssf = _write(tmp_path / "ssf.tsv", ["chromosome", "base_pair_location", "effect_allele",
                                        "other_allele", "beta", "standard_error", "p_value",
                                        "rsid"],
                 [[c, 100, "G", "A", 0.1, 0.01, "1e-5", "#NA"] for c in ssf_codes])
    got = read_sumstats(ssf)
    assert got.attrs["layout"] == "GWAS-SSF"
    assert list(got.chrom) == list(ssf_codes.values())
    table, _ = harmonise(got, bim)
    want = bim.set_index("chrom").loc[list(ssf_codes.values()), "variant_id"]
    assert sorted(table.variant_id) == sorted(want)
    plink_numbers = _write(tmp_path / "r.regenie", ["CHROM", "GENPOS", "ID", "ALLELE0",
                                                    "ALLELE1", "BETA", "LOG10P"],
                           [["25", 100, "?", "A", "G", 0.1, 5]])
    assert list(read_sumstats(plink_numbers).chrom) == ["XY"]


def test_indels_are_never_strand_flipped(tmp_path):
    """Only SNPs are matched on the other strand. An indel whose alleles are the .bim's
    with each base complemented (TC/T for AG/A: another insertion, not AG/A on the
    other strand, which would read CT/T) or reverse-complemented is not the .bim
    variant, matched by position or by ID; indels given as the .bim's, or swapped, match.
    The result is the independent row-by-row harmonisation's."""
    bim = pd.DataFrame({"chrom": "1", "variant_id": ["rs1", "rs2", "rs3", "rs4", "rs5"],
                        "cm": 0.0, "pos": [100, 200, 300, 400, 500],
                        "a1": ["AG", "A", "A", "ACG", "C"], "a2": ["A", "AT", "G", "A", "CTT"]})
    rows = [["x1", 1, 100, "TC", "T", "0.5", "1e-9"],     # AG/A, each base complemented
            ["x1b", 1, 100, "A", "AG", "0.2", "1e-3"],    # AG/A swapped: matches
            ["x2", 1, 200, "T", "TA", "0.4", "1e-8"],     # A/AT, each base complemented
            ["x3", 1, 300, "T", "C", "0.3", "1e-7"],      # SNP A/G on the other strand
            ["rs4", 1, 400, "TGC", "T", "0.6", "1e-6"],   # ID match, bases complemented
            ["x4", 1, 400, "CGT", "T", "0.6", "1e-6"],    # ACG/A reverse-complemented
            ["x5", 1, 500, "CTT", "C", "0.1", "1e-5"]]    # C/CTT swapped: matches
    path = _write(tmp_path / "indels.txt", ["SNP", "CHR", "BP", "ALLELE1", "ALLELE0", "BETA",
                                            "P_BOLT_LMM"], rows)
    want = reference_harmonise(path, bim, set(bim.variant_id))
    assert sorted(want.variant_id) == ["rs1", "rs3", "rs5"]
    table, steps = harmonise(read_sumstats(path), bim)
    got = rank(table)
    assert list(got.variant_id) == list(want.variant_id)
    np.testing.assert_allclose(got.beta, want.beta)
    assert "complemented: 1" in " ".join(steps.step)        # the SNP only


def test_blank_lines_above_the_header(ld_cohort, tmp_path):
    """Blank lines above the header (an empty one, one of a space and a tab; plain and
    gzipped) are skipped: the rows read are the file's (pandas on the file without
    them), line numbers in the table and in messages are the file's own, and a file of
    blank lines only is one error saying so."""
    _, ss, _, _ = ld_cohort
    text = "\n \t\n" + gzip.open(ss, "rt").read()
    plain = tmp_path / "blank.txt"
    plain.write_text(text)
    gz = tmp_path / "blank.txt.gz"
    with gzip.open(gz, "wt") as fh:
        fh.write(text)
    raw = pd.read_csv(ss, sep="\t", dtype=str, keep_default_na=False)
    for path in (plain, gz):
        got = read_sumstats(path)
        assert got.attrs["layout"] == "BOLT-LMM"
        assert list(got.id) == list(raw.SNP)
        np.testing.assert_allclose(got.beta, raw.BETA.astype(float))
        assert list(got.line) == list(range(4, len(raw) + 4))     # header on line 3
        np.testing.assert_allclose(sumstats_info(path), raw.INFO.astype(float))
    lines = text.split("\n")
    fields = lines[9].split("\t")
    fields[raw.columns.get_loc("BETA")] = "oops"
    lines[9] = "\t".join(fields)
    bad = tmp_path / "bad.txt"
    bad.write_text("\n".join(lines))
    with pytest.raises(CmixError, match="bad.txt, line 10, column BETA: expected a number"):
        read_sumstats(bad)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n")
    with pytest.raises(CmixError, match="no header line \\(its 2 lines are blank\\)"):
        read_sumstats(empty)
