"""Phenotype table -> class labels per trait, and the fixed per-trait test split.

Phenotype table
    Tab-, comma- or whitespace-separated with a header; one row per participant. The
    ID column is ``eid`` (also ``f.eid``, ``IID`` or ``#IID``), matched to the .fam IID.
    Blank cells and ``NA`` are missing; other text in a trait's column is an error naming
    the line and column. A column named twice, or a field present in both layouts
    below, is an error too. The file may be gzipped, start with a UTF-8 BOM and use
    CRLF line ends.

Trait configuration (one dict per trait; the workflow config holds ``traits: {name: {...}}``)
    Column: ``"field": 30100`` finds ``f.30100.0.0`` (R/ukbtools layout) or ``30100-0.0``
    (UKB showcase CSV); ``"instance"`` and ``"array"`` (default 0) pick another column
    (``f.30100.1.0``). ``"column": "mpv"`` names a column directly (wins over field).

    ``"kind": "continuous"`` with ``"binarise"``:
        ``"median"``: class "low" (value <= median) vs "high" (value > median);
        ``{"quantiles": [0.25, 0.75]}``: "low" (value <= 25th percentile) vs "high"
        (value >= 75th percentile), samples in between are dropped;
        ``{"threshold": 9.5}``: "low" (<= 9.5) vs "high" (> 9.5), a fixed cut.
        Median and quantiles (numpy's default linear interpolation) are computed on the
        training split only and then applied to every sample. Optional
        ``"missing_codes": [-1, -3]`` marks special codes as missing (default none).
    ``"kind": "categorical"`` with ``"classes": {name: [codes...]}``, e.g.
        ``{"blonde": [1], "red": [2], "brown": [3, 4], "black": [5]}``: codes map to
        classes (several codes may merge into one class); class indices follow the
        dict's order. Codes not listed, negative codes (UKB's -1 "do not know",
        -3 "prefer not to answer") and blanks are missing. Codes are integers (UK
        Biobank's data-codings: the column must then hold numbers) or text, the
        categories as the table writes them (``{"eur": ["EUR"], "other": ["AFR",
        "SAS"]}``): with any text code the column is compared as text (cells stripped
        of spaces, case kept; an integer code matches its decimal text), and a cell
        that is no listed code is missing.

    :func:`check_trait_config` rejects any other key (naming the closest valid one, so
    ``"instanse"`` or ``"binarize"`` is not silently ignored), keys of the other kind and
    values of the wrong type. :func:`label_trait` rejects a class left without a sample
    in the training split, or (with a test fraction > 0) in the test split, after the
    keep list and the codes, naming it.

    Demo values for the simulated traits::

        mean_platelet_volume:     {field: 30100, kind: continuous, binarise: median}
        mean_sphered_cell_volume: {field: 30270, kind: continuous,
                                   binarise: {quantiles: [0.25, 0.75]}}
        smoking_status:           {field: 20116, kind: categorical,
                                   classes: {never: [0], previous: [1], current: [2]}}
        hair_colour:              {field: 1747, kind: categorical,
                                   classes: {blonde: [1], red: [2], brown: [3, 4],
                                             black: [5]}}

Test split (:func:`test_split`)
    Fixed per trait when its store is written, independent of labeled budget, seed and
    method: stratified (categorical: by class; continuous: by decile of the raw value)
    and seeded. It is drawn among the samples with a non-missing value before
    binarising, so thresholds can be computed on the training split alone.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import CmixError
from ..text import (check_row_widths, data_line, first_line, input_file, read_table, sniff_sep,
                    split_header)


ID_COLUMNS = ("eid", "f.eid", "IID", "#IID")
N_CONTINUOUS_STRATA = 10


# --------------------------------------------------------------------------- reading
def read_phenotypes(path: str | os.PathLike) -> pd.DataFrame:
    """Read a phenotype table: a DataFrame of str cells indexed by eid (str).

    Raises :class:`CmixError` when the file is missing or empty, has no ID column, names
    a column twice, repeats an ID or has a row with more or fewer fields than the header
    (its values would land in other columns). The file may be gzipped, start with a
    UTF-8 BOM and end its lines with CRLF (:func:`cmix.text.read_table`).
    ``df.attrs["path"]`` is the file, for messages.
    """
    path = input_file(path, "phenotype table")
    header = first_line(path, "phenotype table")
    sep = sniff_sep(header)
    check_row_widths(path, len(split_header(header, sep)), sep, "phenotype table")
    df = read_table(path, "phenotype table with a header", sep=sep, dtype=str,
                    keep_default_na=False, engine="c" if sep != r"\s+" else "python")
    id_col = next((c for c in ID_COLUMNS if c in df.columns), None)
    if id_col is None:
        raise CmixError(f"{path}: no ID column (expected one of {', '.join(ID_COLUMNS)} "
                        f"in the header)")
    ids = df[id_col].str.strip()
    dup = ids.duplicated(keep=False).to_numpy()
    if dup.any():
        lines = [data_line(path, int(i), "phenotype table") for i in np.flatnonzero(dup)[:2]]
        raise CmixError(f"{path}: the same {id_col} on lines {lines[0]} and {lines[1]}; each "
                        "participant must have one row")
    df = df.drop(columns=id_col)
    df.index = pd.Index(ids, name="eid")
    df.attrs["path"] = str(path)
    return df


def trait_column(columns, config: dict, trait: str = "", path="", who: str = "") -> str:
    """The phenotype table column a trait config refers to (see module docstring).
    ``who`` names the config entry in messages (default: the trait)."""
    columns = list(columns)
    who = who or f"trait {trait!r}"
    if config.get("column") is not None:
        name = str(config["column"])
        if name not in columns:
            raise CmixError(f"{path}: {who}: no column {name!r} in the phenotype table")
        return name
    field = str(config["field"])
    inst, arr = int(config.get("instance", 0)), int(config.get("array", 0))
    wanted = [f"f.{field}.{inst}.{arr}", f"{field}-{inst}.{arr}"]
    found = [name for name in wanted if name in columns]
    if len(found) == 2:
        raise CmixError(f"{path}: {who} (field {field}): the phenotype table has "
                        f"both {found[0]!r} and {found[1]!r}; keep one, or name the column "
                        "with 'column'")
    if found:
        return found[0]
    raise CmixError(f"{path}: {who} (field {field}) is absent from the phenotype "
                    f"table: no column {' or '.join(wanted)}")


#: Cells read as a missing value in a numeric column (besides the empty cell).
def trait_values(pheno: pd.DataFrame, column: str, sample_ids, path, trait: str,
                 what: str | None = None) -> np.ndarray:
    """float64 (len(sample_ids),) values of a trait's column for ``sample_ids`` (NaN where
    a sample has no row or a blank/NA cell); every cell of the column is checked to be a
    number (:func:`numeric_column`), naming the file line of the first that is not (and
    ``what`` the column must hold), and some sample must have a row
    (:func:`_check_some_in_table`)."""
    _check_some_in_table(pheno, np.asarray(sample_ids, dtype=str), path)
    all_values = numeric_column(pheno[column], path, column,
                                lambda i: data_line(path, i, "phenotype table"),
                                what or f"trait {trait!r} is numeric")
    return pd.Series(all_values, index=pheno.index).reindex(
        np.asarray(sample_ids, dtype=str)).to_numpy(float, copy=True)


MISSING_TEXT = ("", "NA", "nan", "NaN")


def numeric_column(values: pd.Series, path, column: str, line_of, what: str) -> np.ndarray:
    """float64 (n,) of a column of text cells: blank or NA (:data:`MISSING_TEXT`) -> NaN;
    any other text that is not a finite number ("inf" and "1e999" are not) is a CmixError
    naming ``path``, the line (``line_of(i)`` of row i), ``column`` and ``what`` the
    column must hold."""
    text = values.astype(object).where(values.notna(), "").astype(str).str.strip()
    num = pd.to_numeric(text, errors="coerce").to_numpy(float)
    bad = (np.isnan(num) & ~text.isin(MISSING_TEXT).to_numpy()) | np.isinf(num)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise CmixError(f"{path}, line {line_of(i)}, column {column}: {text.iloc[i]!r} is not "
                        f"a number ({what}; blank or NA for missing; {int(bad.sum())} such "
                        "cells)")
    return num


# ---------------------------------------------------------------------------- splits
def test_split(strata: np.ndarray, test_fraction: float, seed: int) -> np.ndarray:
    """A stratified, seeded test split: int8 (n,), 1 = test, 0 = training.

    strata: (n,) labels of the strata (any sortable values). In each stratum (in sorted
    order) the samples are permuted with ``numpy.random.default_rng(seed)`` and the
    first round(n_stratum * test_fraction) go to the test split.
    """
    if not 0.0 <= test_fraction < 1.0:
        raise CmixError(f"test fraction must be in [0, 1), got {test_fraction}")
    chosen = stratified_draw(strata, test_fraction, np.random.default_rng(seed))
    return chosen.astype(np.int8)


def stratified_draw(strata: np.ndarray, fraction: float, rng) -> np.ndarray:
    """bool (n,): round(n_stratum x fraction) of each stratum (in sorted order of the
    strata), the first of a permutation of its members drawn from ``rng``."""
    strata = np.asarray(strata)
    chosen = np.zeros(len(strata), dtype=bool)
    for s in np.unique(strata):
        members = rng.permutation(np.flatnonzero(strata == s))
        chosen[members[:int(round(len(members) * fraction))]] = True
    return chosen


test_split.__test__ = False  # a library function, not a pytest test


def max_training_split(n: int, test_fraction: float, n_strata: int) -> int:
    """The most samples :func:`test_split` can leave in the training split of any n
    samples in at most ``n_strata`` strata (or of any subset of them): a stratum of n_s
    keeps n_s - round(n_s x test_fraction) <= n_s (1 - test_fraction) + 1/2, so the
    total is at most n (1 - test_fraction) + n_strata / 2, and at most n."""
    return int(min(n, np.floor(n * (1.0 - test_fraction) + n_strata / 2)))


def continuous_strata(values: np.ndarray, n_bins: int = N_CONTINUOUS_STRATA) -> np.ndarray:
    """Quantile-bin index (0..n_bins-1) of each value: int64 (n,)."""
    values = np.asarray(values, dtype=float)
    edges = np.quantile(values, np.linspace(0, 1, n_bins + 1)[1:-1]) if len(values) else []
    return np.searchsorted(np.asarray(edges), values, side="right")


# ---------------------------------------------------------------------------- labels
#: Every key a trait config may hold; any other key is an error (a misspelled key would
#: otherwise be ignored silently). KIND_KEYS: the keys that apply to one kind only.
TRAIT_KEYS = ("field", "column", "instance", "array", "kind", "binarise", "missing_codes",
              "classes")
KIND_KEYS = {"categorical": ("classes",), "continuous": ("binarise", "missing_codes")}


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _is_number(x) -> bool:
    return (_is_int(x) or isinstance(x, (float, np.floating))) and bool(np.isfinite(x))


def _unknown_key(key, known, where: str) -> CmixError:
    """The error for a key not in ``known``, suggesting the closest known one."""
    close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return CmixError(f"{where}: unknown key {key!r}{hint}; the keys are {', '.join(known)}")


def check_trait_config(config, trait: str, source: str = "trait config") -> str:
    """Check one trait config (see the module docstring); return its kind.

    Unknown keys (with the closest valid key suggested), keys of the other kind, values
    of the wrong type, class codes that are not integers, a code in two classes and a
    malformed ``binarise`` raise :class:`CmixError`, whose message starts with
    ``source`` (the file or option the config came from) and the trait name.
    """
    where = f"{source}: trait {trait!r}"
    if not isinstance(config, dict):
        raise CmixError(f"{where}: the config must be a mapping of keys (field, kind, ...), "
                        f"got {type(config).__name__}")
    for key in config:
        if key not in TRAIT_KEYS:
            raise _unknown_key(key, TRAIT_KEYS, where)
    kind = config.get("kind")
    if kind not in KIND_KEYS:
        raise CmixError(f"{where}: 'kind' must be 'continuous' or 'categorical', got {kind!r}")
    for other, keys in KIND_KEYS.items():
        for key in keys:
            if other != kind and key in config:
                raise CmixError(f"{where}: {key!r} applies to {other} traits only, and this "
                                f"trait is {kind}")
    if config.get("column") is None and config.get("field") is None:
        raise CmixError(f"{where}: the config needs 'field' (UKB field ID) or 'column'")
    if config.get("column") is not None and not isinstance(config["column"], str):
        raise CmixError(f"{where}: 'column' must be a column name (text), got "
                        f"{config['column']!r}")
    for key in ("field", "instance", "array"):
        if config.get(key) is not None and not (_is_int(config[key]) and config[key] >= 0):
            raise CmixError(f"{where}: {key!r} must be an integer >= 0, got {config[key]!r}")
    if kind == "categorical":
        _check_classes(config.get("classes"), where)
    else:
        _check_binarise(config.get("binarise", "median"), where)
        codes = config.get("missing_codes", [])
        if not isinstance(codes, list) or not all(_is_number(c) for c in codes):
            raise CmixError(f"{where}: 'missing_codes' must be a list of numbers, got {codes!r}")
    return kind


def _check_classes(classes, where: str) -> None:
    example = '{"blonde": [1], "red": [2]} or {"eur": ["EUR"], "other": ["AFR", "SAS"]}'
    if not isinstance(classes, dict) or len(classes) < 2:
        got = f"a {type(classes).__name__}" if classes is not None else "nothing"
        if isinstance(classes, dict):
            got = f"{len(classes)} class(es)"
        raise CmixError(f"{where}: a categorical trait needs 'classes': a map of at least two "
                        f"class names to lists of codes, e.g. {example}; got {got}")
    seen = {}
    for name, codes in classes.items():
        for c in (codes if isinstance(codes, (list, tuple)) else [codes]):
            if not (_is_int(c) or (isinstance(c, str) and c.strip())):
                raise CmixError(f"{where}, class {name!r}: a code is an integer (the field's "
                                "UK Biobank data-coding value) or text (the category as the "
                                f"phenotype table writes it), found {c!r}")
            if _is_int(c) and c < 0:
                raise CmixError(f"{where}, class {name!r}: code {c} is negative; negative "
                                "codes (-1 do not know, -3 prefer not to answer) are missing "
                                "values and never form a class")
            key = str(c).strip()
            if key in seen:
                raise CmixError(f"{where}: code {c!r} is in classes {seen[key]!r} and {name!r}")
            seen[key] = name
        if isinstance(codes, (list, tuple)) and not codes:
            raise CmixError(f"{where}, class {name!r}: no codes listed")


def _code_lists(classes: dict) -> list[list]:
    """The codes of each class, in the classes' order (a lone code as a list of one)."""
    return [list(codes) if isinstance(codes, (list, tuple)) else [codes]
            for codes in classes.values()]


