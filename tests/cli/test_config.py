"""Loading capture-sync.toml: every problem at once, each naming the file and key; credentials only
from the environment or files; paths relative to the config file."""

from __future__ import annotations

from pathlib import Path

import pytest

from connector import logs
from connector.config import load_config
from connector.problems import ConfigProblem

GOOD = """
[capture]
base_url = "http://127.0.0.1:8765/api/v1/capture"
api_key_file = "secrets/key"
api_secret_file = "secrets/secret"

[ledger]
path = "state/ledger.sqlite3"

[[sources]]
name = "signups"
type = "csv"
schedule = "*/5 * * * *"
path = "signups.csv"

[sources.mapping]
first_name = "First"
email = "Email"
"""


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("CAPTURE_BASE_URL", "CAPTURE_API_KEY", "CAPTURE_API_SECRET", "CAPTURE_SYNC_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "key").write_text("key-123\n")
    (tmp_path / "secrets" / "secret").write_text("file-secret-value\n")
    return tmp_path


def write(folder: Path, text: str) -> Path:
    path = folder / "capture-sync.toml"
    path.write_text(text)
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(ConfigProblem) as info:
        load_config(path)
    return info.value.problems


def test_a_good_config_resolves_paths_from_its_folder_and_reads_the_secret_files(folder: Path) -> None:
    cfg = load_config(write(folder, GOOD))
    assert cfg.ledger_path == folder / "state" / "ledger.sqlite3"
    base_url, creds = cfg.api()
    assert base_url == "http://127.0.0.1:8765/api/v1/capture"
    assert (creds.api_key, creds.api_secret.get_secret_value()) == ("key-123", "file-secret-value")
    assert "file-secret-value" not in repr(cfg)
    assert logs.mask_secrets("x file-secret-value y") == f"x {logs.MASK} y"
    assert [s.name for s in cfg.sources] == ["signups"]
    assert cfg.delivery_settings().batch_size == 100


def test_a_relative_source_file_is_read_from_the_config_folder_whatever_the_working_directory(
    folder: Path, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    (folder / "signups.csv").write_text("First,Email\nAnn,ann@example.com\n")
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))  # as a daemon started from / would be
    [source] = load_config(write(folder, GOOD)).sources
    source.job.source.check()
    assert [r.data for r in source.job.source.read(None)] == [{"First": "Ann", "Email": "ann@example.com"}]


def test_environment_overrides_url_and_credentials(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPTURE_BASE_URL", "https://crm.example.com/api/v1/capture")
    monkeypatch.setenv("CAPTURE_API_KEY", "env-key")
    monkeypatch.setenv("CAPTURE_API_SECRET", "env-secret-value")
    base_url, creds = load_config(write(folder, GOOD)).api()
    assert base_url == "https://crm.example.com/api/v1/capture"
    assert (creds.api_key, creds.api_secret.get_secret_value()) == ("env-key", "env-secret-value")


def test_every_problem_is_listed_at_once_with_file_and_key(folder: Path) -> None:
    text = GOOD.replace("[capture]\n", "[capture]\nbatch_size = 500\nconcurency = 2\n")
    text = text.replace('schedule = "*/5 * * * *"', 'schedule = "every now and then"')
    text = text.replace('type = "csv"', 'type = "csv"\ndelimeter = ";"')
    text = text.replace('email = "Email"', 'emial = "Email"')
    text += '\n[[sources]]\nname = "signups"\ntype = "nope"\n'
    path = write(folder, text)
    found = problems(path)
    assert all(p.startswith(f"{path}: ") for p in found)
    joined = "\n".join(found)
    for expected in (
        "capture.batch_size:",
        "capture.concurency: unknown option",
        "sources.signups.schedule:",
        "sources.signups.delimeter: unknown option",
        "sources.signups.mapping.emial:",
        "is used by another source",
        "sources.signups.type:",
        "sources.signups.mapping: required",
    ):
        assert expected in joined, expected


def test_a_secret_in_the_file_is_refused_and_never_echoed(folder: Path) -> None:
    path = write(folder, GOOD.replace("[capture]\n", '[capture]\napi_secret = "toml-secret-value"\napi_key = "k"\n'))
    found = problems(path)
    assert any("capture.api_secret: credentials are not accepted" in p and "CAPTURE_API_SECRET" in p for p in found)
    assert any("capture.api_key: credentials are not accepted" in p for p in found)
    assert "toml-secret-value" not in "\n".join(found)


@pytest.mark.parametrize(
    "secret", ["file-se\ncret-value\n", "file-se\rcret-value", "fïle-secret-value", "file\x00secret"]
)
def test_a_secret_an_http_header_cannot_carry_is_a_config_problem_that_never_shows_it(
    folder: Path, secret: str
) -> None:
    (folder / "secrets" / "secret").write_text(secret)
    path = write(folder, GOOD)
    [found] = [p for p in problems(path) if "credentials:" in p]
    assert (
        f"the secret from file {folder / 'secrets' / 'secret'} holds a character an HTTP header cannot carry" in found
    )
    assert "se" + "cret-value" not in found and "fïle" not in found


def test_plain_http_to_a_remote_host_is_refused_unless_allowed(folder: Path) -> None:
    remote = GOOD.replace("http://127.0.0.1:8765", "http://crm.example.com")
    path = write(folder, remote)
    assert any(p.startswith(f"{path}: capture.base_url: refusing plain http") for p in problems(path))
    allowed = remote.replace("[capture]\n", "[capture]\nallow_insecure_http = true\n")
    assert load_config(write(folder, allowed)).base_url == "http://crm.example.com/api/v1/capture"


def test_missing_credentials_are_reported_when_the_api_is_needed(folder: Path) -> None:
    (folder / "secrets" / "secret").unlink()
    assert any("capture.api_secret_file: cannot read" in p for p in problems(write(folder, GOOD)))
    no_files = GOOD.replace('api_key_file = "secrets/key"\napi_secret_file = "secrets/secret"\n', "")
    cfg = load_config(write(folder, no_files))  # status and ledger commands need no credentials
    with pytest.raises(ConfigProblem, match="CAPTURE_API_KEY"):
        cfg.api()


def test_unreadable_toml_and_a_missing_file(folder: Path) -> None:
    assert "not valid TOML" in problems(write(folder, "[capture\n"))[0]
    assert "no such config file" in problems(folder / "absent.toml")[0]


def test_the_cli_lists_the_problems_and_exits_2(kit, tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(GOOD.replace("[capture]\n", "[capture]\nbatch_size = 0\ntimeout_s = -1\n"))
    result = kit.run("sync", "-c", str(path))
    assert result.code == 2
    assert "the configuration has 2 problem(s)" in result.stderr
    assert f"{path}: capture.batch_size:" in result.stderr and f"{path}: capture.timeout_s:" in result.stderr
    assert "Traceback" not in result.stderr
    from_env = kit.run("status", env=kit.env(CAPTURE_SYNC_CONFIG=str(path)))
    assert from_env.code == 2 and str(path) in from_env.stderr


def test_the_example_config_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPTURE_API_KEY", "example-key")
    monkeypatch.setenv("CAPTURE_API_SECRET", "example-secret")
    example = Path(__file__).resolve().parents[2] / "config" / "capture-sync.example.toml"
    cfg = load_config(example)
    assert [s.name for s in cfg.sources] == ["signups"]
    assert cfg.api()[0].startswith("https://")
