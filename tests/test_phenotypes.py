"""cmix.genotypes.phenotypes: trait columns, UKB codings, binarising on the training split only,
and the stratified test split. References: direct computations written in the tests."""

import numpy as np
import pandas as pd
import pytest

from cmix.genotypes import phenotypes as ph
from cmix.errors import CmixError

HAIR = {"field": 1747, "kind": "categorical",
        "classes": {"blonde": [1], "red": [2], "brown": [3, 4], "black": [5]}}
SMOKING = {"field": 20116, "kind": "categorical",
           "classes": {"never": [0], "previous": [1], "current": [2]}}
MPV_MEDIAN = {"field": 30100, "kind": "continuous", "binarise": "median"}
MSCV_QUARTILES = {"field": 30270, "kind": "continuous", "binarise": {"quantiles": [0.25, 0.75]}}


@pytest.fixture()
def table(tmp_path):
    rng = np.random.default_rng(5)
    n = 1000
    eid = np.arange(5_000_000, 5_000_000 + n).astype(str)
    hair = rng.choice(["1", "2", "3", "4", "5", "6", "-1", "-3", ""], n)
    smoke = rng.choice(["0", "1", "2", "-3", ""], n)
    mpv = np.round(rng.normal(10, 1, n), 2).astype(str)
    mpv[rng.random(n) < 0.05] = ""
    mscv = np.round(rng.normal(80, 5, n), 2).astype(str)
    df = pd.DataFrame({"eid": eid, "f.30100.0.0": mpv, "f.30270.0.0": mscv,
                       "f.20116.0.0": smoke, "f.1747.0.0": hair})
    path = tmp_path / "pheno.tsv"
    df.to_csv(path, sep="\t", index=False)
    return path, df


def test_test_split_is_stratified_and_seeded():
    rng = np.random.default_rng(0)
    strata = rng.choice([0, 1, 2, 7], 1003, p=[0.6, 0.3, 0.07, 0.03])
    split = ph.test_split(strata, 0.2, seed=4)
    assert split.dtype == np.int8 and set(np.unique(split)) == {0, 1}
    for s in np.unique(strata):
        n = (strata == s).sum()
        assert split[strata == s].sum() == int(round(n * 0.2))
    assert np.array_equal(split, ph.test_split(strata, 0.2, seed=4))
    assert not np.array_equal(split, ph.test_split(strata, 0.2, seed=5))
    assert ph.test_split(strata, 0.0, seed=1).sum() == 0
    with pytest.raises(CmixError):
        ph.test_split(strata, 1.0, seed=1)


@pytest.mark.parametrize("config,column", [(HAIR, "f.1747.0.0"), (SMOKING, "f.20116.0.0")])
def test_categorical_labels_follow_ukb_codings(table, config, column):
    path, df = table
    pheno = ph.read_phenotypes(path)
    ids = df.eid.to_numpy()[::-1]          # candidate order is kept, whatever the file's
    res = ph.label_trait(pheno, "t", config, ids, test_fraction=0.25, seed=3, path=path)
    code_to_class = {str(c): k for k, codes in enumerate(config["classes"].values())
                     for c in codes}
    raw = df.set_index("eid")[column].reindex(ids)
    expected = [(i, code_to_class[v]) for i, v in enumerate(raw) if v in code_to_class]
    assert list(res["keep"]) == [i for i, _ in expected]
    assert list(res["label"]) == [k for _, k in expected]
    assert res["class_names"] == list(config["classes"])
    # the split is stratified by class
    for k in range(len(config["classes"])):
        n = int((res["label"] == k).sum())
        assert int(res["split"][res["label"] == k].sum()) == int(round(n * 0.25))


def test_median_split_uses_training_values_only(table):
    path, df = table
    pheno = ph.read_phenotypes(path)
    ids = df.eid.to_numpy()
    res = ph.label_trait(pheno, "mpv", MPV_MEDIAN, ids, 0.2, seed=1)
    values = pd.to_numeric(df["f.30100.0.0"], errors="coerce").to_numpy()
    has = np.flatnonzero(~np.isnan(values))
    assert list(res["keep"]) == list(has)        # median split drops nobody with a value
    train = values[has][res["split"] == 0]
    median = np.median(train)
    assert list(res["label"]) == list((values[has] > median).astype(int))
    assert res["thresholds"][0] == median
    # the threshold is not the median of all values (the test would see a leak)
    assert np.median(values[has]) != median