def has_text_codes(classes: dict) -> bool:
    """Whether any class of a categorical trait lists a text code (the column is then
    compared as text)."""
    return any(isinstance(c, str) for codes in _code_lists(classes) for c in codes)


def _check_binarise(b, where: str) -> None:
    usage = ("'binarise' must be 'median', {'quantiles': [low, high]} with 0 < low <= high "
             "< 1, or {'threshold': value}")
    if b == "median":
        return
    if not isinstance(b, dict) or len(b) != 1:
        raise CmixError(f"{where}: {usage}; got {b!r}")
    (key, value), = b.items()
    if key not in ("quantiles", "threshold"):
        raise _unknown_key(key, ("quantiles", "threshold"), f"{where}, binarise")
    if key == "threshold" and _is_number(value):
        return
    if (key == "quantiles" and isinstance(value, list) and len(value) == 2
            and all(_is_number(q) for q in value) and 0 < value[0] <= value[1] < 1):
        return
    raise CmixError(f"{where}: {usage}; got {b!r}")


def categorical_labels(values: np.ndarray, classes: dict) -> np.ndarray:
    """Class index per value (int16 (n,), -1 missing) for a code -> class map of integer
    codes.

    values: float (n,) raw codes, NaN blank. Negative codes and unlisted codes are -1.
    """
    values = np.asarray(values, dtype=float)
    labels = np.full(len(values), -1, dtype=np.int16)
    for k, codes in enumerate(_code_lists(classes)):
        labels[np.isin(values, [float(c) for c in codes]) & (values >= 0)] = k
    return labels


