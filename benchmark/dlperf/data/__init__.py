"""Data-set tools: RecordIO preparation and the small real digits set."""