def test_quantile_split_drops_the_middle(table):
    path, df = table
    res = ph.label_trait(ph.read_phenotypes(path), "mscv", MSCV_QUARTILES,
                         df.eid.to_numpy(), 0.2, seed=2)
    values = pd.to_numeric(df["f.30270.0.0"]).to_numpy()
    # the split was drawn over every sample with a value; recover the training rows
    full_split = ph.test_split(ph.continuous_strata(values), 0.2, 2)
    lo, hi = np.percentile(values[full_split == 0], [25, 75])
    expected = np.flatnonzero((values <= lo) | (values >= hi))
    assert list(res["keep"]) == list(expected)
    assert list(res["label"]) == list((values[expected] >= hi).astype(int))
    assert np.array_equal(res["split"], full_split[expected])
    assert 0.45 < len(expected) / len(values) < 0.55


@pytest.mark.parametrize("layout", ["ukbtools", "showcase_csv", "plain"])
def test_column_layouts(tmp_path, layout):
    values = ["9.1", "11.2", "", "10.5", "8.0", "12.5"]
    ids = ["1", "2", "3", "4", "5", "6"]
    if layout == "ukbtools":
        pd.DataFrame({"eid": ids, "f.30100.0.0": values}).to_csv(tmp_path / "p", sep="\t",
                                                                   index=False)
        config = MPV_MEDIAN
    elif layout == "showcase_csv":
        pd.DataFrame({"eid": ids, "30100-0.0": values}).to_csv(tmp_path / "p", index=False)
        config = MPV_MEDIAN
    else:
        pd.DataFrame({"IID": ids, "mpv": values}).to_csv(tmp_path / "p", sep=" ", index=False,
                                                         na_rep="NA")
        # between spaces a blank cell is no field: missing is written NA
        (tmp_path / "p").write_text((tmp_path / "p").read_text().replace(" \n", " NA\n"))
        config = {"column": "mpv", "kind": "continuous", "binarise": {"threshold": 10}}
    res = ph.label_trait(ph.read_phenotypes(tmp_path / "p"), "mpv", config, ids, 0.0, 0)
    assert list(res["keep"]) == [0, 1, 3, 4, 5]
    cut = 10.5 if layout != "plain" else 10     # median of the five values, or the threshold
    assert list(res["label"]) == [int(float(values[i]) > cut) for i in res["keep"]]


def test_bad_trait_inputs(table, tmp_path):
    path, df = table
    pheno = ph.read_phenotypes(path)
    ids = df.eid.to_numpy()
    with pytest.raises(CmixError, match=r"field 99999\) is absent .* f\.99999\.0\.0 or 99999-0\.0"):
        ph.label_trait(pheno, "x", {"field": 99999, "kind": "continuous"}, ids, path=path)
    single = {"field": 1747, "kind": "categorical", "classes": {"red": [2], "other": [77]}}
    with pytest.raises(CmixError, match=r"class 'other' \(codes \[77\]\) has no sample"):
        ph.label_trait(pheno, "hair", single, ids, path=path)
    with pytest.raises(CmixError, match="'kind'"):
        ph.label_trait(pheno, "hair", {"field": 1747}, ids)
    with pytest.raises(CmixError, match="code 3 is in classes"):
        ph.label_trait(pheno, "hair", {"field": 1747, "kind": "categorical",
                                       "classes": {"a": [3], "b": [3, 4]}}, ids)
    dup = tmp_path / "dup.tsv"
    pd.concat([df, df.iloc[[3]]]).to_csv(dup, sep="\t", index=False)
    with pytest.raises(CmixError, match="same eid on lines 5 and 1002"):
        ph.read_phenotypes(dup)
    noid = tmp_path / "noid.tsv"
    df.rename(columns={"eid": "person"}).to_csv(noid, sep="\t", index=False)
    with pytest.raises(CmixError, match="no ID column"):
        ph.read_phenotypes(noid)


