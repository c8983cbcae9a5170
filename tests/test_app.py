from streamlit.testing.v1 import AppTest

from .conftest import ROOT


def test_app_starts_and_shows_the_safe_rates():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert not at.exception
    assert any("Phantom" in m.label for m in at.metric)
