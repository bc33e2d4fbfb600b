"""Population specs of simulated cohorts: the ancestry list of a Balding-Nichols cohort
(:data:`DEFAULT_POPULATIONS`, UK Biobank-like; an ancestry JSON file checked by
:func:`check_populations`) and the ``--populations`` counts or shares of a coalescent
cohort's model populations (:func:`parse_population_counts`)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ..errors import CmixError
from ..text import read_config_text


# Default ancestries, shaped on UK Biobank. Shares: self-reported ethnic background (field
# 21000, data-coding 1001) at the assessment visit, ~502k people: British 88%, Irish 2.6%,
# any other white 3.2%, South Asian (Indian, Pakistani, Bangladeshi) ~1.8%, Black
# (Caribbean, African) ~1.6%, Chinese 0.3%, mixed ~0.6% (Sudlow et al. 2015 PLoS Med;
# Bycroft et al. 2018 Nature, Fig. 1 and Supplementary Table S1; the small groups are
# rounded up so a few-thousand-person cohort still holds some of each).
# ``fst`` is the Hudson Fst between a population and the first (British) one, as
# plink2 --fst method=hudson reports it. 1000 Genomes, Hudson estimator (Bhatia et al.
# 2013 Genome Res, Table 2 and Fig. 3): GBR-GIH ~0.04-0.05, GBR-CHB ~0.11, GBR-YRI ~0.15;
# British vs Irish ~0.002 and across Europe <= 0.01 (Leslie et al. 2015 Nature; Gilbert
# et al. 2017 Sci Rep). Regions inside Britain: Fst ~0.001-0.005 along a north-south
# cline (Leslie et al. 2015; Bycroft 2018 Fig. 2 shows the same gradient in UKB PCs).
# ``smoking_shift`` is an environmental (not genetic) shift of smoking liability in SD
# units: smoking prevalence rises from the south-east of England to Scotland (ONS Adult
# smoking habits in the UK; Scottish Health Survey), which makes region - and thus the
# ancestry PCs that track it - a confounder.
DEFAULT_POPULATIONS = [
    {"name": "british", "code": 1001, "share": 0.886, "fst": 0.0, "white_british": True,
     "regions": [
         {"name": "south_east_england", "share": 0.35, "fst": 0.0005, "smoking_shift": 0.0},
         {"name": "midlands_wales", "share": 0.25, "fst": 0.001, "smoking_shift": 0.1},
         {"name": "north_england", "share": 0.25, "fst": 0.0015, "smoking_shift": 0.2},
         {"name": "scotland", "share": 0.15, "fst": 0.0025, "smoking_shift": 0.3},
     ]},
    {"name": "irish", "code": 1002, "share": 0.026, "fst": 0.002},
    {"name": "other_white", "code": 1003, "share": 0.032, "fst": 0.006},
    {"name": "south_asian", "code": 3001, "share": 0.02, "fst": 0.05},
    {"name": "african", "code": 4002, "share": 0.015, "fst": 0.15},
    {"name": "east_asian", "code": 5, "share": 0.005, "fst": 0.11},
    # White and Black Caribbean: African x British, mean African ancestry 0.5, as for
    # first-generation mixed people (individual proportions ~ Beta, concentration 10)
    {"name": "white_and_black_caribbean", "code": 2001, "share": 0.006,
     "admixed_from": {"african": 0.5, "british": 0.5}, "admixture_concentration": 10.0},
]
# populations with fst above this are not European: pigmentation light alleles and MC1R
# red-hair alleles are near absent there (see LARGE_LOCI), unless a spec says "european"
EUROPEAN_FST = 0.02


_POP_KEYS = {"name", "code", "share", "fst", "regions", "admixed_from",
             "admixture_concentration", "white_british", "european", "smoking_shift"}
_REGION_KEYS = {"name", "share", "fst", "smoking_shift"}


def default_populations() -> list[dict]:
    """A copy of :data:`DEFAULT_POPULATIONS` (the UK Biobank-like default)."""
    return json.loads(json.dumps(DEFAULT_POPULATIONS))


def load_populations(path) -> list[dict]:
    """Read and check a population list from a JSON file (a list, or {"populations": [...]})."""
    path, text = read_config_text(path, "ancestry JSON")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise CmixError(f"{path}: not a readable JSON file ({e})") from None
    if isinstance(data, dict) and "populations" in data:
        data = data["populations"]
    return check_populations(data, source=str(path))


def check_populations(pops, source: str = "populations") -> list[dict]:
    """Validate a population list and fill defaults; returns a normalised deep copy.

    Each entry: ``name`` (unique), ``code`` (the f.21000 value written for its members),
    ``share`` (> 0; shares are normalised to sum to 1), and either ``fst`` (Hudson Fst to
    the first population, 0 <= fst < 0.5; the first population's must be 0) with
    optional ``regions`` (list of {name, share, fst, smoking_shift}; region fst is Hudson
    Fst to its population), or ``admixed_from`` ({population: mean proportion} or a list
    of names, equal proportions; sources must be non-admixed) with optional
    ``admixture_concentration`` (Dirichlet concentration of individual proportions,
    default 10). Optional: ``white_british`` (default: first population only),
    ``european`` (default fst <= 0.02, or all sources European), ``smoking_shift``.
    Raises CmixError naming ``source`` and the offending key.
    """
    def bad(where, msg):
        raise CmixError(f"{source}: {where}: {msg}")

    if not isinstance(pops, list) or not pops:
        bad("populations", "expected a non-empty list of population objects")
    out, names, codes = [], set(), {}
    for i, p in enumerate(pops):
        where = f"populations[{i}]"
        _check_entry(p, where, _POP_KEYS, ("name", "code", "share"), names, bad,
                     "an object with name, code, share and fst or admixed_from")
        q = dict(p)
        where = f"populations[{i}] ({q['name']})"
        if not isinstance(q["code"], int) or isinstance(q["code"], bool):
            bad(f"{where}.code", f"expected an integer (UKB data-coding 1001), got {q['code']!r}")
        if q["code"] in codes:     # the f.21000 column could not tell the two apart
            bad(f"{where}.code", f"{q['code']} is also {codes[q['code']]}'s code; each "
                                 "population needs its own")
        codes[q["code"]] = q["name"]
        if not _is_number(q["share"]) or q["share"] <= 0:
            bad(f"{where}.share", f"expected a positive number, got {q['share']!r}")
        q["smoking_shift"] = float(_number_or(q.get("smoking_shift", 0.0), f"{where}.smoking_shift", bad))
        if "admixed_from" in q:
            _check_admixed(q, i, where, bad)
        else:
            _check_fst_and_regions(q, i, where, bad)
        for key in ("white_british", "european"):
            if key in q and not isinstance(q[key], bool):
                bad(f"{where}.{key}", f"expected true or false, got {q[key]!r}")
        q["white_british"] = q.get("white_british", i == 0)
        out.append(q)
    by_name = {q["name"]: q for q in out}
    for i, q in enumerate(out):
        for s in q.get("admixed_from", {}):
            if s not in by_name or "admixed_from" in by_name[s]:
                bad(f"populations[{i}] ({q['name']}).admixed_from.{s}",
                    "not the name of a non-admixed population in this list")
    for q in out:   # european: by Fst, or all sources European
        if "european" not in q:
            q["european"] = (all(by_name[s]["fst"] <= EUROPEAN_FST for s in q["admixed_from"])
                             if "admixed_from" in q else q["fst"] <= EUROPEAN_FST)
    total = sum(q["share"] for q in out)
    for q in out:
        q["share"] /= total
        rtot = sum(r["share"] for r in q.get("regions", []))
        for r in q.get("regions", []):
            r["share"] /= rtot
    return out


def _check_admixed(q: dict, i: int, where: str, bad) -> None:
    """In place on population ``q`` (the i-th): check ``admixed_from`` and
    ``admixture_concentration``, normalise the source proportions to sum to 1 and fill the
    default concentration 10. ``bad(where, message)`` raises."""
    if i == 0:
        bad(f"{where}.admixed_from", "the first population is the reference and cannot be admixed")
    for key in ("fst", "regions"):
        if key in q:
            bad(f"{where}.{key}", "not allowed for an admixed population")
    src = q["admixed_from"]
    if isinstance(src, list):
        src = {s: 1.0 for s in src}
    if not isinstance(src, dict) or len(src) < 2:
        bad(f"{where}.admixed_from", "expected {population: proportion} with at least two sources")
    total = 0.0
    for s, w in src.items():
        if not _is_number(w) or w <= 0:
            bad(f"{where}.admixed_from.{s}", f"expected a positive proportion, got {w!r}")
        total += w
    q["admixed_from"] = {s: float(w) / total for s, w in src.items()}
    conc = q.get("admixture_concentration", 10.0)
    if not _is_number(conc) or conc <= 0:
        bad(f"{where}.admixture_concentration", f"expected a positive number, got {conc!r}")
    q["admixture_concentration"] = float(conc)


def _check_fst_and_regions(q: dict, i: int, where: str, bad) -> None:
    """In place on non-admixed population ``q`` (the i-th): check ``fst`` (0 for the first,
    default) and its ``regions`` (:func:`_check_regions`). ``bad(where, message)`` raises."""
    if "admixture_concentration" in q:
        bad(f"{where}.admixture_concentration", "only for a population with admixed_from")
    fst = q.get("fst", 0.0 if i == 0 else None)
    if fst is None:
        bad(f"{where}.fst", "missing (Hudson Fst to the first population)")
    if not _is_number(fst) or not 0 <= fst < 0.5:
        bad(f"{where}.fst", f"expected a number in [0, 0.5), got {fst!r}")
    if i == 0 and fst != 0:
        bad(f"{where}.fst", "the first population is the reference; its fst must be 0")
    q["fst"] = float(fst)
    regions = q.get("regions", [])
    if not isinstance(regions, list):
        bad(f"{where}.regions", "expected a list of {name, share, fst}")
    q["regions"] = _check_regions(regions, where, bad)


def _check_entry(entry, where: str, allowed: set, required: tuple, names: set, bad,
                 expected: str) -> None:
    """Refuse a population or region entry that is not an object (``expected`` says what
    it should be), has a key outside ``allowed``, lacks one of ``required``, or whose
    ``name`` is not a non-empty string unique among ``names``; then add its name to
    ``names``. ``bad(where, message)`` raises."""
    if not isinstance(entry, dict):
        bad(where, f"expected {expected}")
    unknown = sorted(set(entry) - allowed)
    if unknown:
        bad(f"{where}.{unknown[0]}", f"unknown key (expected one of {', '.join(sorted(allowed))})")
    for key in required:
        if key not in entry:
            bad(f"{where}.{key}", "missing")
    if not isinstance(entry["name"], str) or not entry["name"] or entry["name"] in names:
        bad(f"{where}.name", f"expected a unique non-empty string, got {entry['name']!r}")
    names.add(entry["name"])


def _check_regions(regions, where: str, bad) -> list[dict]:
    """Checked copies of a population's regions: [{name, share, fst, smoking_shift}, ...],
    names unique, share > 0, 0 <= fst < 0.5. ``bad(where, message)`` raises."""
    clean, rnames = [], set()
    for j, r in enumerate(regions):
        rw = f"{where}.regions[{j}]"
        _check_entry(r, rw, _REGION_KEYS, ("name", "share", "fst"), rnames, bad,
                     "an object {name, share, fst}")
        if not _is_number(r["share"]) or r["share"] <= 0:
            bad(f"{rw}.share", f"expected a positive number, got {r['share']!r}")
        if not _is_number(r["fst"]) or not 0 <= r["fst"] < 0.5:
            bad(f"{rw}.fst", f"expected a number in [0, 0.5), got {r['fst']!r}")
        clean.append({"name": r["name"], "share": float(r["share"]), "fst": float(r["fst"]),
                      "smoking_shift": float(_number_or(r.get("smoking_shift", 0.0),
                                                        f"{rw}.smoking_shift", bad))})
    return clean


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _number_or(x, where, bad):
    if not _is_number(x):
        bad(where, f"expected a number, got {x!r}")
    return x


def population_classes(populations=None) -> dict:
    """``classes`` of a trait definition that uses the population (f.21000) as the label:
    {population name: [its code]}. Default: the default populations."""
    pops = check_populations(default_populations() if populations is None else populations)
    return {p["name"]: [p["code"]] for p in pops}


def resolve_populations(populations):
    if populations is None or (isinstance(populations, str) and populations == "none"):
        return check_populations([{"name": "british", "code": 1001, "share": 1.0, "fst": 0.0}])
    if isinstance(populations, str) and populations == "default":
        return check_populations(default_populations())
    if isinstance(populations, (str, Path)):
        return load_populations(populations)
    return check_populations(populations)


#: The smallest cohort: the withdrawal list names two of its people.
MIN_COHORT = 2


def parse_population_spec(spec) -> tuple[list[tuple[str, float]], bool]:
    """The (name, value) pairs of a ``--populations`` spec and whether they are shares.

    spec: text ``"YRI:500,CEU:2000"`` (counts: whole numbers written without a point) or
    ``"YRI:0.2,CEU:0.8"`` (shares: numbers written with a point or an exponent, each in
    (0, 1], summing to 1 within 1e-6), or a dict of ints (counts) or floats (shares).
    Counts and shares mixed, shares that do not sum to 1, a name given twice, or counts
    adding up to fewer than :data:`MIN_COHORT` people are a CmixError naming the entry.
    """
    if isinstance(spec, str):
        items, kinds = [], []
        for part in spec.split(","):
            name, sep, value = part.strip().partition(":")
            value = value.strip()
            share = any(c in value for c in ".eE")
            try:
                v = (float(value) if share else int(value)) if sep and name.strip() else None
            except ValueError:
                v = None
            if v is None or not math.isfinite(v) or v <= 0:
                raise CmixError(f"--populations: {part.strip()!r}: expected NAME:COUNT (a "
                                "whole number, e.g. YRI:500) or NAME:SHARE (a number with a "
                                "point, e.g. YRI:0.2)")
            items.append((name.strip(), float(v)))
            kinds.append(share)
    else:
        items, kinds = [], []
        for k, v in dict(spec).items():
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise CmixError(f"--populations: {k}: expected a count or a share, got {v!r}")
            items.append((str(k), float(v)))
            kinds.append(isinstance(v, float))
    seen = set()
    for name, v in items:
        if name in seen:
            raise CmixError(f"--populations: {name!r} is given twice")
        if not (math.isfinite(v) and v > 0):
            raise CmixError(f"--populations: {name}: expected a positive count or share, got {v}")
        seen.add(name)
    if any(kinds) and not all(kinds):
        counts = [n for (n, _), k in zip(items, kinds) if not k]
        shares = [n for (n, _), k in zip(items, kinds) if k]
        raise CmixError(f"--populations: {', '.join(shares)} given as shares and "
                        f"{', '.join(counts)} as counts; give every population a count "
                        "(whole numbers: they are the cohort) or every one a share of "
                        "--n-samples (numbers with a point, summing to 1)")
    shares = all(kinds)
    if shares:
        over = [f"{n}:{v:g}" for n, v in items if v > 1]
        total = math.fsum(v for _, v in items)
        if over or abs(total - 1.0) > 1e-6:
            raise CmixError(f"--populations: the shares sum to {total:.6g}"
                            + (f" ({', '.join(over)} is above 1)" if over else "")
                            + "; shares of --n-samples must sum to 1 (within 1e-6); give "
                              "whole numbers for counts")
    elif sum(v for _, v in items) < MIN_COHORT:
        raise CmixError(f"--populations: the counts add up to {int(sum(v for _, v in items))} "
                        f"{'person' if len(items) == 1 and items[0][1] == 1 else 'people'}; "
                        f"a cohort needs at least {MIN_COHORT} (the withdrawal list names "
                        "two of them); write NAME:1.0 for a share of the whole --n-samples")
    return items, shares


def parse_population_counts(spec, n_samples: int, names: list[str]) -> dict[str, int]:
    """Cohort size per model population, in the order given.

    spec: None (``n_samples`` shared equally over ``names``), or a spec of
    :func:`parse_population_spec`: counts (their sum is the cohort size) or shares of
    ``n_samples`` (rounded by largest remainder). Every name must be one of ``names``;
    CmixError otherwise.
    """
    if spec is None:
        items, shares = [(n, 1.0) for n in names], True
    else:
        items, shares = parse_population_spec(spec)
    for name, _ in items:
        if name not in names:
            raise CmixError(f"--populations: {name!r} is not a population of the model "
                            f"(one of {', '.join(names)})")
    if not shares:
        return {n: int(v) for n, v in items}
    if n_samples < MIN_COHORT:
        raise CmixError(f"--n-samples {n_samples}: a cohort needs at least {MIN_COHORT} "
                        "people (the withdrawal list names two of them)")
    w = np.array([v for _, v in items], dtype=float)
    exact = n_samples * w / w.sum()
    counts = np.floor(exact).astype(int)
    order = np.argsort(-(exact - counts), kind="stable")
    counts[order[: n_samples - counts.sum()]] += 1
    if (counts < 1).any():
        raise CmixError(f"--populations: --n-samples {n_samples} leaves a population empty")
    return {n: int(c) for (n, _), c in zip(items, counts)}
