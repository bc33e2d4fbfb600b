"""GWAS summary statistics: read, harmonise to the .bim, rank by p, clump, select top-k.

Reading (:func:`read_sumstats`)
    Plain or gzipped text, tab- or whitespace-separated (a UTF-8 byte-order mark is
    ignored). The layout is recognised from the header alone (:data:`LAYOUTS`): plink2
    ``--glm`` (linear, logistic, logistic.hybrid; an odds ratio is read as beta = ln OR,
    the other allele is OMITTED/AX or whichever of REF/ALT is not A1, only TEST = ADD
    rows), regenie, the GWAS Catalog's GWAS-SSF (chromosome 25 is MT), SAIGE (Allele2 is
    the effect allele), METAL and BOLT-LMM; any other header is read by common names
    (:data:`GENERIC_COLUMNS`; only TEST = ADD rows where there is a TEST column), where
    two candidate columns for one field are an error naming both. A column map
    ``{"id": "rsid", "p": "pval", ...}`` (fields :data:`FIELDS`) overrides the choice.
    The layout and the columns used are logged.
    Every row must have the header's number of fields (a row with a field too many or
    too few is an error: its columns would shift), and a beta must be a finite number
    or missing text (``NA``, ``nan``, empty). p-values are parsed as log10 from their
    text (mantissa and exponent split apart), so ``1.2E-400`` is log10 p = -399.92 and
    ``0`` is -inf; -log10 p columns (regenie's LOG10P, plink2's LOG10_P, GWAS-SSF's
    neg_log_10_p_value) are read as numbers: no value underflows.

Harmonising (:func:`harmonise`), counts kept at each step:
    1. rows with a missing beta or p ("NA", empty) are dropped;
    2. matched to the .bim by variant ID, else by chromosome:position with the same two
       alleles; an ID match whose alleles are not the .bim's (on either strand) is dropped;
    3. SNP alleles given on the other strand (A/G for a .bim T/C) are complemented;
       indels and other multi-base alleles must match as given (or swapped);
    4. strand-ambiguous SNPs (.bim alleles A/T or C/G) are dropped unless
       ``keep_ambiguous`` (then their alleles are taken as given, on the .bim's strand);
    5. only QC-passed SNPs (the ``extract`` list) are kept;
    6. several rows on one .bim variant: the smallest p is kept (ties: first in the file).

    The output orients every SNP to the .bim: ``effect_allele`` is the .bim A1 (column 5,
    plink2's ALT, the allele ``plink2 --export A`` and the .bed count) and ``beta`` is the
    effect per copy of it, its sign flipped where the summary statistics' effect allele
    was the .bim A2 ("swapped"). So a PRS is ``A1 count @ beta``.

Ranking and selection (:func:`rank`, :func:`select_top`)
    By log10 p ascending, ties by chromosome (1..22, X, Y, XY, MT, then others), position
    and .bim row. Optional clumping (:func:`clump`) follows plink 1.9 ``--clump``: index
    SNPs in p order with p <= p1 that are not yet in a clump; each takes into its clump
    the not yet clumped SNPs within ``kb`` kilobases with p <= p2 and r2 > r2 threshold.
    r2 is plink 1.9's: from two-locus haplotype frequencies estimated by maximum
    likelihood (double heterozygotes phased by EM, :func:`haplotype_r2`) in the cohort's
    kept samples called at both SNPs; not the squared correlation of allele counts
    (that is ``plink --r2``'s, which differs by up to ~0.15 on the same pair).

Output table (tab-separated, one row per selected SNP, best first):
    variant_id chrom pos effect_allele other_allele beta log10_p p bim_index
    ``p`` is the p-value text of the summary statistics; ``bim_index`` the 0-based row of
    the SNP in the .bim.
"""

from __future__ import annotations

import csv
import os
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..atomic import atomic_outputs
from ..errors import CmixError
from ..logs import log
from ..text import data_line_numbers, input_file, is_gzip, open_maybe_gzip
from .selection import CHROM_ORDER, chrom_code

if TYPE_CHECKING:
    from .sources import GenotypeFiles

OUTPUT_COLUMNS = ["variant_id", "chrom", "pos", "effect_allele", "other_allele", "beta",
                  "log10_p", "p", "bim_index"]
_MISSING_TEXT = {"", "NA", "#NA", "NAN", "NONE", ".", "NULL"}   # #NA: GWAS-SSF
_NUMBER = re.compile(r"^\s*\+?(\d+\.?\d*|\.\d+)(?:[eE]([+-]?\d+))?\s*$")
_CHROM_ORDER = {code: i + 1 for i, code in enumerate(CHROM_ORDER)}   # 1..22, X 23 .. MT 26


#: The fields a summary-statistics table is read into. ``beta`` and ``or`` are
#: alternatives (an odds ratio is read as beta = ln OR), as are ``p`` and ``log10p``
#: (-log10 p, read without underflow). A column map names any of them.
FIELDS = ("id", "chrom", "pos", "effect_allele", "other_allele", "beta", "or", "p", "log10p")
_ALTERNATIVE = {"beta": "or", "or": "beta", "p": "log10p", "log10p": "p"}


@dataclass(frozen=True)
class Layout:
    """A GWAS tool's output layout, recognised by its header alone.

    signature: header names that must all be present; any_of: groups of names of which
    each must have one present (names compare case-insensitively). columns: field ->
    header names tried in order, the first present one used; of the alternatives beta/or
    and p/log10p, the field listed first that has a column is used. Besides the
    :data:`FIELDS`: ``ref``/``alt`` (plink2: the other allele is whichever of REF/ALT is
    not A1, where no OMITTED/AX column names it), ``test`` (only rows with TEST = ADD are
    kept) and ``errcode`` (rows with an error code are read as missing). chrom_numbers:
    chromosome numbers the tool gives another meaning than plink's 23-26 (X, Y, XY, MT),
    number -> chromosome code, applied before :func:`cmix.genotypes.selection.chrom_code`.
    """

    name: str
    signature: tuple
    any_of: tuple = ()
    columns: dict = field(default_factory=dict)
    chrom_numbers: dict = field(default_factory=dict)


