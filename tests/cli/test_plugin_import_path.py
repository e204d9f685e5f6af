"""How a `"module:Class"` source type and a mapping hook are found, as docs/sources.md says: an installed
package (or a folder on PYTHONPATH) first, then the config's own folder; never the working directory."""

from __future__ import annotations

from pathlib import Path

MODULE = '''
from connector.source import Record, Source, SourceOptions


class RowsOptions(SourceOptions):
    count: int = 2


class Rows(Source[RowsOptions]):
    """Counted rows."""

    Options = RowsOptions

    def read(self, state):
        for n in range((state or 0) + 1, self.options.count + 1):
            yield Record(str(n), {"First": f"p{n}", "Email": f"p{n}@example.com"}, n)


def fix_person(record, person):
    person["first_name"] = person["first_name"].upper()
    return person
'''

CONFIG = """
[capture]
base_url = "http://127.0.0.1:9/api/v1/capture"

[ledger]
path = "ledger.sqlite3"

[[sources]]
name = "rows"
type = "my_rows_plugin:Rows"

[sources.mapping]
first_name = "First"
email = "Email"
hook = "my_rows_plugin:fix_person"
"""


def setup(folder: Path, module_folder: Path | None = None) -> Path:
    (module_folder or folder).mkdir(parents=True, exist_ok=True)
    ((module_folder or folder) / "my_rows_plugin.py").write_text(MODULE)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "capture-sync.toml").write_text(CONFIG)
    return folder / "capture-sync.toml"


def test_a_module_beside_the_config_loads_from_any_working_directory(kit, tmp_path):
    config = setup(tmp_path / "etc")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = kit.run("sync", "-c", str(config), "--dry-run", cwd=elsewhere)
    assert result.code == 0, result.stderr
    assert '"first_name": "P1"' in result.stdout and '"record_id": "2"' in result.stdout


def test_a_module_in_the_working_directory_only_is_not_found(kit, tmp_path):
    config = setup(tmp_path / "etc", module_folder=tmp_path / "cwd")
    result = kit.run("sync", "-c", str(config), "--dry-run", cwd=tmp_path / "cwd")
    assert result.code == 2
    assert (
        "sources.rows.type: cannot load source type 'my_rows_plugin:Rows': No module named 'my_rows_plugin'"
        in result.stderr
    )
    assert "sources.rows.mapping.hook: cannot load" in result.stderr


def test_a_folder_on_pythonpath_loads_it_and_wins_over_the_config_folder(kit, tmp_path):
    config = setup(tmp_path / "etc")
    installed = tmp_path / "site"
    installed.mkdir()
    (installed / "my_rows_plugin.py").write_text(MODULE.replace('"First": f"p{n}"', '"First": f"installed{n}"'))
    result = kit.run("sync", "-c", str(config), "--dry-run", env=kit.env(PYTHONPATH=str(installed)))
    assert result.code == 0, result.stderr
    assert '"first_name": "INSTALLED1"' in result.stdout
