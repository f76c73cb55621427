"""Example tool packs from the seeds: orders, calendar, weather, files, and the demo."""
