"""MLflow: runs that always end, the leaderboard experiment and its view, the leaderboard report."""
