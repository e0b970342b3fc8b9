"""The cluster options without a cluster: importing kernelwright never imports Ray, and a run that cannot go to a
cluster is refused before anything starts (these run whether or not Ray is installed)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agent.config import ConfigError, build

pytestmark = pytest.mark.timeout(120)


def test_importing_kernelwright_and_its_cluster_package_does_not_import_ray():
    code = ("import sys, agent, agent.cli, agent.loop.session, sandbox, sandbox.cluster; "
            "sys.exit(1 if 'ray' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


def test_the_cluster_table_is_checked():
    cfg = build({"cluster": {"address": "auto", "gpus": 2}}, {}, "test")
    assert cfg.cluster.address == "auto" and cfg.cluster.gpus == 2 and build({}, {}, "test").cluster is None
    with pytest.raises(ConfigError, match="gpus"):
        build({"cluster": {"gpus": 0}}, {}, "test")


def test_a_compile_only_run_on_a_cluster_is_refused_with_the_reason(kw, tmp_path):
    out = kw("optimize", "vector_add", "--sandbox", "compile-only", "--ray", "--traces", tmp_path / "traces")
    assert out.returncode == 2, out.stderr
    assert "compile-only sandbox runs nothing on a GPU" in out.stderr
    assert not (tmp_path / "traces").exists() or not any((tmp_path / "traces").iterdir())
