"""cmix installed without -e finds the files it ships (cmix/data/, cmix/profiles/,
cmix/report/report.css) as package data: `cmix pca` with its default long-range LD
regions, `cmix install-profile` and `cmix report` run from a `pip install --target` copy,
outside the repository."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from cmix.readers import plink
from test_report import write_grid

REPO = Path(__file__).resolve().parent.parent


def shipped_regions() -> list[tuple[str, int, int]]:
    """(chrom, start, end) of the repository's region list, read here without cmix."""
    rows = [ln.split() for ln in (REPO / "cmix/data/high_ld_regions_grch37.tsv").read_text()
            .splitlines() if ln.strip() and not ln.startswith("#")]
    return [(r[0], int(r[1]), int(r[2])) for r in rows]


def write_cohort(prefix) -> pd.DataFrame:
    """120 people, 60 independent variants on chromosomes 1 and 6 every 2.5 Mb, so some
    fall in the shipped regions (hild1 on 1, the MHC and two more on 6)."""
    rng = np.random.default_rng(3)
    n, m = 120, 60
    chrom = ["1"] * 30 + ["6"] * 30
    pos = [1_000_000 + 2_500_000 * (i % 30) for i in range(m)]
    bim = pd.DataFrame({"chrom": chrom, "variant_id": [f"v{i}" for i in range(m)], "cm": 0.0,
                        "pos": pos, "a1": "A", "a2": "G"})
    g = rng.binomial(2, rng.uniform(0.2, 0.5, m)[:, None], size=(m, n)).astype(np.int8)
    ids = [f"s{i}" for i in range(n)]
    fam = pd.DataFrame({"fid": ids, "iid": ids, "father": "0", "mother": "0", "sex": "1",
                        "phenotype": "-9"})
    plink.write_bfile(prefix, g, fam, bim)
    return bim


def test_install_without_editable_runs_pca_install_profile_and_report(tmp_path):
    # what cmix.def copies into the container, then pip install without -e (no network)
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPO / name, src / name)
    shutil.copytree(REPO / "cmix", src / "cmix", ignore=shutil.ignore_patterns("__pycache__"))
    site = tmp_path / "site"
    res = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
                          "--no-build-isolation", "--no-cache-dir", "-q", "--target", site, src],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    shutil.rmtree(src)                       # nothing may be read from the copied tree

    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site), "HOME": str(home)}

    def cmix(*args, **extra_env):
        res = subprocess.run([sys.executable, "-m", "cmix.cli", *map(str, args)], cwd=work,
                             env={**env, **extra_env}, capture_output=True, text=True)
        assert res.returncode == 0, res.stdout + res.stderr
        return res

    where = subprocess.run([sys.executable, "-c", "import cmix; print(cmix.__file__)"],
                           cwd=work, env=env, capture_output=True, text=True, check=True)
    assert Path(where.stdout.strip()).is_relative_to(site)

    bim = write_cohort(work / "c")
    cmix("pca", "--bfile", "c", "--no-prune", "--pcs", 2, "--threads", 1, "--out", "pcs")
    used = pd.read_csv(work / "pcs.eigenvec.allele", sep="\t")["ID"].unique().tolist()
    inside = [any(c == chrom and s <= p <= e for chrom, s, e in shipped_regions())
              for c, p in zip(bim["chrom"], bim["pos"])]
    assert 0 < sum(inside) < len(bim)
    assert used == bim["variant_id"][~np.array(inside)].tolist()

    cmix("install-profile", "slurm", PATH=os.path.dirname(sys.executable))   # no SLURM here
    installed = home / ".config/snakemake/slurm/config.yaml"
    assert installed.read_bytes() == (REPO / "profiles/slurm/config.yaml").read_bytes()

    # the report's page carries the stylesheet shipped beside its module
    write_grid(work / "runs", [("trait", m, 100, s, 2) for m in ("logreg", "cmix")
                               for s in (1, 2)])
    cmix("report", "--runs", "runs", "--out", "rep")
    css = (REPO / "cmix/report/report.css").read_text().rstrip("\n")
    assert f"<style>{css}</style>" in (work / "rep/report.html").read_text()


def test_repository_profiles_are_the_packaged_ones():
    """`snakemake --profile profiles/slurm` from a clone reads the file that is shipped."""
    for name in ("slurm", "local"):
        assert ((REPO / "profiles" / name / "config.yaml").resolve()
                == (REPO / "cmix/profiles" / name / "config.yaml").resolve())