#: The layouts recognised by header, each checked against its tool's documented columns.
LAYOUTS = (
    # plink2 --glm (.glm.linear, .glm.logistic, .glm.logistic.hybrid, .glm.firth): the
    # PLINK 2.0 file-format page (cog-genomics.org/plink/2.0/formats#glm_linear and
    # #glm_logistic, as summarised in the formatbook's plink2_linear/plink2_logistic specs)
    # lists #CHROM POS ID REF ALT1 ALT PROVISIONAL_REF? A1 OMITTED A1_CT ALLELE_CT A1_FREQ
    # MACH_R2 FIRTH? TEST OBS_CT BETA|OR SE|LOG(OR)_SE L95 U95 T_STAT|Z_STAT F_STAT P
    # ERRCODE LOG10_P; `plink2 --help glm` (v2.00a3.5, installed here) names the non-A1
    # column AX ("Non-A1 alleles") and says 'log10' reports -log10(p), and its output
    # (checked here) has one TEST row per covariate unless 'hide-covar'.
    Layout("plink2 --glm", signature=("ID", "REF", "A1"), any_of=(("ALT", "ALT1"),),
           columns={"id": ("ID",), "chrom": ("#CHROM", "CHROM"), "pos": ("POS",),
                    "effect_allele": ("A1",), "other_allele": ("OMITTED", "AX"),
                    "ref": ("REF",), "alt": ("ALT", "ALT1"), "beta": ("BETA",),
                    "or": ("OR",), "log10p": ("LOG10_P",), "p": ("P",), "test": ("TEST",),
                    "errcode": ("ERRCODE",)}),
    # regenie step 2 (.regenie): rgcgithub.github.io/regenie/options ("Output") and its
    # example/test_bin_out_firth_Y1.regenie: CHROM GENPOS ID ALLELE0 ALLELE1 A1FREQ INFO N
    # TEST BETA SE CHISQ LOG10P [EXTRA]; ALLELE1 is the tested (effect) allele, GENPOS the
    # base-pair position, LOG10P is -log10 p, BETA is log OR for binary traits.
    Layout("regenie", signature=("CHROM", "GENPOS", "ID", "ALLELE0", "ALLELE1"),
           columns={"id": ("ID",), "chrom": ("CHROM",), "pos": ("GENPOS",),
                    "effect_allele": ("ALLELE1",), "other_allele": ("ALLELE0",),
                    "beta": ("BETA",), "log10p": ("LOG10P",),
                    "test": ("TEST",)}),
    # GWAS-SSF, the GWAS Catalog's format (ebi.ac.uk/gwas/docs/summary-statistics-format;
    # gwas-ssf_v1.1.0): chromosome base_pair_location effect_allele other_allele
    # beta|odds_ratio|hazard_ratio standard_error effect_allele_frequency
    # p_value|neg_log_10_p_value ci_upper ci_lower rsid variant_id info ref_allele n.
    # Chromosomes are the numbers 1-25 with "X=23, Y=24, MT=25" (no XY).
    Layout("GWAS-SSF", signature=("chromosome", "base_pair_location", "effect_allele",
                                  "other_allele"),
           columns={"id": ("rsid", "variant_id"), "chrom": ("chromosome",),
                    "pos": ("base_pair_location",), "effect_allele": ("effect_allele",),
                    "other_allele": ("other_allele",), "beta": ("beta",),
                    "or": ("odds_ratio",), "log10p": ("neg_log_10_p_value",),
                    "p": ("p_value",)},
           chrom_numbers={25: "MT"}),
    # SAIGE step 2 (saigegit.github.io/SAIGE-doc/docs/single_step2.html; formatbook
    # "saige", v1.1.3): CHR POS MarkerID (SNPID before 1.0) Allele1 Allele2 AC_Allele2
    # AF_Allele2 MissingRate|imputationInfo BETA SE Tstat var p.value ...; BETA is the
    # effect of Allele2, so Allele2 is the effect allele.
    Layout("SAIGE", signature=("Allele1", "Allele2", "p.value"),
           any_of=(("AC_Allele2", "AF_Allele2"),),
           columns={"id": ("MarkerID", "SNPID"), "chrom": ("CHR",), "pos": ("POS",),
                    "effect_allele": ("Allele2",), "other_allele": ("Allele1",),
                    "beta": ("BETA",), "p": ("p.value",)}),
    # METAL (genome.sph.umich.edu/wiki/METAL_Documentation, SCHEME STDERR): MarkerName
    # Allele1 Allele2 [Freq1 FreqSE] Effect StdErr P-value Direction; Effect is for
    # Allele1, alleles are written lower case; Chromosome/Position only with
    # TRACKPOSITIONS, so rows otherwise match the .bim by ID alone.
    Layout("METAL", signature=("MarkerName", "Allele1", "Allele2", "P-value"),
           columns={"id": ("MarkerName",), "chrom": ("Chromosome",), "pos": ("Position",),
                    "effect_allele": ("Allele1",), "other_allele": ("Allele2",),
                    "beta": ("Effect",), "p": ("P-value",)}),
    # BOLT-LMM --statsFile (BOLT-LMM manual v2.4, "Output"; the UK Biobank release of Loh
    # et al. 2018): SNP CHR BP GENPOS ALLELE1 ALLELE0 A1FREQ F_MISS|INFO BETA SE
    # P_BOLT_LMM_INF [P_BOLT_LMM]; ALLELE1 is the effect allele, BP the position (GENPOS
    # is in cM); P_BOLT_LMM (the mixture model) is used where present.
    Layout("BOLT-LMM", signature=("SNP", "CHR", "BP", "ALLELE1", "ALLELE0"),
           any_of=(("P_BOLT_LMM", "P_BOLT_LMM_INF"),),
           columns={"id": ("SNP",), "chrom": ("CHR",), "pos": ("BP",),
                    "effect_allele": ("ALLELE1",), "other_allele": ("ALLELE0",),
                    "beta": ("BETA",), "p": ("P_BOLT_LMM", "P_BOLT_LMM_INF")}),
)

#: A header of no known layout: field -> accepted names (case-insensitive). Two names
#: of one field present (or both of beta/or, or of p/log10p) is an error naming both.
#: A TEST column (plink 1.9 ``--linear``/``--logistic`` and plink2 ``--glm`` write one
#: row per covariate besides the SNP's) keeps only the rows with TEST = ADD.
GENERIC_COLUMNS = {
    "id": ("SNP", "ID", "RSID", "VARIANT_ID", "MARKERNAME", "MARKERID", "SNPID"),
    "chrom": ("CHR", "CHROM", "#CHROM", "CHROMOSOME"),
    "pos": ("BP", "POS", "POSITION", "BP_HG19", "BASE_PAIR_LOCATION"),
    "effect_allele": ("ALLELE1", "EFFECT_ALLELE", "A1", "EA"),
    "other_allele": ("ALLELE0", "OTHER_ALLELE", "A0", "A2", "NEA"),
    "beta": ("BETA", "EFFECT", "B"),
    "or": ("OR", "ODDS_RATIO"),
    "p": ("P", "PVAL", "P_VALUE", "PVALUE", "P-VALUE", "P.VALUE"),
    "log10p": ("LOG10P", "LOG10_P", "NEG_LOG10_P_VALUE", "NEG_LOG10_P", "MLOG10P",
               "-LOG10P", "-LOG10(P)"),
    "test": ("TEST",),
}


# ------------------------------------------------------------------------- reading
def _map_unique(values, func) -> np.ndarray:
    """Apply a str -> str function to each distinct value only (alleles and chromosome
    names repeat millions of times): object array (n,)."""
    codes, uniques = pd.factorize(pd.Series(np.asarray(values, dtype=object)).astype(str))
    mapped = np.array([func(u) for u in uniques] + [""], dtype=object)
    return mapped[codes]


def parse_log10_p(text, path="", column="p", lines=None) -> np.ndarray:
    """log10 of p-values given as text: float64 (n,), -inf for p = 0, NaN for missing.

    The mantissa and exponent are split from the text, so values far below the smallest
    double (``"1.2E-400"``) keep their order. Text that is not a number, and numbers
    outside [0, 1], raise :class:`CmixError` naming the file, line and column.
    """
    text = pd.Series(np.asarray(text, dtype=object)).astype(str).str.strip()
    fast = pd.to_numeric(text, errors="coerce").to_numpy(dtype=float)
    easy = np.isfinite(fast) & (fast >= 1e-300) & (fast <= 1.0)
    if easy.all():   # no underflow, text or missing: plain floats are exact enough
        return np.log10(fast)
    out = np.empty(len(text))
    out[easy] = np.log10(fast[easy])
    hard = np.flatnonzero(~easy)
    out[hard] = _parse_log10_p_text(text.iloc[hard].reset_index(drop=True), path, column,
                                    (np.arange(1, len(text) + 1) if lines is None
                                     else np.asarray(lines))[hard])
    return out


def _parse_log10_p_text(text: pd.Series, path, column, lines) -> np.ndarray:
    """The slow path of :func:`parse_log10_p`: split mantissa and exponent by regex."""
    missing = text.str.upper().isin(_MISSING_TEXT).to_numpy()
    parts = text.str.extract(_NUMBER)
    bad = parts[0].isna().to_numpy() & ~missing
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        line = lines[i] if lines is not None else i + 1
        raise CmixError(f"{path}, line {line}, column {column}: expected a p-value (a number "
                        f"between 0 and 1), found {text.iloc[i]!r}")
    mantissa = pd.to_numeric(parts[0], errors="coerce").to_numpy(dtype=float)
    exponent = pd.to_numeric(parts[1], errors="coerce").fillna(0).to_numpy(dtype=float)
    with np.errstate(divide="ignore"):
        log10_p = np.log10(mantissa) + exponent
    log10_p[missing] = np.nan
    above = log10_p > 1e-12
    if above.any():
        i = int(np.flatnonzero(above)[0])
        line = lines[i] if lines is not None else i + 1
        raise CmixError(f"{path}, line {line}, column {column}: p-value {text.iloc[i]!r} is "
                        "above 1")
    return np.minimum(log10_p, 0.0)


