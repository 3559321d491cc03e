"""Views: how results are shown (table, JSON, YAML, CSV, Markdown, HTML). They take data in and
return text; the runtime decides where it goes."""
