"""How a `"module:Class"` source type and a mapping hook are found, as the README says: by module
name on Python's import path (an installed package, or a folder on PYTHONPATH); the config's folder,
and the working directory, are not on it."""

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

CONFIG = '''
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
'''


def setup(folder: Path) -> Path:
    (folder / "my_rows_plugin.py").write_text(MODULE)
    (folder / "capture-sync.toml").write_text(CONFIG)
    return folder / "capture-sync.toml"


def test_a_module_beside_the_config_is_not_found_even_from_its_folder(kit, tmp_path):
    config = setup(tmp_path)
    result = kit.run("sync", "-c", str(config), "--dry-run", cwd=tmp_path)
    assert result.code == 2
    assert "sources.rows.type: cannot load source type 'my_rows_plugin:Rows': No module named 'my_rows_plugin'" in result.stderr
    assert "sources.rows.mapping.hook: cannot load" in result.stderr


def test_its_folder_on_pythonpath_makes_the_source_type_and_the_hook_load(kit, tmp_path):
    config = setup(tmp_path)
    result = kit.run("sync", "-c", str(config), "--dry-run", env=kit.env(PYTHONPATH=str(tmp_path)))
    assert result.code == 0, result.stderr
    assert '"first_name": "P1"' in result.stdout and '"record_id": "2"' in result.stdout
