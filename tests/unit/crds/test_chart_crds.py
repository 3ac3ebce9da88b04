from tests.conftest import CRDS_DIR, REPO_ROOT

CHART_CRDS = REPO_ROOT / "charts" / "kpo" / "crds"


def test_chart_ships_the_same_crds_as_the_repository() -> None:
    ours = {p.name: p.read_bytes() for p in CRDS_DIR.glob("*.yaml")}
    chart = {p.name: p.read_bytes() for p in CHART_CRDS.glob("*.yaml")}
    assert chart.keys() == ours.keys(), "run `make sync-crds`"
    for name, content in ours.items():
        assert chart[name] == content, f"charts/kpo/crds/{name} differs: run `make sync-crds`"
