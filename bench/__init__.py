"""`make bench`: workflow-jobs measured beside PgQueuer and Procrastinate (SPEC §11).

Run as `python -m bench [figure ...] [--runs N] [--quick]` from the bench
environment (`bench/run.sh` creates it). Each figure lives in its own module;
`results` renders the table written to `bench/results/latest.md`.
"""