def resolve_columns(header: list[str], column_map: dict | None, path) -> tuple[str, dict]:
    """Recognise the layout of a summary-statistics header and pick its columns.

    Returns (layout name, {field: header name}): the name is one of :data:`LAYOUTS` or
    "generic" (the :data:`GENERIC_COLUMNS` names). ``column_map`` ({field: header name},
    fields as :data:`FIELDS`) overrides the choice field by field; naming ``beta`` drops
    ``or`` and naming ``p`` drops ``log10p`` (and the other way round). Raises
    :class:`CmixError` naming the file for: a header that fits two layouts, two candidate
    columns for one field of a generic header (naming both), a column-map name not in the
    header, a field with no column.
    """
    override = _column_map_fields(column_map)
    upper, twice = _header_names(header)
    layout = _matching_layout(upper, path)
    if layout is not None:
        name, looked = layout.name, layout.columns
        chosen = _layout_columns(layout, upper)
    else:
        name, looked = "generic", GENERIC_COLUMNS
        chosen = _generic_columns(upper, override, path)
    _apply_column_map(chosen, override, header, upper, path)
    _check_required_columns(chosen, looked, header, path)
    if "other_allele" in chosen:
        chosen.pop("ref", None)
        chosen.pop("alt", None)
    for fld, col in chosen.items():
        if col.upper() in twice:
            raise CmixError(f"{path}: the header names the column {col!r} ({fld}) twice")
    return name, chosen


def _column_map_fields(column_map: dict | None) -> dict:
    """The column map's named fields ({field: header name}, empty names dropped); an
    unknown field raises."""
    override = {k: v for k, v in (column_map or {}).items() if v}
    unknown = set(override) - set(FIELDS)
    if unknown:
        raise CmixError(f"column map: unknown field(s) {sorted(unknown)}; fields are "
                        f"{', '.join(FIELDS)}")
    return override


def _header_names(header: list[str]) -> tuple[dict, set]:
    """({upper-case name: the header's first spelling of it}, upper-case names the
    header has more than once)."""
    upper: dict[str, str] = {}
    twice = set()
    for h in header:
        if h.upper() in upper:
            twice.add(h.upper())
        upper.setdefault(h.upper(), h)
    return upper, twice


def _matching_layout(upper: dict, path) -> Layout | None:
    """The one :data:`LAYOUTS` entry whose signature the header has (None: none); a
    header that fits two raises."""
    have = lambda name: name.upper() in upper          # noqa: E731
    matches = [lay for lay in LAYOUTS if all(map(have, lay.signature))
               and all(any(map(have, group)) for group in lay.any_of)]
    if len(matches) > 1:
        raise CmixError(
            f"{path}: ambiguous header: it has the columns of both "
            + " and ".join(f"{lay.name} ({' '.join(lay.signature)})" for lay in matches)
            + "; name the columns with the column map (--col-* or sumstats_columns)")
    return matches[0] if matches else None


def _layout_columns(layout: Layout, upper: dict) -> dict:
    """{field: header name} of a recognised layout: each field's first listed name the
    header has; of beta/or and p/log10p, only the one the layout lists first."""
    chosen: dict[str, str] = {}
    for fld, names in layout.columns.items():
        found = [upper[n.upper()] for n in names if n.upper() in upper]
        if found:
            chosen[fld] = found[0]
    for pair in (("beta", "or"), ("p", "log10p")):
        present = [f for f in layout.columns if f in pair and f in chosen]
        for f in present[1:]:
            del chosen[f]
    return chosen


def _generic_columns(upper: dict, override: dict, path) -> dict:
    """{field: header name} of a header of no known layout, by :data:`GENERIC_COLUMNS`.
    Two candidates for one field, or both of beta/or or of p/log10p, raise unless the
    column map names that field."""
    named = lambda f: f in override or _ALTERNATIVE.get(f) in override   # noqa: E731
    chosen: dict[str, str] = {}
    for fld, names in GENERIC_COLUMNS.items():
        found = [upper[n] for n in names if n in upper]
        if len(found) > 1 and not named(fld):
            raise CmixError(f"{path}: ambiguous header: columns {found[0]!r} and "
                            f"{found[1]!r} could both be the {fld} column; name the "
                            "one to use with the column map (--col-* or "
                            "sumstats_columns)")
        if found:
            chosen[fld] = found[0]
    for a, b in (("beta", "or"), ("p", "log10p")):
        if a in chosen and b in chosen and not named(a):
            raise CmixError(f"{path}: ambiguous header: columns {chosen[a]!r} ({a}) and "
                            f"{chosen[b]!r} ({b}) could both be used; name the one to "
                            "use with the column map (--col-* or sumstats_columns)")
    return chosen


def _apply_column_map(chosen: dict, override: dict, header: list[str], upper: dict,
                      path) -> None:
    """Put the column map's columns into ``chosen`` (in place); a named field drops its
    alternative (beta/or, p/log10p) unless that is named too. A name not in the header
    (exactly or case-insensitively) raises."""
    for fld, want in override.items():
        actual = want if want in header else upper.get(want.upper())
        if actual is None:
            raise CmixError(f"{path}: column map: {fld} = {want!r} is not a column (header "
                            f"has {' '.join(header)})")
        chosen[fld] = actual
        if _ALTERNATIVE.get(fld) not in override:
            chosen.pop(_ALTERNATIVE.get(fld), None)


def _check_required_columns(chosen: dict, looked: dict, header: list[str], path) -> None:
    """Raise naming the first field without a column: effect allele, other allele (or
    REF and ALT), beta or OR, p or -log10 p, and the ID or else chromosome and position.
    looked: field -> the names looked for, for the message."""
    def missing(fld, *alternatives):
        want = [n for f in (fld, *alternatives) for n in looked.get(f, ())]
        raise CmixError(f"{path}: no column for {fld} (looked for "
                        f"{' or '.join(repr(w) for w in want)}; header has "
                        f"{' '.join(header)}); name it with the column map (--col-* or "
                        "sumstats_columns)")

    if "effect_allele" not in chosen:
        missing("effect_allele")
    if "other_allele" not in chosen and not ("ref" in chosen and "alt" in chosen):
        missing("other_allele")
    if "beta" not in chosen and "or" not in chosen:
        missing("beta", "or")
    if "p" not in chosen and "log10p" not in chosen:
        missing("p", "log10p")
    if "id" not in chosen and not ("chrom" in chosen and "pos" in chosen):
        missing("id" if ("chrom" in chosen) == ("pos" in chosen) else
                "pos" if "chrom" in chosen else "chrom")


def describe_columns(layout: str, columns: dict) -> str:
    """One line naming the recognised layout and the column read for each field."""
    parts = []
    for fld in FIELDS:
        if fld in columns:
            text = {"or": "beta=ln({})", "log10p": "p=10^-{}"}.get(fld, fld + "={}")
            parts.append(text.format(columns[fld]))
        elif fld == "other_allele" and "ref" in columns:
            parts.append(f"other_allele={columns['ref']}/{columns['alt']} (whichever is not "
                         f"{columns['effect_allele']})")
    if "test" in columns:
        parts.append(f"rows with {columns['test']} = ADD")
    how = "generic column names" if layout == "generic" else f"{layout} layout"
    return f"{how}: " + ", ".join(parts)


def _read_header(path) -> tuple[list[str], str, int]:
    """(header names, pandas separator, the header's 1-based line number) of a
    summary-statistics file: the header is its first line that is not blank (blank
    lines above it are skipped); a UTF-8 byte-order mark before the first name is
    dropped."""
    text, lineno = "", 0
    try:
        with open_maybe_gzip(path) as fh:
            for lineno, text in enumerate(fh, 1):
                text = text.lstrip("\ufeff")
                if text.strip():
                    break
    except (OSError, EOFError, UnicodeDecodeError) as err:
        raise CmixError(f"{path}: cannot read ({err})") from None
    if not text.strip():
        raise CmixError(f"{path}: empty file (expected a header line)" if lineno == 0 else
                        f"{path}: no header line (its {lineno} lines are blank)")
    if "\t" in text:
        return [h.strip() for h in text.strip("\r\n").split("\t")], "\t", lineno
    return text.split(), r"\s+", lineno


