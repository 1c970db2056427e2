"""Session Explorer: the Django app and its pure session engine (`explorer.session`)."""
