"""Experiments over whole runs: objectives at equal FLOPs, the demo (the main job), paired comparison."""
