"""Reading users' text inputs: tables, ID lists, JSON and YAML.

Every text input may be gzip- or zstd-compressed (told by its content, not its name; a
zstd file is decompressed whole into memory), start with a UTF-8 byte-order mark and end
its lines with CRLF; config files (YAML/JSON, read by
:func:`read_config_text`) must be plain UTF-8 text. A problem is one :class:`CmixError`
naming the file, and the line (and column) where there is one.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import zlib
from pathlib import Path
from typing import Iterator

import numpy as np

from .errors import CmixError



def input_file(path: str | os.PathLike, what: str) -> Path:
    """``path`` as a Path, checked to be an existing file (not a folder).

    ``what`` names the file's role (e.g. "phenotype table") in the message.
    """
    path = Path(path)
    if path.is_dir():
        raise CmixError(f"{path}: is a folder, expected a file ({what})")
    if not path.exists():
        raise CmixError(f"{path}: file not found ({what})")
    return path


def read_id_list(path: str | os.PathLike, what: str, *, one_field: bool = False) -> list[str]:
    """The first whitespace field of each non-empty line, in file order (a .snplist, an
    --extract list, a withdrawal list). ``what`` names the file's role in messages.

    Read through :func:`open_maybe_gzip` (gzip, a UTF-8 BOM and CRLF line ends are
    handled). ``one_field``: every non-empty line must hold exactly one ID (no second
    field, no comma), else a CmixError names the file and line.
    """
    path = input_file(path, what)
    ids = []
    for lineno, line in text_lines(path, what):
        fields = line.split()
        if not fields:
            continue
        if one_field and (len(fields) > 1 or "," in fields[0]):
            form = (f"{len(fields)} fields" if len(fields) > 1 else
                    "comma-separated values (UK Biobank's eid,date form?)")
            raise CmixError(f"{path}, line {lineno}: expected one ID per line ({what}), found "
                            f"{form}; keep the ID column only")
        ids.append(fields[0])
    return ids


def read_id_set(path: str | os.PathLike, what: str, *, one_field: bool = False) -> set[str]:
    """:func:`read_id_list` as a set."""
    return set(read_id_list(path, what, one_field=one_field))


def is_gzip(path: str | os.PathLike) -> bool:
    """True when the file starts with the gzip magic bytes (whatever its name)."""
    with open(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def is_zstd(path: str | os.PathLike) -> bool:
    """True when the file starts with the zstd frame magic bytes (whatever its name), as
    ``plink2 --make-pgen vzs`` writes a .pvar.zst."""
    with open(path, "rb") as fh:
        return fh.read(4) == ZSTD_MAGIC


def zstd_bytes(path: str | os.PathLike, what: str) -> bytes:
    """The decompressed contents of a zstd file (every frame, in order). A truncated or
    corrupt file is a CmixError naming it and ``what``."""
    from numcodecs import zstd  # numcodecs: with zarr, only where a store is written

    try:
        return zstd.decompress(Path(path).read_bytes())
    except RuntimeError as err:
        raise CmixError(f"{path}: truncated or corrupt zstd file ({what}): {err}") from None


def write_gzip(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` gzipped to ``path`` (a temporary name, usually), reproducibly: the
    gzip header holds no file name (which would be the temporary one, naming the host
    and process) and no time."""
    with open(path, "wb") as fh, gzip.GzipFile(filename="", fileobj=fh, mode="wb",
                                               mtime=0) as gz:
        gz.write(data)


def open_maybe_gzip(path: str | os.PathLike, mode: str = "rt", what: str = "text file"):
    """Open a plain, gzip- or zstd-compressed file (told apart by their magic bytes; a
    zstd file is decompressed into memory, a CmixError naming ``what`` when it is
    damaged).

    Text mode reads UTF-8 with a leading byte-order mark dropped ("utf-8-sig") and
    CRLF line ends read as "\\n" (universal newlines). Binary mode gives the stored
    (decompressed) bytes.
    """
    if is_zstd(path):
        raw = io.BytesIO(zstd_bytes(path, what))
        return raw if "b" in mode else io.TextIOWrapper(raw, encoding="utf-8-sig")
    gz = is_gzip(path)
    if "b" in mode:
        return gzip.open(path, mode) if gz else open(path, mode)
    mode = mode if "t" in mode else mode + "t"
    return (gzip.open(path, mode, encoding="utf-8-sig") if gz
            else open(path, mode, encoding="utf-8-sig"))


