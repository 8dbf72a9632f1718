"""Figures: missing values carried forward, smoothing, the x axis."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import disk_full_for_staged_files, run
from rollax.cli import main
from rollax.run.plots import carry_forward, plot_runs, smooth


def test_carry_forward_fills_gaps_with_the_last_value():
    curve = np.array([[np.nan, 1.0, np.nan, np.nan, 3.0], [2.0, np.nan, 5.0, np.nan, np.nan]])
    expected = np.array([[np.nan, 1.0, 1.0, 1.0, 3.0], [2.0, 2.0, 5.0, 5.0, 5.0]])
    np.testing.assert_array_equal(carry_forward(curve), expected)


def test_smooth_is_a_trailing_moving_average():
    np.testing.assert_allclose(smooth(np.array([1.0, 2.0, 3.0, 4.0]), 2), [1.0, 1.5, 2.5, 3.5])
    np.testing.assert_allclose(smooth(np.array([np.nan, 2.0, 4.0]), 3), [np.nan, 2.0, 3.0])
    np.testing.assert_array_equal(smooth(np.array([5.0, 6.0]), 1), [5.0, 6.0])


def test_plot_x_axis_choices(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "--updates", "2", "--batch-size", "16", "--json", "--out",
                 str(run)]) == 0
    capsys.readouterr()
    assert main(["plot", str(run), "--x", "updates", "--out", str(tmp_path / "f")]) == 0
    assert (tmp_path / "f" / "training_curve.png").is_file()
    with pytest.raises(ValueError, match="x must be one of env_steps, updates"):
        plot_runs([run], tmp_path / "g", x="time")


def test_figures_on_a_full_disk_are_one_line_naming_one_and_leave_none(tabular_run, capsys,
                                                                        tmp_path, monkeypatch):
    # every figure is staged beside its path and all are renamed once all are whole: ENOSPC
    # (a real one, from /dev/full) is one line naming the figure, exit 1, no new file (the
    # folder plot made is removed), and the figures that were there are kept
    out, kept = tmp_path / "new", tmp_path / "kept"
    kept.mkdir()
    (kept / "training_curve.png").write_text("an older figure")
    disk_full_for_staged_files(monkeypatch)
    for folder, names in ((out, None), (kept, ["training_curve.png"])):
        code, text, err = run(capsys, "plot", tabular_run, "--out", folder)
        assert (code, text, err) == (
            1, "", f"rollax plot: error: {folder / 'training_curve.png'}: No space left on "
                   f"device\n")
        assert (sorted(p.name for p in folder.iterdir()) == names if names
                else not folder.exists())
    assert (kept / "training_curve.png").read_text() == "an older figure"
    monkeypatch.undo()
    code, text, err = run(capsys, "plot", tabular_run, "--out", out)
    assert code == 0, err
    names = [f"{figure}.{suffix}" for figure in ("training_curve", "ppo_diagnostics")
             for suffix in ("png", "svg")]
    assert text.split() == [str(out / name) for name in names]
    assert sorted(p.name for p in out.iterdir()) == sorted(names)
    assert (out / "training_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_each_seed_line_in_the_legend_in_lane_order(tmp_path, capsys, monkeypatch):
    """Lanes keep the run's order (each combination's seeds in turn, the sweep as given, not
    sorted) in the figures as in summary.json, and each thin seed line has a legend entry."""
    import json

    from rollax.run import plots

    run = tmp_path / "run"
    assert main(["train", "--updates", "2", "--batch-size", "16", "--seeds", "2", "--sweep",
                 "lr=0.5,0.25", "--json", "--out", str(run)]) == 0
    capsys.readouterr()
    lanes = json.loads((run / "summary.json").read_text())["lanes"]
    figures = {}
    monkeypatch.setattr(plots, "save_figures", lambda made: figures.update(
        {path.stem: fig for path, (fig, _) in made.items()}) or [])
    plot_runs([run], tmp_path / "f")
    ax = figures["training_curve"].axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    seeds = [text for text in legend if ": seed " in text]
    assert seeds == [f"run (lr={lane['lr']:g}): seed {lane['seed']}" for lane in lanes]
    assert seeds == ["run (lr=0.5): seed 0", "run (lr=0.5): seed 1",
                     "run (lr=0.25): seed 0", "run (lr=0.25): seed 1"]
    seed_lines = [line for line in ax.get_lines() if ": seed " in line.get_label()]
    assert len(seed_lines) == len(lanes)
