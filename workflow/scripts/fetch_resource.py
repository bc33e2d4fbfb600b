"""Download one file listed in the resources manifest and keep it only if its sha256 matches.

Run by rule fetch_resource (Snakemake's `script:`), or importable: fetch(url, sha256, out).
"""

import hashlib
import urllib.request
from pathlib import Path

from cmix.atomic import atomic_path
from cmix.errors import CmixError


def read_manifest(path) -> dict[str, tuple[str, str, int]]:
    """file name -> (url, sha256, manifest line) of a tab-separated `file url sha256`
    table (`#` lines are comments)."""
    entries = {}
    header_seen = False
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if not header_seen:
            if fields != ["file", "url", "sha256"]:
                raise CmixError(f"{path}, line {number}: expected the header "
                                f"'file<TAB>url<TAB>sha256', found {line!r}")
            header_seen = True
            continue
        if len(fields) != 3:
            raise CmixError(f"{path}, line {number}: expected 3 tab-separated fields "
                            f"(file, url, sha256), found {len(fields)}")
        name, url, sha256 = fields
        if name in entries:
            raise CmixError(f"{path}, line {number}: {name} is listed twice")
        entries[name] = (url, sha256.strip().lower(), number)
    return entries


def fetch(url: str, sha256: str, out, chunk_bytes: int = 1 << 20) -> None:
    """Stream `url` (http(s), ftp or file://) to `out`, hashing as it goes; `out` appears
    only when the sha256 matches."""
    digest = hashlib.sha256()
    with atomic_path(out) as tmp:
        try:
            with urllib.request.urlopen(url) as src, open(tmp, "wb") as dst:
                while block := src.read(chunk_bytes):
                    digest.update(block)
                    dst.write(block)
        except OSError as err:
            raise CmixError(f"{url}: download failed ({err}); nothing was written") from None
        if digest.hexdigest() != sha256:
            raise CmixError(f"{url}: sha256 {digest.hexdigest()} does not match the "
                            f"manifest's {sha256}; the download was discarded")


def fetch_listed(manifest, name: str, out) -> None:
    entries = read_manifest(manifest)
    if name not in entries:
        raise CmixError(f"{manifest}: no line for {name}")
    url, sha256, number = entries[name]
    if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
        raise CmixError(f"{manifest}, line {number}: no sha256 recorded for {name} "
                        f"(found {sha256!r}); download {url} once, check it, and write "
                        "the output of `sha256sum` there")
    fetch(url, sha256, out)


if __name__ == "__main__" and "snakemake" in globals():
    import sys

    try:
        fetch_listed(snakemake.params.manifest, snakemake.wildcards.file, snakemake.output[0])
    except CmixError as err:
        with open(snakemake.log[0], "w") as log:
            print(err, file=log)
        sys.exit(f"fetch_resource: {err}")