def test_max_training_split_bounds_every_subset():
    """test_split's training split of any subset of samples (random strata, subsets of
    every size) never exceeds max_training_split of the whole set, and the bound is
    reached: it is the smallest bound of its form."""
    from cmix.genotypes.phenotypes import max_training_split, test_split

    rng = np.random.default_rng(0)
    reached = False
    for trial in range(300):
        n = int(rng.integers(1, 60))
        n_strata = int(rng.integers(1, 8))
        tf = float(rng.choice([0.1, 0.2, 0.25, 0.3, 0.5, 0.7]))
        strata = rng.integers(0, n_strata, n)
        bound = max_training_split(n, tf, n_strata)
        for m in range(1, n + 1):
            sub = strata[rng.choice(n, m, replace=False)]
            n_train = int((test_split(sub, tf, seed=trial) == 0).sum())
            assert n_train <= bound, (n, m, n_strata, tf)
            reached |= n_train == bound
    assert reached


def _text_table(tmp_path, values):
    path = tmp_path / "pheno.tsv"
    rows = "".join(f"{i}\t{v}\n" for i, v in enumerate(values))
    path.write_text("IID\tsuper_pop\n" + rows)
    return ph.read_phenotypes(path)


def test_text_class_codes_label_a_column_of_text_categories(tmp_path):
    """classes: {eur: [EUR], other: [AFR, AMR, EAS, SAS]} labels the cells by their text
    (spaces stripped); blank, NA and unlisted text are missing; counted against the
    table's cells directly."""
    cells = ["EUR", "SAS", " EUR ", "AFR", "", "NA", "eur", "AMR", "EAS", "XYZ"] * 12
    pheno = _text_table(tmp_path, cells)
    classes = {"eur": ["EUR"], "other": ["AFR", "AMR", "EAS", "SAS"]}
    ids = [str(i) for i in range(len(cells))]
    out = ph.label_trait(pheno, "pop", {"column": "super_pop", "kind": "categorical",
                                        "classes": classes}, ids, test_fraction=0.25)
    expected = np.array([0 if c.strip() == "EUR" else 1 if c in ("SAS", "AFR", "AMR", "EAS")
                         else -1 for c in cells])
    np.testing.assert_array_equal(out["keep"], np.flatnonzero(expected >= 0))
    np.testing.assert_array_equal(out["label"], expected[expected >= 0])
    assert out["counts"]["per_class"] == {"eur": 24, "other": 48}
    assert np.isnan(out["phenotype"]).all()


def test_an_integer_code_as_text_matches_its_decimal_text(tmp_path):
    pheno = _text_table(tmp_path, ["1", "2", "1", "3"] * 10)
    ids = [str(i) for i in range(40)]
    as_text = ph.label_trait(pheno, "t", {"column": "super_pop", "kind": "categorical",
                                          "classes": {"a": ["1"], "b": [2, "3"]}}, ids)
    as_numbers = ph.label_trait(pheno, "t", {"column": "super_pop", "kind": "categorical",
                                             "classes": {"a": [1], "b": [2, 3]}}, ids)
    np.testing.assert_array_equal(as_text["label"], as_numbers["label"])
    np.testing.assert_array_equal(as_text["split"], as_numbers["split"])


@pytest.mark.parametrize("classes, message", [
    ({"a": [1.5], "b": [2]}, "a code is an integer (the field's UK Biobank data-coding value) "
                             "or text (the category as the phenotype table writes it), found 1.5"),
    ({"a": [True], "b": [2]}, "found True"),
    ({"a": [" "], "b": [2]}, "found ' '"),
    ({"a": ["1"], "b": [1]}, "code 1 is in classes 'a' and 'b'"),
])
def test_codes_in_neither_form_are_one_line(classes, message):
    with pytest.raises(CmixError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ph.check_trait_config({"column": "c", "kind": "categorical", "classes": classes}, "t")


def test_integer_codes_on_a_text_column_name_the_line_and_the_text_form(tmp_path):
    pheno = _text_table(tmp_path, ["1", "2", "SAS", "1"])
    with pytest.raises(CmixError, match=r"line 4, column super_pop: 'SAS' is not a number "
                                        r"\(trait 't' lists integer codes; for text categories "
                                        r"list them as text"):
        ph.label_trait(pheno, "t", {"column": "super_pop", "kind": "categorical",
                                    "classes": {"a": [1], "b": [2]}}, ["0", "1", "2", "3"])
