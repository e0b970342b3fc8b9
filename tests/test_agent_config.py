"""Run configuration: precedence, the API key's sources, local-server placeholders, and clear errors."""

from __future__ import annotations

import pytest

from agent.config import LOCAL_PLACEHOLDER_KEY, ConfigError, ModelConfig, api_key, build, redact_url

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "KW_KEY"):
        monkeypatch.delenv(name, raising=False)


def test_flags_override_the_file_which_overrides_the_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://env-host:1/v1")
    file = {"model": {"name": "m", "base_url": "http://file-host:2/v1", "temperature": 0.2}, "budget": {"iterations": 4}}
    cfg = build(file, {"budget": {"iterations": 9}})
    assert cfg.model.base_url == "http://file-host:2/v1" and cfg.model.temperature == 0.2
    assert cfg.budget.iterations == 9
    assert build({"model": {"name": "m"}}).model.base_url == "http://env-host:1/v1"


@pytest.mark.parametrize("url", ["http://localhost:8000/v1", "http://127.0.0.1:11434/v1", "http://192.168.1.20:8080/v1",
                                 "http://[::1]:8000/v1", "http://gpu-box.local:8000/v1"])
def test_local_servers_get_a_placeholder_key(url):
    assert api_key(ModelConfig(name="m", base_url=url)) == LOCAL_PLACEHOLDER_KEY


def test_the_key_comes_from_the_named_variable_and_a_remote_endpoint_needs_one(monkeypatch):
    model = ModelConfig(name="m", base_url="https://api.example.com/v1", api_key_env="KW_KEY")
    with pytest.raises(ConfigError, match="set KW_KEY"):
        api_key(model)
    monkeypatch.setenv("KW_KEY", "sk-from-env")
    assert api_key(model) == "sk-from-env"
    assert api_key(model, explicit="sk-explicit") == "sk-explicit"


@pytest.mark.parametrize("data, words", [
    ({"model": {"temperature": 0.5}}, "no model name"),
    ({"model": {"name": "m"}, "budget": {"usd": 1.0}}, "needs the price of model 'm'"),
    ({"budget": {"iterations": -1}}, "budget.iterations"),
    ({"sandbox": "cloud"}, "sandbox"),
    ({"sandbox_options": {"timing_budget": 1}}, "sandbox_options.timing_budget: unknown key"),
    ({"tune": {"strategy": "annealing"}}, "tune.strategy: Value error, unknown search strategy 'annealing'"),
])
def test_bad_configs_name_the_key(data, words):
    with pytest.raises(ConfigError, match=words.replace(".", r"\.").replace("(", r"\(")):
        build(data, where="run.toml")


def test_credentials_in_a_base_url_never_reach_the_recorded_config():
    cfg = build({"model": {"name": "m", "base_url": "https://user:pass@proxy.example.com:8443/v1"}})
    assert cfg.public()["model"]["base_url"] == "https://[redacted]@proxy.example.com:8443/v1"
    assert redact_url("http://localhost:8000/v1") == "http://localhost:8000/v1"