def _numbers(text: pd.Series, path, column, lines, what: str) -> np.ndarray:
    """float64 (n,) of number text, NaN for missing text (NA, ., empty); other text raises
    :class:`CmixError` naming the line and column."""
    values = pd.to_numeric(text, errors="coerce").to_numpy(dtype=float, copy=True)
    nan = np.flatnonzero(np.isnan(values))     # text only where it is not a number
    if len(nan):
        rest = text.iloc[nan].str.strip()
        bad = np.flatnonzero(~rest.str.upper().isin(_MISSING_TEXT).to_numpy())
        if len(bad):
            i = nan[bad[0]]
            raise CmixError(f"{path}, line {lines[i]}, column {column}: expected {what}, "
                            f"found {rest.iloc[bad[0]]!r}")
    return values


def _p_text(log10_p: np.ndarray) -> np.ndarray:
    """p-value text from log10 p (object (n,)): 6 significant digits, mantissa and
    exponent written apart below 1e-300 so nothing underflows; "0" for -inf, "NA" NaN.
    A Python loop: used on the selected rows only."""
    log10_p = np.asarray(log10_p, dtype=float)
    out = np.full(len(log10_p), "NA", dtype=object)
    out[log10_p == -np.inf] = "0"
    for i in np.flatnonzero(np.isfinite(log10_p)):
        lp = float(log10_p[i])
        if lp > -300:
            out[i] = f"{10.0 ** lp:.6g}"
        else:
            exponent = int(np.floor(lp))
            mantissa = float(f"{10.0 ** (lp - exponent):.6g}")
            if mantissa >= 10:
                mantissa, exponent = mantissa / 10, exponent + 1
            out[i] = f"{mantissa:g}e{exponent}"
    return out


def _with_p_text(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with the p text of rows read from a -log10 p column (p = "") made from
    their log10_p (:func:`_p_text`)."""
    empty = (table["p"] == "").to_numpy()
    if not empty.any():
        return table
    table = table.copy()
    table.loc[empty, "p"] = _p_text(table["log10_p"].to_numpy()[empty])
    return table


def _plink2_other_allele(a1, ref, alt, path, columns, lines) -> np.ndarray:
    """plink2 --glm rows without an OMITTED/AX column: the other allele is REF where A1 is
    an ALT allele and ALT where A1 is REF (object (n,)). An A1 that is neither raises."""
    other = np.where(a1 == ref, alt, ref)
    odd = np.flatnonzero((a1 != ref) & (a1 != alt))
    for i in odd:   # multi-allelic rows: A1 must be one of the comma-separated ALTs
        if a1[i] not in str(alt[i]).split(","):
            raise CmixError(f"{path}, line {lines[i]}, column {columns['effect_allele']}: A1 "
                            f"allele {a1[i]!r} is neither REF {ref[i]!r} nor ALT {alt[i]!r}")
    return other


def read_sumstats(path: str | os.PathLike, column_map: dict | None = None,
                  quiet: bool = False) -> pd.DataFrame:
    """Read summary statistics into a table with one row per data line.

    The layout is recognised from the header (:func:`resolve_columns`: plink2 --glm,
    regenie, GWAS-SSF, SAIGE, METAL, BOLT-LMM, else generic names; ``column_map``
    overrides) and logged (unless ``quiet``) with the columns used. Rows of a TEST
    column other than ADD (plink2's and plink 1.9's covariate rows, regenie's
    non-additive tests), in a recognised layout or read by common names, are left out
    and counted in the log; rows with a plink2 ERRCODE have a missing beta.

    Columns: id, chrom (str, a chromosome code,
    :func:`cmix.genotypes.selection.chrom_code`, GWAS-SSF's 25 read as MT; "" when the
    file has none), pos (int64,
    -1 when none), effect_allele, other_allele (upper-case str), beta (float64, NaN
    missing; ln OR where the file gives odds ratios), log10_p (float64), p (the p-value
    text; "" where read from -log10 p: :func:`select_top` and the output write it from
    log10_p), line (1-based line number in the file). The layout
    name and the columns are in ``.attrs["layout"]`` and ``.attrs["columns"]``.

    A row whose field count is not the header's, a beta or odds ratio that is not a
    finite number (an odds ratio not > 0) or missing text, a position that is not an
    integer, a p or -log10 p out of range and a truncated .gz raise :class:`CmixError`
    naming the file and line.
    """
    path = input_file(path, "summary statistics")
    header, sep, header_line = _read_header(path)
    layout, columns = resolve_columns(header, column_map, path)
    raw, lines = _read_columns(path, header, sep, columns, header_line)
    raw, lines, note = _additive_rows(raw, lines, columns, path)
    if not quiet:
        log(f"{path}: {describe_columns(layout, columns)}{note}")
    out = pd.DataFrame(index=raw.index)
    out["id"] = raw[columns["id"]].str.strip() if "id" in columns else ""
    out["chrom"] = (_chrom_codes(raw[columns["chrom"]], layout) if "chrom" in columns
                    else np.full(len(raw), "", dtype=object))
    out["pos"] = _positions(raw, columns, lines, path)
    out["effect_allele"], out["other_allele"] = _alleles(raw, columns, lines, path)
    out["beta"] = _betas(raw, columns, lines, path)
    for name, values in _p_values(raw, columns, lines, path).items():
        out[name] = values
    out["line"] = lines
    out.attrs["layout"], out.attrs["columns"] = layout, dict(columns)
    return out


def _read_columns(path, header: list[str], sep: str, columns: dict, header_line: int = 1
                  ) -> tuple[pd.DataFrame, np.ndarray]:
    """The used columns of every data row below the header (on line ``header_line``) as
    text (no missing-value parsing), and the 1-based line number of each row. Every row
    must have the header's fields: with a field too many or too few, the columns of a
    row shift and a beta would be read from another column."""
    lines = data_line_numbers(path, len(header), "\t" if sep == "\t" else None,
                              "summary statistics", first=header_line)
    try:
        raw = pd.read_csv(path, sep=sep, dtype=str, usecols=list(dict.fromkeys(columns.values())),
                          na_filter=False, compression="gzip" if is_gzip(path) else None,
                          engine="c",
                          quoting=csv.QUOTE_NONE, encoding="utf-8-sig",
                          skiprows=header_line - 1)
    except (pd.errors.ParserError, ValueError) as err:
        raise CmixError(f"{path}: cannot parse as a table ({err})") from None
    if len(raw) != len(lines):
        raise CmixError(f"{path}: read {len(raw)} rows but the file has {len(lines)} data "
                        "lines; cannot parse it as a table")
    return raw, lines


def _additive_rows(raw: pd.DataFrame, lines: np.ndarray, columns: dict, path
                   ) -> tuple[pd.DataFrame, np.ndarray, str]:
    """The rows with TEST = ADD where the layout has a test column (all rows otherwise;
    the index stays the data-row number), their line numbers, and a note for the log
    on the rows left out ("" when none)."""
    if "test" not in columns:
        return raw, lines, ""
    test = raw[columns["test"]]
    add = (test == "ADD").to_numpy()
    if not add.all():      # tab-separated fields may carry spaces
        test = test.str.strip()
        add = (test == "ADD").to_numpy()
    if not add.any() and len(raw):
        raise CmixError(f"{path}: no row with {columns['test']} = ADD (the additive "
                        f"test); tests found: {', '.join(sorted(set(test))[:5])}")
    note = ""
    if not add.all():
        note = f"; {int((~add).sum())} rows of other tests (covariates) left out"
    return raw[add], lines[add], note


def _chrom_codes(chrom: pd.Series, layout: str) -> np.ndarray:
    """Chromosome codes, object (n,): :func:`cmix.genotypes.selection.chrom_code` of
    each name, after the layout's own chromosome numbers (:attr:`Layout.chrom_numbers`:
    GWAS-SSF's 25 is MT, not plink's XY)."""
    numbers = next((lay.chrom_numbers for lay in LAYOUTS if lay.name == layout), {})

    def code(name: str) -> str:
        text = name.strip()
        if text.isascii() and text.isdigit() and int(text) in numbers:
            return numbers[int(text)]
        return chrom_code(text)

    return _map_unique(chrom, code)


def _positions(raw: pd.DataFrame, columns: dict, lines, path) -> np.ndarray:
    """Base-pair positions, int64 (n,), -1 when the file has no position column; a
    position that is not an integer raises naming its line."""
    if "pos" not in columns:
        return np.full(len(raw), -1, dtype=np.int64)
    pos = pd.to_numeric(raw[columns["pos"]], errors="coerce").to_numpy(dtype=float)
    bad = ~(np.isfinite(pos) & (pos % 1 == 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise CmixError(f"{path}, line {lines[i]}, column {columns['pos']}: expected an "
                        f"integer position, found {raw[columns['pos']].iloc[i]!r}")
    return pos.astype(np.int64)


def _alleles(raw: pd.DataFrame, columns: dict, lines, path) -> tuple[np.ndarray, np.ndarray]:
    """(effect allele, other allele), upper-case object arrays (n,); without an other
    allele column, plink2's REF/ALT give it (:func:`_plink2_other_allele`)."""
    upper_alleles = lambda col: _map_unique(raw[col], lambda a: a.strip().upper())  # noqa: E731
    effect = upper_alleles(columns["effect_allele"])
    if "other_allele" in columns:
        return effect, upper_alleles(columns["other_allele"])
    return effect, _plink2_other_allele(effect, upper_alleles(columns["ref"]),
                                        upper_alleles(columns["alt"]), path, columns, lines)


