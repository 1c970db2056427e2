"""Django's SQLite backend, with reads kept up on a full disk (see :mod:`.base`)."""
