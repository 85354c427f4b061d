"""Output formats: text for people, JSON and SARIF for machines."""
