"""The layouts of GWAS summary statistics, recognised from the header alone.

plink2 ``--glm`` (linear, logistic, logistic.hybrid; an odds ratio is read as beta =
ln OR, the other allele is OMITTED/AX or whichever of REF/ALT is not A1, only TEST = ADD
rows), regenie, the GWAS Catalog's GWAS-SSF (chromosome 25 is MT), SAIGE (Allele2 is
the effect allele), METAL and BOLT-LMM (:data:`LAYOUTS`); any other header is read by
common names (:data:`GENERIC_COLUMNS`; only TEST = ADD rows where there is a TEST
column), where two candidate columns for one field are an error naming both. A column
map ``{"id": "rsid", "p": "pval", ...}`` (fields :data:`FIELDS`) overrides the choice
(:func:`resolve_columns`); :func:`describe_columns` is the log line naming the layout
and the columns used.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...errors import CmixError


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
    number -> chromosome code, applied before :func:`cmix.readers.chroms.chrom_code`.
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
