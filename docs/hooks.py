"""MkDocs hook (registered in mkdocs.yml): write the generated reference pages
(docs/gen_reference.py) before every build, so `mkdocs build` alone is up to date."""

import importlib.util
from pathlib import Path


def on_pre_build(config, **kwargs):
    path = Path(__file__).with_name("gen_reference.py")
    spec = importlib.util.spec_from_file_location("gen_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.write()
