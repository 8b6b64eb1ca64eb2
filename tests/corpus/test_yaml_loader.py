"""The committed YAML files read the same through the fast loader as through PyYAML's own."""

from __future__ import annotations

import yaml

from rag_contract.config.yamlfile import SAFE_LOADER
from tests.support import ROOT


def test_the_fast_loader_is_a_safe_loader_and_reads_every_committed_file_alike():
    assert issubclass(SAFE_LOADER, yaml.SafeLoader) or SAFE_LOADER.__name__ == "CSafeLoader"
    files = sorted((ROOT / "eval").rglob("*.yaml")) + sorted((ROOT / "corpus").glob("*.yaml"))
    assert files
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert repr(yaml.load(text, Loader=SAFE_LOADER)) == repr(yaml.safe_load(text)), path.name


def test_the_fast_loader_refuses_what_the_safe_one_refuses():
    try:
        yaml.load("!!python/object/apply:os.system ['true']", Loader=SAFE_LOADER)
    except yaml.YAMLError:
        return
    raise AssertionError("a python tag was constructed")