def text_labels(cells: np.ndarray, classes: dict) -> np.ndarray:
    """Class index per cell (int16 (n,), -1 missing) for a code -> class map with text
    codes: cells (str (n,), stripped) equal to a code's text (an integer code's decimal
    text) take its class; blanks, NA and unlisted text are -1."""
    cells = np.asarray(cells, dtype=object).astype(str)
    labels = np.full(len(cells), -1, dtype=np.int16)
    for k, codes in enumerate(_code_lists(classes)):
        labels[np.isin(cells, [str(c).strip() for c in codes])] = k
    return labels


def class_labels(pheno: pd.DataFrame, column: str, classes: dict, sample_ids, path,
                 trait: str) -> tuple[np.ndarray, np.ndarray]:
    """(labels int16 (n,), -1 missing; raw values float64 (n,)) of a categorical trait's
    column for ``sample_ids``. Integer codes: the column must hold numbers
    (:func:`trait_values`; a text cell is refused naming its line, with the text-code
    form as the fix). Any text code: the cells are compared as text
    (:func:`text_labels`) and the raw values are NaN."""
    sample_ids = np.asarray(sample_ids, dtype=str)
    if has_text_codes(classes):
        _check_some_in_table(pheno, sample_ids, path)
        cells = pheno[column].reindex(sample_ids)
        cells = cells.where(cells.notna(), "").astype(str).str.strip().to_numpy()
        return text_labels(cells, classes), np.full(len(sample_ids), np.nan)
    what = (f"trait {trait!r} lists integer codes; for text categories list them as text, "
            "e.g. classes: {eur: [EUR], other: [AFR, SAS]}")
    values = trait_values(pheno, column, sample_ids, path, trait, what)
    return categorical_labels(values, classes), values


