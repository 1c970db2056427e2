"""The pure page maths: each figure a page shows is computed by one function here, over
entries the caller loaded (no database access), so the full page, its htmx partial and its
JSON give the same number."""
