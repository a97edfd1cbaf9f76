"""What the tests and the benchmarks share, imported as `tests.support.<module>`.

- specs: the smallest valid spec, where the shipped sweeps are;
- processes: the CLI command, the clean child environment, stopping a process group;
- sweeps: the tiny `sweeper run` sweep of the integration tests and readers of its store;
- cluster: real Ray clusters and MLflow servers on 127.0.0.0/8;
- reliability: the record fault-injection tests write for docs/reliability.md
  (reliability_report.py turns it into the page; `make reliability` runs both).

pyproject.toml puts the repository root on pytest's path; bench/common.py puts it on
sys.path for `python bench/NAME.py`. Nothing here is imported by src/sweeper.
"""
