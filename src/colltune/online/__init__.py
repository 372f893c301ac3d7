"""Online tuning (issue 16, docs/online.md): the Python half.

libcolltune in online mode (native/intercept/online*.c, docs/online-native.md) draws
an arm per collective call from per-block probabilities kept in ``STATE_DIR/state.txt``
and writes ``STATE_DIR/samples/<run id>.json`` at MPI_Finalize. Here: the state file
(state.py), the update rule (update.py, identical to the C one), priors for blocks
never sampled (prior.py), samples -> results store records (records.py), the
decision table of the current choices (export.py) and the preset arms (arms.py).
"""
