"""``jevqueue calibrate``: fit thresholds to a deployment's own recorded turns."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.governor._calibration import Fit, Observation

__all__ = ["calibrate"]


def _plot(observations: list[Observation], margin: float, fit: Fit, path: str) -> None:
    try:
        import matplotlib
    except ImportError as exc:
        raise click.UsageError(
            f'--plot needs matplotlib ({exc}): install it with pip install "jevqueue[plot]"'
        ) from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from jevqueue.governor._calibration import coverage_curve

    points = coverage_curve(observations, margin)
    fig, ax = plt.subplots(figsize=(6, 4), dpi=110)
    ax.plot([p[1] for p in points], [p[2] for p in points], "-", label=f"margin {margin:g}")
    ax.plot([fit.coverage], [fit.precision], "o", color="black", label="fitted")
    ax.set_xlabel("coverage (turns that needed a tool, forced)")
    ax.set_ylabel("precision among those turns")
    ax.set_xlim(0, 1)
    ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


@click.command()
@click.argument("records", type=click.Path(dir_okay=False, exists=True, path_type=str))
@click.option(
    "--target-precision",
    type=click.FloatRange(0, 1),
    default=0.99,
    show_default=True,
    help="The least precision of forced routes among turns that needed a tool.",
)
@click.option(
    "--no-call-cap",
    type=click.FloatRange(0, 1),
    default=0.02,
    show_default=True,
    help="The largest share of turns that needed no tool that may be forced.",
)
@click.option(
    "--prose-budget",
    type=click.FloatRange(0, 1),
    default=0.02,
    show_default=True,
    help="The largest share of turns that needed a tool the floor may send to prose.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=str),
    default=None,
    help="Write the thresholds here (read them with Thresholds.load).",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, path_type=str),
    default=None,
    help="Write a precision-coverage plot (PNG) here.",
)
def calibrate(
    records: str,
    target_precision: float,
    no_call_cap: float,
    prose_budget: float,
    out: str | None,
    plot: str | None,
) -> None:
    """Fit routing thresholds to the turn records at RECORDS.

    RECORDS is a JSON Lines file a jevqueue.TurnRecorder wrote, best in shadow mode
    (Governor(shadow=True, recorder=TurnRecorder(path))): on every delegated turn the
    tools the model called are the label. Prints precision and coverage with 95% Wilson
    intervals on the records. Exits 2 when the records cannot be read or no thresholds
    meet the targets.
    """
    from jevqueue.errors import UsageError
    from jevqueue.governor._calibration import fit_thresholds
    from jevqueue.governor._turn_recorder import observations, read_records

    try:
        labelled = observations(read_records(records))
        click.echo(f"{len(labelled)} labelled turns in {records}")
        fit = fit_thresholds(
            labelled,
            precision=target_precision,
            no_call_cap=no_call_cap,
            prose_budget=prose_budget,
        )
    except UsageError as error:
        click.echo(f"Error: {error}", err=True)
        raise SystemExit(2) from error
    t = fit.thresholds
    click.echo(f"Thresholds(confident={t.confident:g}, margin={t.margin:g}, floor={t.floor:g})")
    click.echo(fit.summary())
    if out is not None:
        t.save(
            out,
            records=records,
            labelled_turns=len(labelled),
            target_precision=target_precision,
            no_call_cap=no_call_cap,
            prose_budget=prose_budget,
            coverage=fit.coverage,
            precision=fit.precision,
        )
        click.echo(f"wrote {out}")
    if plot is not None:
        _plot(labelled, t.margin, fit, plot)
        click.echo(f"wrote {plot}")