def continuous_thresholds(train_values: np.ndarray, binarise) -> tuple[float, float]:
    """(low_max, high_min): "low" if value <= low_max, "high" if value >= high_min.

    For a single cut (median, threshold) high_min is the next float above the cut,
    so "high" means value > cut.
    """
    train_values = np.asarray(train_values, dtype=float)
    if binarise == "median" or (isinstance(binarise, dict) and "threshold" in binarise):
        cut = (float(np.median(train_values)) if binarise == "median"
               else float(binarise["threshold"]))
        return cut, float(np.nextafter(cut, np.inf))
    q_lo, q_hi = binarise["quantiles"]
    lo, hi = np.quantile(train_values, [q_lo, q_hi])
    return float(lo), float(hi)


def _check_some_in_table(pheno: pd.DataFrame, sample_ids: np.ndarray, path) -> None:
    """CmixError when none of ``sample_ids`` (str) has a row in the phenotype table: IDs
    of another dataset, or written otherwise ('123.0'), would leave every class empty."""
    if len(sample_ids) and not pheno.index.isin(sample_ids).any():
        raise CmixError(f"{path}: none of the {len(sample_ids)} candidate samples has a row "
                        f"in the phenotype table ({len(pheno)} rows): its IDs are matched to "
                        "the .fam IIDs as text, so '0123' or '123.0' is not '123'; check "
                        "that the table holds this dataset's participant IDs")