def _betas(raw: pd.DataFrame, columns: dict, lines, path) -> np.ndarray:
    """Effect sizes, float64 (n,): the beta column, or ln of the odds-ratio column; NaN
    for missing text and for rows with a plink2 error code. A beta that is not finite or
    an odds ratio not > 0 raises naming its line."""
    if "beta" in columns:
        col = columns["beta"]
        beta = _numbers(raw[col], path, col, lines, "a number")
        infinite = np.isinf(beta)
        what = "a finite effect size"
    else:
        col = columns["or"]
        odds = _numbers(raw[col], path, col, lines, "an odds ratio")
        infinite = ~(np.isfinite(odds) & (odds > 0)) & ~np.isnan(odds)
        with np.errstate(divide="ignore", invalid="ignore"):
            beta = np.log(odds)
        what = "a finite odds ratio > 0"
    if infinite.any():
        i = int(np.flatnonzero(infinite)[0])
        raise CmixError(f"{path}, line {lines[i]}, column {col}: expected {what}, found "
                        f"{raw[col].iloc[i].strip()!r}")
    if "errcode" in columns:
        errcode = raw[columns["errcode"]]
        failed = ~errcode.isin([".", ""]).to_numpy()
        failed[failed] = ~errcode[failed].str.strip().isin([".", ""]).to_numpy()
        beta[failed] = np.nan
    return beta


def _p_values(raw: pd.DataFrame, columns: dict, lines, path) -> dict:
    """{"p": p-value text, "log10_p": float64 (n,)} in the order the columns are added:
    from a p column, its text and :func:`parse_log10_p`; from a -log10 p column,
    log10_p first and "" text (made from log10_p for the selected rows only,
    :func:`_with_p_text`). A -log10 p below 0 raises naming its line."""
    if "p" in columns:
        p_text = raw[columns["p"]].str.strip()
        return {"p": p_text, "log10_p": parse_log10_p(p_text, path, columns["p"], lines)}
    col = columns["log10p"]
    neg = _numbers(raw[col], path, col, lines, "-log10 p (a number >= 0)")
    below = neg < -1e-12
    if below.any():
        i = int(np.flatnonzero(below)[0])
        raise CmixError(f"{path}, line {lines[i]}, column {col}: -log10 p "
                        f"{raw[col].iloc[i].strip()!r} is below 0 (p above 1)")
    return {"log10_p": np.minimum(-neg, 0.0), "p": ""}


# ---------------------------------------------------------------------- harmonising
def _normalise_chrom(chrom) -> pd.Series:
    return pd.Series(_map_unique(chrom, chrom_code))


def chrom_sort_key(chrom) -> np.ndarray:
    """Sort key for chromosome names: 1..22, X=23, Y=24, XY=25, MT=26, others after."""
    codes, uniques = pd.factorize(pd.Series(np.asarray(chrom, dtype=object)).astype(str))
    names = [chrom_code(u) for u in uniques]
    others = sorted(n for n in set(names) if n not in _CHROM_ORDER)
    order = {**{o: 100 + i for i, o in enumerate(others)}, **_CHROM_ORDER}
    return np.array([order[n] for n in names] + [999], dtype=np.int64)[codes]


