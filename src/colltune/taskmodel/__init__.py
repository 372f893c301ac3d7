"""HAN task-based cost model autotuner (docs/taskmodel.md)."""
