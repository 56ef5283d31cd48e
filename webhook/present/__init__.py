"""Rendering: cluster figures and waiting gangs as text and HTML, pure (data in, str out)."""