@dataclass(frozen=True)
class _ClassWhere:
    """What the class-count messages of :func:`label_trait` name."""

    path: object
    trait: str
    column: str
    kind: str
    config: dict
    thresholds: list | None
    n_candidates: int


def _check_class_counts(label, split, class_names, n_per_class, counts, test_fraction,
                        where: _ClassWhere) -> None:
    """CmixError when a class has no sample in the training split, or (test_fraction >
    0) none in the test split."""
    n_train = np.bincount(label[split == 0], minlength=len(class_names))
    if (n_train == 0).any():
        k = int(np.flatnonzero(n_train == 0)[0])
        if where.kind == "categorical":
            what = f"codes {list(where.config['classes'].values())[k]}"
        elif k == 0:
            what = f"values <= {where.thresholds[0]:g}"
        elif where.thresholds[1] == np.nextafter(where.thresholds[0], np.inf):
            what = f"values > {where.thresholds[0]:g}"
        else:
            what = f"values >= {where.thresholds[1]:g}"
        stage = "after filtering" if n_per_class[k] == 0 else "in the training split"
        raise CmixError(f"{where.path}: trait {where.trait!r} (column {where.column!r}): class "
                        f"{class_names[k]!r} ({what}) has no sample {stage} among the "
                        f"{where.n_candidates} candidate samples (per class: "
                        f"{counts['per_class']}); every class needs training samples: check "
                        "the codes, the threshold or the keep list")
    n_test = np.bincount(label[split == 1], minlength=len(class_names))
    if test_fraction > 0 and (n_test == 0).any():
        k = int(np.flatnonzero(n_test == 0)[0])
        raise CmixError(f"{where.path}: trait {where.trait!r} (column {where.column!r}): class "
                        f"{class_names[k]!r} has {int(n_per_class[k])} sample(s), too few for "
                        f"one in the test split (test fraction {test_fraction:g}; per class: "
                        f"{counts['per_class']}); its accuracy could not be measured: merge "
                        "or drop the class, or change the codes")