def text_lines(path: str | os.PathLike, what: str) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, line without its line end) of a text file read
    through :func:`open_maybe_gzip`. A file that is not UTF-8 text, or a truncated or
    corrupt gzip file, is a CmixError naming the file and ``what``."""
    try:
        with open_maybe_gzip(path, what=what) as fh:
            for lineno, line in enumerate(fh, 1):
                yield lineno, line.rstrip("\r\n")
    except UnicodeDecodeError as err:
        raise CmixError(f"{path}: not UTF-8 text ({what}): {err.reason} at byte "
                        f"{err.start}") from None
    except (EOFError, zlib.error, gzip.BadGzipFile) as err:
        raise CmixError(f"{path}: truncated or corrupt gzip file ({what}): {err}") from None


def first_line(path: str | os.PathLike, what: str) -> str:
    """The first line of a text file without its line end (gzip and a BOM handled;
    "" for an empty file)."""
    for _, line in text_lines(path, what):
        return line
    return ""


def data_line(path: str | os.PathLike, row: int, what: str, header: bool = True) -> int:
    """The 1-based file line of data row ``row`` (0-based) of a text table, blank lines
    skipped as pandas skips them; for messages that name a line (computed when needed:
    it reads the file up to that line)."""
    n = -1
    for lineno, line in text_lines(path, what):
        if (header and lineno == 1) or not line.strip():
            continue
        n += 1
        if n == row:
            return lineno
    return row + 1 + header


def split_header(line: str, sep: str | None) -> list[str]:
    r"""The column names of a header line: split at ``sep`` ("\t", ",") or at runs of
    whitespace (None or r"\s+"); surrounding spaces and double quotes dropped."""
    fields = line.split() if sep in (None, r"\s+") else line.split(sep)
    return [f.strip().strip('"') for f in fields]


def check_row_widths(path: str | os.PathLike, n_fields: int, sep: str, what: str) -> None:
    r"""CmixError naming the first data line (after the header line) whose field count is
    not ``n_fields``: a value too many or too few shifts every later column of its row.
    sep: "\t", "," or r"\s+" (:func:`sniff_sep`); a comma-separated file is split as CSV
    (a quoted field may hold commas), the others as :func:`data_line_numbers` splits them.
    Blank lines are skipped."""
    if sep == "\t":
        data_line_numbers(path, n_fields, "\t", what)
        return
    if sep != ",":
        try:
            data_line_numbers(path, n_fields, None, what)
        except CmixError as err:
            raise CmixError(f"{err}; between spaces a blank cell is no field: write NA "
                            "for a missing value") from None
        return
    rows = csv.reader(line for _, line in text_lines(path, what))
    next(rows, None)
    for row in rows:
        if row and len(row) != n_fields:
            raise CmixError(f"{path}, line {rows.line_num}: expected {n_fields} columns as in "
                            f"the header, found {len(row)} ({what}); a value too many or too "
                            "few shifts the columns")


def read_config_text(path: str | os.PathLike, what: str) -> tuple[Path, str]:
    """``path`` (checked by :func:`input_file`) and its text, for a YAML or JSON config.
    A config is read as UTF-8 (a leading byte-order mark dropped); a gzipped file, or
    bytes that are not UTF-8 (e.g. latin-1), are a CmixError naming the file and saying
    that UTF-8 YAML/JSON text was expected."""
    path = input_file(path, what)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise CmixError(f"{path}: cannot read it ({err.strerror or err}; {what})") from None
    if data[:2] == b"\x1f\x8b":
        raise CmixError(f"{path}: is gzip-compressed; expected UTF-8 YAML/JSON text ({what}): "
                        "decompress it first")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise CmixError(f"{path}, line {line}: byte 0x{data[err.start]:02x} is not UTF-8; "
                        f"expected UTF-8 YAML/JSON text ({what}): save it as UTF-8") from None
    return path, text


def parse_json(text: str, source: str):
    """JSON text parsed. Text that is not JSON, or an object that gives one key twice
    (JSON keeps the last silently: a class or a field would vanish), is a CmixError
    naming ``source`` (and the line and column, or the key)."""
    def unique_keys(pairs):
        out = {}
        for key, value in pairs:
            if key in out:
                raise CmixError(f"{source}: key {key!r} appears twice in one JSON object; "
                                "which one is meant cannot be told")
            out[key] = value
        return out

    try:
        return json.loads(text, object_pairs_hook=unique_keys)
    except json.JSONDecodeError as err:
        raise CmixError(f"{source}: not valid JSON (line {err.lineno}, column {err.colno}: "
                        f"{err.msg})") from None


def parse_yaml(text: str, source: str):
    """YAML text parsed (safe tags only). Text that does not parse, or a mapping that
    gives one key twice (YAML keeps the last silently), is a CmixError naming ``source``
    (and the key's line)."""
    import yaml  # yaml: only where YAML is read or written

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    raise CmixError(f"{source}, line {key_node.start_mark.line + 1}: key "
                                    f"{key!r} appears twice in one mapping; which one is "
                                    "meant cannot be told")
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    try:
        return yaml.load(text, Loader=UniqueKeyLoader)
    except yaml.YAMLError as err:
        raise CmixError(f"{source}: cannot parse ({err})") from None


def first_repeated(values):
    """The first value of ``values`` (a sequence) that an earlier one equals, else None:
    a list of a grid's traits, budgets or seeds may name each once."""
    seen = set()
    for value in values:
        if value in seen:
            return value
        seen.add(value)
    return None


def sniff_sep(header: str) -> str:
    r"""The delimiter of a table from its header line: "\t" when it holds a tab, else ","
    when it holds a comma, else r"\s+" (runs of spaces)."""
    return "\t" if "\t" in header else ("," if "," in header else r"\s+")


def check_unique_header(names: list[str], path, what: str, line: int = 1) -> None:
    """Raise a CmixError naming the first column name that appears twice."""
    seen: dict[str, int] = {}
    for k, name in enumerate(names, 1):
        if name in seen:
            raise CmixError(f"{path}, line {line}: column {name!r} appears twice in the "
                            f"header (columns {seen[name]} and {k}) ({what}); which one is "
                            "meant cannot be told")
        seen[name] = k


def read_table(path: str | os.PathLike, what: str, *, empty=None, **kw):
    """``pandas.read_csv(path, **kw)`` for a user's text table, with the reading rules
    of :func:`open_maybe_gzip`: gzip or zstd told by its magic bytes (not its name), a
    UTF-8 BOM dropped (encoding "utf-8-sig"), CRLF line ends read as LF.

    With a header (``header`` 0 or not given, no ``names``, no ``skiprows``) a column
    name that appears twice is a CmixError. ``empty``: returned for a file with no data
    (pandas' EmptyDataError); None makes an empty file a CmixError. pandas' ParserError,
    text that is not UTF-8 and a corrupt gzip file become one CmixError naming the file
    and ``what``.
    """
    import pandas as pd  # pandas: ~0.3 s; off the path of `cmix --help`

    kw.setdefault("encoding", "utf-8-sig")
    kw["compression"] = "gzip" if is_gzip(path) else None
    source = io.BytesIO(zstd_bytes(path, what)) if is_zstd(path) else path
    try:
        df = pd.read_csv(source, **kw)
    except pd.errors.EmptyDataError:
        if empty is not None:
            return empty
        raise CmixError(f"{path}: the file is empty ({what})") from None
    except pd.errors.ParserError as err:
        raise CmixError(f"{path}: cannot parse as a table ({what}): "
                        f"{str(err).strip()}") from None
    except UnicodeDecodeError as err:
        raise CmixError(f"{path}: not UTF-8 text ({what}): {err.reason}") from None
    except (EOFError, zlib.error, gzip.BadGzipFile) as err:
        raise CmixError(f"{path}: truncated or corrupt gzip file ({what}): {err}") from None
    if kw.get("header", 0) == 0 and kw.get("names") is None and not kw.get("skiprows"):
        check_unique_header(split_header(first_line(path, what), kw.get("sep")), path, what)
    return df


def data_line_numbers(path: str | os.PathLike, n_fields: int, sep: str | None,
                      what: str, header: bool = True, block: int = 1 << 23,
                      first: int = 1) -> np.ndarray:
    r"""Check that every data line of a text table has ``n_fields`` fields.

    sep: "\t" or "," (every separator counts, so empty fields count too) or None (runs
    of spaces and tabs separate, as pandas' ``sep=r"\s+"``). The file may be gzipped.
    Blank lines are skipped, as pandas skips them; the table starts at line ``first``
    (lines above it are not read, as pandas' ``skiprows=first - 1``), and with
    ``header`` that line is the header and is not checked. Runs over the bytes in
    blocks, vectorised.

    Returns int64 (n_data_lines,): the 1-based line number of each data line (of each
    row pandas reads), for messages that name a line. Raises :class:`CmixError` naming
    the first line with another field count, or a truncated or corrupt gzip file.
    """
    lines_out = []
    n_lines = 0
    tail = b""
    try:
        with open_maybe_gzip(path, "rb", what) as fh:
            while True:
                chunk = fh.read(block)
                eof = not chunk
                data = tail + chunk
                cut = len(data) if eof else data.rfind(b"\n") + 1
                data, tail = data[:cut], data[cut:]
                if eof and data and not data.endswith(b"\n"):
                    data += b"\n"
                if data:
                    counts, blank = _field_counts(np.frombuffer(data, np.uint8), sep)
                    numbers = n_lines + 1 + np.arange(len(counts))
                    keep = ~blank & (numbers > first if header else numbers >= first)
                    bad = keep & (counts != n_fields)
                    if bad.any():
                        i = int(np.flatnonzero(bad)[0])
                        raise CmixError(
                            f"{path}, line {numbers[i]}: expected {n_fields} columns"
                            f"{' as in the header' if header else ''}, found {counts[i]} "
                            f"({what}); a value too many or too few shifts the columns")
                    lines_out.append(numbers[keep])
                    n_lines += len(counts)
                if eof:
                    break
    except (EOFError, zlib.error, gzip.BadGzipFile) as err:
        raise CmixError(f"{path}: truncated or corrupt gzip file ({what}): {err}") from None
    return np.concatenate(lines_out) if lines_out else np.zeros(0, np.int64)


def _field_counts(a, sep: str | None):
    """Fields per line of bytes ``a`` (uint8 array, ending with a newline): (counts int64,
    blank bool), one entry per line."""
    ends = np.flatnonzero(a == 10)
    starts = np.concatenate([[0], ends[:-1] + 1])
    length = ends - starts
    cr = (length > 0) & (a[np.maximum(ends - 1, 0)] == 13)
    blank = (length - cr) == 0
    if sep is not None:
        marks = np.flatnonzero(a == ord(sep))
        counts = np.diff(np.searchsorted(marks, ends), prepend=0) + 1
    else:
        space = (a == 32) | (a == 9) | (a == 13) | (a == 10)
        marks = np.flatnonzero(~space[1:] & space[:-1]) + 1
        if len(a) and not space[0]:
            marks = np.concatenate([[0], marks])
        counts = np.diff(np.searchsorted(marks, ends), prepend=0)
        blank = counts == 0
    return counts.astype(np.int64), blank
