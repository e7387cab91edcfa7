"""The web inbox: server-rendered pages (Jinja2, autoescaped) and a little JavaScript.

The templates and the static files ship inside the package; nothing is built or
downloaded at install time.
"""
