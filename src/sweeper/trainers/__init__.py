"""Trainers: each framework runs a trial in its own subprocess and emits metric events.

Frameworks are looked up by name in `sweeper.frameworks` (loaded by
`registry.get_trainer`), so importing this package loads neither fairseq nor
transformers.
"""