def harmonise(sumstats: pd.DataFrame, bim: pd.DataFrame, extract: set[str] | None = None,
              keep_ambiguous: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Match summary statistics to the .bim and orient them to its A1 allele.

    sumstats: from :func:`read_sumstats`. bim: :func:`cmix.genotypes.plink.read_bim` table.
    extract: QC-passed variant IDs (None = all). Returns (table, steps): the table has
    the :data:`OUTPUT_COLUMNS` (one row per .bim variant, unsorted) plus ``line``;
    steps has columns step, n_removed, n_remaining.
    """
    steps = []
    df = sumstats.reset_index(drop=True)
    steps.append(("read", 0, len(df)))
    df = _count_step(steps, "missing beta or p", len(df),
                     df[df["beta"].notna() & df["log10_p"].notna()])
    bim_a1 = _map_unique(bim["a1"], str.upper)
    bim_a2 = _map_unique(bim["a2"], str.upper)
    alleles = _sumstats_alleles(df)
    idx, n_id = _bim_rows(df, bim, bim_a1, bim_a2, alleles)
    matched = idx >= 0
    steps.append((f"matched to .bim ({n_id} by ID, {int(matched.sum()) - n_id} by chrom:pos)",
                  int((~matched).sum()), int(matched.sum())))
    df, idx = df[matched].reset_index(drop=True), idx[matched]
    ok, flip, ambiguous, n_comp = _orient_alleles(
        *(a[matched] for a in alleles), bim_a1[idx], bim_a2[idx])
    steps.append(("alleles match the .bim", int((~ok).sum()), int(ok.sum())))
    steps.append((f"on the other strand, complemented: {n_comp}", 0, int(ok.sum())))
    df = df.assign(bim_index=idx, flip=flip, ambiguous=ambiguous)[ok]
    df = _filter_matched(df, bim, extract, keep_ambiguous, steps)
    steps.append((f"allele-swapped, beta sign flipped: {int(df['flip'].sum())}", 0, len(df)))
    return _oriented_table(df, bim), pd.DataFrame(steps, columns=["step", "n_removed",
                                                                  "n_remaining"])


def _count_step(steps: list, name: str, n_before: int, df: pd.DataFrame) -> pd.DataFrame:
    """Append (name, rows removed, rows left) to ``steps``; return ``df``."""
    steps.append((name, n_before - len(df), len(df)))
    return df


def _sumstats_alleles(df: pd.DataFrame) -> tuple[np.ndarray, ...]:
    """(effect, other, effect complemented, other complemented): object arrays (n,),
    the complement being the other strand's base (A<->T, C<->G). Only single-base SNPs
    (both alleles one base) have a complement; for the other rows (indels, multi-base
    alleles) it is None, which matches no allele: they match only as given or swapped."""
    ea = df["effect_allele"].to_numpy()
    oa = df["other_allele"].to_numpy()
    table = str.maketrans("ACGT", "TGCA")
    ea_c = _map_unique(ea, lambda a: a.translate(table))
    oa_c = _map_unique(oa, lambda a: a.translate(table))
    snp = ((df["effect_allele"].str.len() == 1) & (df["other_allele"].str.len() == 1)
           ).to_numpy()
    ea_c[~snp] = oa_c[~snp] = None
    return ea, oa, ea_c, oa_c


def _bim_rows(df: pd.DataFrame, bim: pd.DataFrame, bim_a1, bim_a2, alleles
              ) -> tuple[np.ndarray, int]:
    """Each summary-statistics row's .bim row, int (n,), -1 where unmatched, and how many
    matched by ID. Rows are matched by variant ID (when the .bim IDs are unique), the
    rest by chromosome:position where the .bim has the same two alleles, for a SNP on
    either strand (:func:`_sumstats_alleles`; the first such .bim row)."""
    ea, oa, ea_c, oa_c = alleles
    by_id = pd.Index(bim["variant_id"])
    idx = by_id.get_indexer(df["id"]) if by_id.is_unique else np.full(len(df), -1)
    n_id = int((idx >= 0).sum())
    unmatched = np.flatnonzero(idx < 0)
    if len(unmatched):
        key_bim = pd.DataFrame({"chrom": _normalise_chrom(bim["chrom"]).to_numpy(),
                                "pos": bim["pos"].to_numpy(), "row": np.arange(len(bim))})
        q = pd.DataFrame({"chrom": _normalise_chrom(df["chrom"]).to_numpy()[unmatched],
                          "pos": df["pos"].to_numpy()[unmatched], "q": unmatched})
        cand = q.merge(key_bim, on=["chrom", "pos"], how="inner")
        qi, rows = cand["q"].to_numpy(), cand["row"].to_numpy()
        same = lambda x, y: ((x == bim_a1[rows]) & (y == bim_a2[rows])) | \
                            ((x == bim_a2[rows]) & (y == bim_a1[rows]))
        ok = same(ea[qi], oa[qi]) | same(ea_c[qi], oa_c[qi])
        cand = cand[ok].sort_values(["q", "row"]).drop_duplicates("q")
        idx[cand["q"].to_numpy()] = cand["row"].to_numpy()
    return idx, n_id


def _orient_alleles(ea, oa, ea_c, oa_c, a1, a2):
    """Compare matched rows' alleles (as given and complemented) with their .bim A1/A2,
    all object (n,). Returns (ok: alleles are the .bim's, flip: the effect allele is
    the .bim A2, ambiguous: the .bim alleles are A/T or C/G, n complemented); bool (n,)
    arrays and an int. Strand-ambiguous SNPs and indels (complement None,
    :func:`_sumstats_alleles`) are never complemented."""
    direct = (ea == a1) & (oa == a2)
    swapped = (ea == a2) & (oa == a1)
    ambiguous = (((a1 == "A") & (a2 == "T")) | ((a1 == "T") & (a2 == "A"))
                 | ((a1 == "C") & (a2 == "G")) | ((a1 == "G") & (a2 == "C")))
    comp_direct = (ea_c == a1) & (oa_c == a2) & ~ambiguous
    comp_swapped = (ea_c == a2) & (oa_c == a1) & ~ambiguous
    ok = direct | swapped | comp_direct | comp_swapped
    n_comp = int(((comp_direct | comp_swapped) & ~(direct | swapped)).sum())
    flip = (swapped | comp_swapped) & ~(direct | comp_direct)
    return ok, flip, ambiguous, n_comp


def _filter_matched(df: pd.DataFrame, bim: pd.DataFrame, extract: set[str] | None,
                    keep_ambiguous: bool, steps: list) -> pd.DataFrame:
    """Drop strand-ambiguous SNPs (unless ``keep_ambiguous``) and SNPs not in
    ``extract``, then keep the smallest p of each .bim variant (ties: first in the
    file), appending each step to ``steps``."""
    n = len(df)
    if not keep_ambiguous:
        df = _count_step(steps, "strand-ambiguous (A/T, C/G) dropped", n, df[~df["ambiguous"]])
    else:
        steps.append((f"strand-ambiguous kept: {int(df['ambiguous'].sum())}", 0, n))
    if extract is not None:
        n = len(df)
        ids = bim["variant_id"].to_numpy()[df["bim_index"].to_numpy()]
        df = _count_step(steps, "QC-passed (in --extract)", n,
                         df[pd.Index(ids).isin(list(extract))])
    n = len(df)
    df = df.sort_values(["bim_index", "log10_p", "line"], kind="stable")
    return _count_step(steps, "duplicates resolved (smallest p kept)", n,
                       df.drop_duplicates("bim_index"))


def _oriented_table(df: pd.DataFrame, bim: pd.DataFrame) -> pd.DataFrame:
    """The :data:`OUTPUT_COLUMNS` plus ``line`` of the harmonised rows: the .bim's ID,
    position and alleles (effect = A1), beta sign-flipped where the effect allele was
    the .bim A2."""
    bi = df["bim_index"].to_numpy()
    out = pd.DataFrame({
        "variant_id": bim["variant_id"].to_numpy()[bi],
        "chrom": bim["chrom"].to_numpy()[bi],
        "pos": bim["pos"].to_numpy()[bi],
        "effect_allele": bim["a1"].to_numpy()[bi],
        "other_allele": bim["a2"].to_numpy()[bi],
        "beta": np.where(df["flip"].to_numpy(), -df["beta"].to_numpy(), df["beta"].to_numpy()),
        "log10_p": df["log10_p"].to_numpy(),
        "p": df["p"].to_numpy(),
        "bim_index": bi.astype(np.int64),
        "line": df["line"].to_numpy(),
    })
    return out.reset_index(drop=True)


def rank(table: pd.DataFrame) -> pd.DataFrame:
    """Sort by log10_p ascending, ties by chromosome, position, .bim row."""
    key = table.assign(_chrom=chrom_sort_key(table["chrom"]))
    key = key.sort_values(["log10_p", "_chrom", "pos", "bim_index"], kind="stable")
    return key.drop(columns="_chrom").reset_index(drop=True)


# ------------------------------------------------------------------------- clumping
class _GenotypeCache:
    """Allele counts of single SNPs for the kept samples, LRU-cached (bounded bytes)."""

    def __init__(self, bf, sample_idx, max_bytes=2 << 30):
        self._read = lambda i: bf.read(np.array([i]), sample_idx)[0]
        self._cache: OrderedDict[int, np.ndarray] = OrderedDict()
        self._max = max(1, max_bytes // max(1, len(sample_idx) if sample_idx is not None
                                               else bf.n_samples))

    def get(self, i: int) -> np.ndarray:
        if i in self._cache:
            self._cache.move_to_end(i)
            return self._cache[i]
        g = self._read(i)
        self._cache[i] = g
        if len(self._cache) > self._max:
            self._cache.popitem(last=False)
        return g


def haplotype_r2(g0: np.ndarray, g: np.ndarray) -> np.ndarray:
    """r2 between one SNP and several from maximum-likelihood two-locus haplotype
    frequencies, as plink 1.9 ``--clump`` (and ``--ld``) computes it.

    g0: int8 (n_samples,); g: int8 (n_snps, n_samples) allele counts, -1 = missing.
    Each pair uses the samples called at both SNPs. Haplotype counts are known except
    for double heterozygotes; the count x of those in the coupling phase solves the EM
    fixed point x (AB + CD) = d AB (A = f11 + x, B = f22 + x, C = f12 + d - x,
    D = f21 + d - x, d = double heterozygotes), a cubic; of its real roots in [0, d] the
    one with the highest likelihood is taken (plink's em_phase_hethet does the same).
    Then r2 = D'^2 / (p1 (1 - p1) q1 (1 - q1)). Returns float64 (n_snps,), 0 where a SNP
    is monomorphic among the jointly called samples.
    """
    g = np.atleast_2d(g)
    k = g.shape[0]
    both = (g >= 0) & (g0 >= 0)[None, :]
    code = np.where(both, g0[None, :].astype(np.int16) * 3 + g, 9)
    n = np.stack([(code == c).sum(1) for c in range(9)], axis=1).astype(np.float64)
    n = n.reshape(k, 3, 3)  # n[:, count at g0, count at g]
    f11 = 2 * n[:, 2, 2] + n[:, 2, 1] + n[:, 1, 2]
    f12 = 2 * n[:, 2, 0] + n[:, 2, 1] + n[:, 1, 0]
    f21 = 2 * n[:, 0, 2] + n[:, 1, 2] + n[:, 0, 1]
    f22 = 2 * n[:, 0, 0] + n[:, 1, 0] + n[:, 0, 1]
    d = n[:, 1, 1]
    h = f11 + f12 + f21 + f22 + 2 * d
    # 2x^3 + a2 x^2 + a1 x + a0 = 0, roots as eigenvalues of the companion matrix
    a2 = f11 + f22 - f12 - f21 - 3 * d
    a1 = f11 * f22 + (f12 + d) * (f21 + d) - d * (f11 + f22)
    a0 = -d * f11 * f22
    companion = np.zeros((k, 3, 3))
    companion[:, 1, 0] = companion[:, 2, 1] = 1.0
    companion[:, 0, 2], companion[:, 1, 2], companion[:, 2, 2] = -a0 / 2, -a1 / 2, -a2 / 2
    roots = np.linalg.eigvals(companion) if k else np.zeros((0, 3))
    best, best_ll = np.zeros(k), np.full(k, -np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        for r in range(3):
            x = roots[:, r]
            ok = (np.abs(x.imag) < 1e-6) & (x.real >= -1e-9) & (x.real <= d + 1e-9)
            x = np.clip(x.real, 0, d)
            p11, p22, p12, p21 = (f11 + x) / h, (f22 + x) / h, (f12 + d - x) / h, (f21 + d - x) / h
            ll = sum(np.where(c > 0, c * np.log(p), 0.0)
                     for c, p in ((f11, p11), (f22, p22), (f12, p12), (f21, p21),
                                  (d, p11 * p22 + p12 * p21)))
            take = ok & (ll > best_ll)
            best[take], best_ll[take] = x[take], ll[take]
        p11 = (f11 + best) / h
        p1, q1 = (f11 + f12 + d) / h, (f11 + f21 + d) / h
        r2 = (p11 - p1 * q1) ** 2 / (p1 * (1 - p1) * q1 * (1 - q1))
    return np.where(np.isfinite(r2), r2, 0.0)


def clump(ranked: pd.DataFrame, bf, sample_idx=None, *, r2: float = 0.5, kb: float = 250,
          p1: float = 1.0, p2: float | None = None, max_index: int | None = None) -> np.ndarray:
    """Greedy LD clumping with plink 1.9 ``--clump`` rules; returns index-SNP rows.

    ranked: :func:`rank` output (best first). bf: the opened .bed; sample_idx: rows of
    the samples whose genotypes give r2 (None = all). A SNP joins an index SNP's clump
    when it is on the same chromosome within ``kb`` * 1000 bp, has p <= p2 (default p1),
    is not already in a clump, and r2 > ``r2``. Stops after ``max_index`` index SNPs.
    Returns int64 positions into ``ranked`` of the index SNPs, best first.
    """
    from ..logs import progress

    p2 = p1 if p2 is None else p2
    log_p1, log_p2 = np.log10(p1) if p1 > 0 else -np.inf, np.log10(p2) if p2 > 0 else -np.inf
    n = len(ranked)
    log_p = ranked["log10_p"].to_numpy()
    chrom = chrom_sort_key(ranked["chrom"])
    pos = ranked["pos"].to_numpy(np.int64)
    bim_index = ranked["bim_index"].to_numpy(np.int64)
    eligible = log_p <= log_p2 + 1e-12
    clumped = np.zeros(n, dtype=bool)
    cache = _GenotypeCache(bf, sample_idx)
    window = kb * 1000
    # positions sorted per chromosome for the window search
    order = np.lexsort((pos, chrom))
    s_chrom, s_pos = chrom[order], pos[order]
    index_rows = []
    bar = progress(total=max_index or None, desc="clumping", unit="index SNP")
    for i in range(n):
        if clumped[i] or log_p[i] > log_p1 + 1e-12:
            continue
        index_rows.append(i)
        clumped[i] = True
        bar.update(1)
        if max_index and len(index_rows) >= max_index:
            break
        lo = np.searchsorted(s_chrom, chrom[i], "left")
        hi = np.searchsorted(s_chrom, chrom[i], "right")
        a = lo + np.searchsorted(s_pos[lo:hi], pos[i] - window, "left")
        b = lo + np.searchsorted(s_pos[lo:hi], pos[i] + window, "right")
        members = order[a:b]
        members = members[~clumped[members] & eligible[members]]
        if len(members) == 0:
            continue
        g0 = cache.get(int(bim_index[i]))
        g = np.stack([cache.get(int(bim_index[j])) for j in members])
        clumped[members[haplotype_r2(g0, g) > r2]] = True
    bar.close()
    return np.asarray(index_rows, dtype=np.int64)


# ------------------------------------------------------------------------ selection
def select_top(table: pd.DataFrame, top: int) -> pd.DataFrame:
    """The ``top`` best-ranked rows of a harmonised table (:func:`rank` order)."""
    return _with_p_text(rank(table).head(top).reset_index(drop=True))


def selection_source(sumstats) -> dict:
    """Where a selection's SNPs come from: the summary statistics file's name and sha256,
    and, when ``cmix gwas --ids-out`` wrote them (its record beside them names these
    bytes), the discovery people's count and IDs' sha256 (``discovery_gwas``; else None)."""
    from ..atomic import file_sha256
    from .gwas import read_discovery_record

    sha = file_sha256(sumstats)
    return {"sumstats": os.path.basename(str(sumstats)), "sha256": sha,
            "discovery_gwas": read_discovery_record(sumstats, sha)}


def selection_source_path(path) -> Path:
    """The record of where a selection's SNPs come from: ``<path>.source.json``."""
    return Path(f"{path}.source.json")


def read_selection_source(path) -> dict | None:
    """The :func:`selection_source` record beside the selection ``path``; None when there
    is none (a selection written before cmix recorded it, or by hand). CmixError for an
    unreadable one."""
    import json

    src = selection_source_path(path)
    if not src.exists():
        return None
    try:
        record = json.loads(src.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise CmixError(f"{src}: unreadable record of the selection's summary statistics "
                        f"({err}); rerun `cmix select`") from None
    if not isinstance(record, dict) or not isinstance(record.get("sha256"), str):
        raise CmixError(f"{src}: not a record of `cmix select` (expected a JSON object with "
                        "the summary statistics' sha256); rerun `cmix select`")
    return record


def write_selection(path, selected: pd.DataFrame, steps: pd.DataFrame,
                    source: dict | None = None) -> tuple[Path, Path]:
    """Write the selection (tab-separated :data:`OUTPUT_COLUMNS`) and its steps table,
    and with ``source`` (:func:`selection_source`) its record of where the SNPs come from.

    The steps table goes to ``<path>.steps.tsv``, the record to ``<path>.source.json``.
    All appear together or not at all.
    """
    import json

    path = Path(path)
    steps_path = path.with_name(path.name + ".steps.tsv")
    out = _with_p_text(selected[OUTPUT_COLUMNS]).copy()
    out["beta"] = out["beta"].map(lambda x: f"{x:.10g}")
    out["log10_p"] = out["log10_p"].map(lambda x: f"{x:.10g}")
    paths = [path, steps_path] + ([selection_source_path(path)] if source is not None else [])
    stale = [] if source is not None else [selection_source_path(path)]
    stale = [p for p in stale if p.is_file()]
    with atomic_outputs(*paths, remove=stale) as tmps:
        out.to_csv(tmps[0], sep="\t", index=False)
        steps.to_csv(tmps[1], sep="\t", index=False)
        if source is not None:
            tmps[2].write_text(json.dumps(source, indent=1) + "\n")
    return path, steps_path


def read_selection(path: str | os.PathLike) -> pd.DataFrame:
    """Read a selection written by :func:`write_selection` (checks the columns)."""
    path = input_file(path, "selected SNP table from `cmix select`")
    try:
        df = pd.read_csv(path, sep="\t", dtype={"variant_id": str, "chrom": str,
                                                 "effect_allele": str, "other_allele": str,
                                                 "p": str})
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise CmixError(f"{path}: cannot parse as a tab-separated table ({err})") from None
    missing = [c for c in ("variant_id", "effect_allele", "other_allele", "beta")
               if c not in df.columns]
    if missing:
        raise CmixError(f"{path}: missing column(s) {', '.join(missing)} (expected the "
                        f"header {' '.join(OUTPUT_COLUMNS)})")
    if len(df) == 0:
        raise CmixError(f"{path}: no SNPs listed")
    beta = pd.to_numeric(df["beta"], errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(beta)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise CmixError(f"{path}, line {i + 2}, column beta: expected a finite number for "
                        f"every selected SNP, found {str(df['beta'].iloc[i])!r}")
    return df


def sumstats_info(path, column: str = "INFO") -> np.ndarray:
    """The INFO column of a summary-statistics file, float64 per data row (NaN where
    missing). Raises CmixError when the file has no such column."""
    path = input_file(path, "summary statistics")
    header, sep, header_line = _read_header(path)
    names = {h.upper(): h for h in header}
    if column.upper() not in names:
        raise CmixError(f"{path}: no {column} column for --min-info (header has "
                        f"{' '.join(header)}); give the imputation mfi files (--mfi) instead")
    name = names[column.upper()]
    raw, lines = _read_columns(path, header, sep, {"info": name}, header_line)
    text = raw[name].str.strip()
    info = pd.to_numeric(text, errors="coerce")
    # NA, ".", or an empty cell is a missing INFO (the row fails --min-info); other text
    # ("0,9") is a misread file, not a low score
    bad = info.isna() & ~text.str.upper().isin(["NA", "NAN", ".", ""])
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise CmixError(f"{path}, line {lines[i]}, column {name}: expected an INFO score, "
                        f"found {text.iloc[i]!r}")
    return info.to_numpy(np.float64)


@dataclass(frozen=True, kw_only=True)
class SelectionOptions:
    """How ``cmix select`` picks SNPs.

    top: SNPs to keep (best p first). extract: path of a .snplist of QC-passed variants
    (None: all). column_map: {field: header name} (:func:`resolve_columns`).
    keep_ambiguous: keep strand-ambiguous (A/T, C/G) SNPs. clump_params: None (no
    clumping) or dict(r2=, kb=, p1=, p2=) of :func:`clump`; clumping needs hard calls
    (.bed/.pgen). keep: path of a plink sample list whose samples give the clumping r2
    (None: all). min_info: keep only variants with imputation INFO >= this (None: no
    INFO filter), from the ``mfi`` file(s) (UK Biobank ukb_mfi_chr{chrom}_v3.txt, or a
    ``{chrom}`` pattern) or else the sumstats' INFO column; it replaces the array QC for
    imputed variants.
    """

    top: int
    extract: object = None
    column_map: dict | None = None
    keep_ambiguous: bool = False
    clump_params: dict | None = None
    keep: object = None
    mfi: object = None
    min_info: float | None = None


def select_snps(sumstats_path, genotypes: GenotypeFiles, options: SelectionOptions
                ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The whole ``cmix select`` step in memory: read, harmonise, rank, clump, top-k.

    genotypes: ``bfile``/``pfile`` (prefix, ``{chrom}`` pattern with a shared ``fam``,
    or an opened source) or ``bgen`` + ``sample`` (indexed BGEN, or a ``{chrom}``
    pattern; ``chroms``: only these chromosomes, a --chroms spec, and for a pattern the
    files read, default 1-22): the summary statistics are harmonised against the union
    of the files' variants. options: :class:`SelectionOptions`. Returns (selected
    table, steps table).
    """
    from .selection import read_variant_ids

    bf = genotypes.open()
    sumstats = read_sumstats(sumstats_path, options.column_map)
    qc = set(read_variant_ids(options.extract)) if options.extract is not None else None
    info_step = None
    if options.min_info is not None:
        qc, sumstats, info_step = _info_filter(sumstats_path, sumstats, qc, bf, options,
                                               genotypes.chroms)
    table, steps = harmonise(sumstats, bf.bim, qc, options.keep_ambiguous)
    if info_step is not None:
        steps = pd.concat([pd.DataFrame([info_step], columns=steps.columns), steps],
                          ignore_index=True)
    table, steps = _on_chroms(table, steps, genotypes.chroms)
    if len(table) == 0:
        raise CmixError(f"{sumstats_path}: no SNP left after harmonising with the variants "
                        f"of {bf.prefix} (steps: " + "; ".join(
                            f"{s}: {r} left" for s, _, r in steps.itertuples(index=False))
                        + "); check the IDs, chromosome names and positions")
    ranked = rank(table)
    steps_rows = list(steps.itertuples(index=False, name=None))
    if options.clump_params is not None:
        ranked = _clumped(ranked, bf, options, steps_rows)
    top = options.top
    selected = _with_p_text(ranked.head(top).reset_index(drop=True))
    steps_rows.append((f"top {top} by p", len(ranked) - len(selected), len(selected)))
    return selected, pd.DataFrame(steps_rows, columns=["step", "n_removed", "n_remaining"])


def _info_filter(sumstats_path, sumstats: pd.DataFrame, qc: set | None, bf,
                 options: SelectionOptions, chroms) -> tuple[set | None, pd.DataFrame, tuple]:
    """Apply ``options.min_info``: with mfi files, narrow the QC-passed IDs ``qc`` to the
    genotype files' variants with INFO >= min_info; else drop the sumstats rows whose
    INFO column is below it. Returns (qc, sumstats, (step, n removed, n remaining))."""
    from .sources import expand, is_pattern

    min_info, mfi = options.min_info, options.mfi
    if mfi is not None:
        from .bgen import info_scores

        info = info_scores(bf.bim, [p for _, p in expand(mfi, chroms)]
                           if is_pattern(mfi) else [mfi])
        passing = set(bf.bim["variant_id"][info >= min_info])
        qc = passing if qc is None else qc & passing
        return qc, sumstats, (f"INFO < {min_info} or not in the mfi files (variants of the "
                              "genotype files)", int((~(info >= min_info)).sum()), len(passing))
    info = sumstats_info(sumstats_path)
    n0 = len(sumstats)
    sumstats = sumstats[info[sumstats.index.to_numpy()] >= min_info]
    return qc, sumstats, (f"INFO < {min_info} or missing (sumstats INFO column)",
                          n0 - len(sumstats),
                          len(sumstats))


def _on_chroms(table: pd.DataFrame, steps: pd.DataFrame, chroms
               ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Keep the harmonised SNPs on ``chroms`` (a --chroms spec, None: 1-22), adding a step
    when any is dropped."""
    from .selection import chrom_mask, chrom_text

    on_chroms = chrom_mask(table["chrom"], chroms)
    if on_chroms.all():
        return table, steps
    steps = pd.concat([steps, pd.DataFrame(
        [(f"on --chroms {chrom_text(chroms)}", int((~on_chroms).sum()),
          int(on_chroms.sum()))], columns=steps.columns)], ignore_index=True)
    return table[on_chroms].reset_index(drop=True), steps


def _clumped(ranked: pd.DataFrame, bf, options: SelectionOptions, steps_rows: list
             ) -> pd.DataFrame:
    """The index SNPs of :func:`clump` (at most ``options.top``, best first), with r2
    from the ``options.keep`` samples; appends the step to ``steps_rows``. A source
    without hard calls raises."""
    from .selection import sample_rows
    from .sources import FRACTIONAL

    clump_params, top = options.clump_params, options.top
    if bf.encoding == FRACTIONAL:
        raise CmixError(f"--clump computes LD from hard calls, which {bf.prefix} "
                        f"({bf.file_format}) does not hold: clump with --bfile or --pfile "
                        "(the array calls)")
    sample_idx = None
    if options.keep is not None:
        sample_idx, _ = sample_rows(bf.fam, options.keep, step="select")
    rows = clump(ranked, bf, sample_idx, max_index=top, **clump_params)
    steps_rows.append((f"clumped (r2 > {clump_params.get('r2', 0.5)}, "
                       f"{clump_params.get('kb', 250)} kb): index SNPs, stopped at {top}",
                       len(ranked) - len(rows), len(rows)))
    return ranked.iloc[rows].reset_index(drop=True)
