"""Plots: drawn from the SpamAssassin split and checked to be real pictures, not blanks."""

import sys

import numpy as np
import pytest

from textnb.decision import calibration as cal

plots = pytest.importorskip("textnb.evaluation.plots")
pytest.importorskip("matplotlib", reason="plots are the optional [plots] extra")


def _image_stats(path):
    from matplotlib.image import imread

    image = imread(path)  # (height, width, channels), floats in [0, 1]
    colours = np.unique((image[..., :3] * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    ink = np.mean(np.any(image[..., :3] < 0.9, axis=-1))  # share of pixels not near white
    return image.shape, len(colours), ink


def test_roc_curve_by_hand():
    hm, sm = plots.roc_curve(np.array([0, 0, 1, 1]), np.array([0.1, 0.6, 0.4, 0.9]))
    # Flag nothing, then >= 0.9, >= 0.6, >= 0.4, everything.
    np.testing.assert_allclose(hm, [0, 0, 0.5, 0.5, 1])
    np.testing.assert_allclose(sm, [1, 0.5, 0.5, 0, 0])


def test_missing_matplotlib_is_an_operator_error(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # import now fails
    y = np.array([0, 1])
    with pytest.raises(plots.PlotError, match=r"pip install 'textnb\[plots\]'"):
        plots.tuning_figure(tmp_path / "x.png", y, np.array([-1.0, 1.0]), np.array([0.2, 0.8]),
                            cal.fit(np.array([-1.0, 1.0]), y), (1, 9))


@pytest.mark.corpus
@pytest.mark.slow
def test_spamassassin_plots_exist_and_show_something(shared_corpora, tmp_path):
    from _spamassassin import spamassassin_tuned

    tuned, y_test, scores = spamassassin_tuned()
    test_png = plots.tuning_figure(tmp_path / "test.png", y_test, scores,
                                   cal.predict_proba(tuned.calibration, scores),
                                   tuned.calibration, tuned.cost_ratios, title="SpamAssassin test")
    cv_png = plots.tuning_figure(tmp_path / "cv.png", tuned.y, tuned.log_odds,
                                 tuned.p_cross_fitted, tuned.calibration, tuned.cost_ratios)
    for path in (test_png, cv_png):
        assert path.stat().st_size > 50_000
        shape, n_colours, ink = _image_stats(path)
        assert shape[:2] == (int(5.2 * 110), 16 * 110)
        # Three panels of curves, markers and text in several colours, not a blank canvas.
        assert n_colours > 200 and 0.02 < ink < 0.5
