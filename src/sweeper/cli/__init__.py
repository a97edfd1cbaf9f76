"""Command-line interface: one module per subcommand, loaded only when it is called.

main.py       the `sweeper` entry point: the registry of subcommands
common.py     what subcommands share: load a spec or exit 2 listing every problem
run.py        `sweeper run`: parse, build the options, call `sweeper.api.run_sweep`
summarize.py  `sweeper summarize`: tables, statistics, figures, `--evaluate`
ui.py         `sweeper ui`: the MLflow UI on a sweep's store
submit.py     `sweeper submit`: `sweeper run` as a Ray job
cluster.py    `sweeper cluster up | status | down`
params.py     `sweeper params`: exact parameter counts
validate.py   `sweeper validate`: every problem of a sweep file at once
prepare.py    `sweeper prepare`: encode and binarize once
trial.py      `sweeper trial`: one trial here, without Ray or MLflow
fixture.py    `sweeper fixture`: stand-ins for files sweeper cannot download
"""
