"""Reading a workflow config file: its bytes (bounded: a device or a data file given as
the config never ends), UTF-8 text, YAML with no key twice, finite numbers, and the
workflow schema, whose first problem is one CmixError naming the key, with a hint for a
number YAML read as text or a misspelt key. :mod:`cmix.preflight` runs these first.
"""

from __future__ import annotations

import difflib
import math
import os
import tempfile
from pathlib import Path

from .errors import CmixError
from .learn.methods import METHODS
from .text import parse_yaml


def check_config_files(paths) -> None:
    """Each config file read: one that is not UTF-8 text, and a key given twice in one
    mapping, which YAML would resolve silently to the last (a trait definition or a
    setting lost), are a CmixError naming the file (and line). A file that cannot be
    read is left to the caller to name."""
    for path in paths:
        try:
            data = config_bytes(path)
        except OSError:
            continue
        parse_yaml(config_text(data, path), str(path))


#: The largest config file read (a workflow config is a few KB; /dev/zero never ends).
MAX_CONFIG_BYTES = 16 << 20


def config_bytes(path) -> bytes:
    """A config file's bytes; CmixError when it holds more than MAX_CONFIG_BYTES (a
    device or a data file given as the config). OSError when it cannot be read."""
    with open(path, "rb") as fh:
        data = fh.read(MAX_CONFIG_BYTES + 1)
    if len(data) > MAX_CONFIG_BYTES:
        raise CmixError(f"{path}: not a workflow config (over {MAX_CONFIG_BYTES >> 20} MiB; "
                        "a config is a small YAML file)")
    return data


def check_finite(value, where: str = "") -> None:
    """CmixError naming the first key whose value is a NaN or infinite number (YAML's
    .nan and .inf are numbers, and every range check passes a NaN)."""
    if isinstance(value, dict):
        for key, item in value.items():
            check_finite(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            check_finite(item, f"{where}[{i}]")
    elif isinstance(value, float) and not math.isfinite(value):
        raise CmixError(f"{where or 'top level'}: {value!r} is not a finite number; give a "
                        "number")


def config_text(data: bytes, path) -> str:
    """A config file's bytes as text; CmixError naming the file when they are not UTF-8
    (a UTF-8 byte-order mark is dropped)."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise CmixError(f"{path}: not UTF-8 text (byte {err.start + 1} is 0x"
                        f"{data[err.start]:02x}); a workflow config is expected in UTF-8: "
                        "save it as UTF-8") from None


def check_schema(config: dict, schema: str | os.PathLike) -> None:
    """``config`` against the workflow schema: the first problem as one CmixError naming
    the key (no schema dump), then the schema's defaults filled in (Snakemake's
    ``validate``)."""
    import jsonschema  # jsonschema: ~0.2 s; only where a config is checked
    import yaml  # yaml: only where YAML is read or written
    from snakemake.utils import validate  # snakemake: only when the workflow is asked

    with open(schema) as fh:
        spec = yaml.safe_load(fh)
    plugins = [m for m in METHODS.values() if m.package is not None]
    spec["properties"]["methods"]["items"]["enum"] += [m.name for m in plugins]
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(spec).iter_errors(config))
    if error is not None:
        where = ".".join(str(k) for k in error.absolute_path)
        raise CmixError(f"{where or 'top level'}: {error.message}{schema_hint(error)}")
    if not plugins:
        validate(config, str(schema))
        return
    # the schema with the installed plugin methods in its methods enum, for Snakemake
    with tempfile.TemporaryDirectory() as tmp:
        extended = Path(tmp) / "config.schema.yaml"
        extended.write_text(yaml.safe_dump(spec))
        validate(config, str(extended))


def schema_hint(error) -> str:
    """A hint for two schema errors a user can fix at once: a number YAML read as text
    (YAML 1.1 reads 1e-7 as a string; 1.0e-7 is a number), and an unknown key close to
    a known one (its likely spelling)."""
    if error.validator == "type" and isinstance(error.instance, str):
        text = error.instance.strip()
        if text.lstrip("+-").isdigit():
            return f" (it is text, {error.instance!r}: write the number without quotes, {text})"
        try:
            float(text)
            return (f" (YAML reads {error.instance} as text: write it with a decimal point, "
                    "e.g. 1.0e-7)")
        except ValueError:
            return ""
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = list(error.schema.get("properties", {}))
        for key in error.instance:
            if key not in known:
                close = difflib.get_close_matches(str(key), known, n=1)
                if close:
                    return f" (did you mean {close[0]!r}?)"
    return ""
