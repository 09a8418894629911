"""Report: figures 3-6 and the summary table of a sweep, as PNGs and one HTML page."""