def label_trait(pheno: pd.DataFrame, trait: str, config: dict, sample_ids,
                test_fraction: float = 0.2, seed: int = 0, path="") -> dict:
    """Labels and test split for one trait over the given samples.

    pheno: :func:`read_phenotypes` table. sample_ids: IIDs of the candidate samples
    (str, n_candidates), e.g. the unrelated kept samples in .fam order.
    Returns a dict: ``keep`` (int64 positions into sample_ids of the labeled samples,
    in order), ``label`` (int16, per kept sample), ``split`` (int8, 0 train / 1 test),
    ``phenotype`` (float64 raw values; NaN for text codes), ``class_names`` (list of str),
    ``thresholds`` (continuous only: [low_max, high_min]), ``counts`` (dict of counts
    per step, no IDs). Raises :class:`CmixError` when a class has no sample in the
    training split (a class the trainer could not learn), or none in the test split
    while ``test_fraction`` > 0 (a class whose accuracy could not be measured), when
    no candidate has a row in the table, and when a cell of the trait's column is text
    other than blank or NA.
    """
    kind = check_trait_config(config, trait)
    column = trait_column(pheno.columns, config, trait, path)
    sample_ids = np.asarray(sample_ids, dtype=str)
    path = path or pheno.attrs.get("path", "phenotype table")
    raw = pheno[column].reindex(sample_ids)
    if kind == "categorical":
        all_labels, values = class_labels(pheno, column, config["classes"], sample_ids,
                                          path, trait)
    else:
        values = trait_values(pheno, column, sample_ids, path, trait)
    counts = {"candidates": int(len(sample_ids)),
              "in_phenotype_table": int(raw.notna().sum())}
    if kind == "categorical":
        class_names = [str(c) for c in config["classes"]]
        has = np.flatnonzero(all_labels >= 0)
        counts["with_a_listed_code"] = int(len(has))
        split = test_split(all_labels[has], test_fraction, seed)
        keep, label, thresholds = has, all_labels[has], None
    else:
        missing_codes = [float(c) for c in config.get("missing_codes", [])]
        ok = np.isfinite(values) & ~np.isin(values, missing_codes)
        has = np.flatnonzero(ok)
        counts["with_a_value"] = int(len(has))
        split_all = test_split(continuous_strata(values[has]), test_fraction, seed)
        train_values = values[has][split_all == 0]
        if len(train_values) == 0:
            raise CmixError(f"{path}: trait {trait!r}: no sample with a value in column "
                            f"{column!r} among the {len(sample_ids)} candidate samples")
        low_max, high_min = continuous_thresholds(train_values, config.get("binarise", "median"))
        v = values[has]
        lab = np.where(v <= low_max, 0, np.where(v >= high_min, 1, -1)).astype(np.int16)
        sel = lab >= 0
        keep, label, split = has[sel], lab[sel], split_all[sel]
        class_names, thresholds = ["low", "high"], [low_max, high_min]
        counts["after_binarising"] = int(sel.sum())
    n_per_class = np.bincount(label, minlength=len(class_names))
    counts["per_class"] = {name: int(c) for name, c in zip(class_names, n_per_class)}
    counts["test"] = int(split.sum())
    _check_class_counts(label, split, class_names, n_per_class, counts, test_fraction,
                        _ClassWhere(path, trait, column, kind, config, thresholds, len(sample_ids)))
    return {"keep": keep.astype(np.int64), "label": label.astype(np.int16),
            "split": split.astype(np.int8), "phenotype": values[keep],
            "class_names": class_names, "thresholds": thresholds, "column": column,
            "counts": counts}
